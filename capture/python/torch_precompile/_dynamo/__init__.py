"""DynamoTracer: the multi-graph capture and its serving.

Every frame Dynamo compiles while the caller's calls run is recorded through
``torch._dynamo.package.CompilePackage``; the artifact dispatches among the
captured variants by their guards (standalone) or installs them onto the live
code objects (installed).

- ``session``: the capture session (Dynamo wrapper, per-call config, truncation);
- ``guards``: the guard filter and its ledger (kept, dropped, risky, pinned);
- ``library_objects``: checks for dropped guards on library objects (configs, optimizers,
  factory-made functions), in place of a refusal;
- ``summary``: the PrecompileSummary of a session;
- ``frames``: the package's frames as artifact records, reachability, serving mode;
- ``render``: python_code and the cache envelope;
- ``driver/``: the serving half, source parts joined into python_code by mode
  (common, pins, graph programs, Dynamo-free checks or Dynamo's state, and the
  standalone, installed-through-torch._C or installed-through-Dynamo serving);
- ``captured_values``: the driver's captured value guards, for the Dynamo-free capture;
- ``capture``: DynamoCapture, the public state machine and the write gates;
- ``load``: one loader per serving mode (standalone, installed);
- ``installed``: the installed runnable's call path under each stance.

No torch import here (TORCH_LOGS walks this package while torch imports).
"""
