"""DynamoTracer: the multi-graph capture and its serving.

Every frame Dynamo compiles while the caller's calls run is recorded through
``torch._dynamo.package.CompilePackage``; the artifact dispatches among the
captured variants by their guards (standalone) or installs them onto the live
code objects (installed).

Capture:

- ``session``: the capture session (Dynamo wrapper, per-call config, truncation);
- ``capture``: DynamoCapture, the public state machine and the write gates;
- ``guards``: the guard filter and its ledger (kept, dropped, risky, pinned);
- ``identity``: the rule for identity guards (invariant by proof, checked by a
  portable key, or refused);
- ``library_objects``: checks for dropped guards on library objects (configs, optimizers,
  factory-made functions), in place of a refusal;
- ``process_groups``: what a capture records of process groups and a serving job matches;
- ``pin_recipes``: the one vocabulary of pin recipes (each kind's fields, how it is
  named, which driver check serves it), which the three modules above build with;
- ``minted``: the globals Dynamo mints into a module and how serving gets each back;
- ``summary``: the PrecompileSummary of a session;
- ``frames``: the package's frames as artifact records, reachability, serving mode.

Writing the artifact ("Dynamo-free" = served without Dynamo imported, the one
name for it: the ``dynamo_free*`` modules build that form, the driver's
``dynamo_free_checks`` and ``installed_dynamo_free`` serve it, ``DYNAMO_FREE`` in
the metadata says an artifact has it):

- ``render``: python_code and the cache envelope, sections per ``driver.CONTRACTS``;
- ``dynamo_free``: the Dynamo-free form of the frames; ``dynamo_free_guards``: a variant's guards
  as source; ``dynamo_free_graphs``: the compiled graphs as source programs;
  ``dynamo_free_autograd``: a graph that needs autograd at run time as one program;
- ``captured_values``: the driver's captured value guards, for the Dynamo-free capture;
- ``driver/``: the serving half, source parts joined into python_code by mode
  (``driver.CONTRACTS`` declares the parts, sections and names of each mode).

Serving:

- ``load``: one loader per serving mode (standalone, installed);
- ``installed``: the installed runnable's call path under each stance.

No torch import here (TORCH_LOGS walks this package while torch imports).
"""
