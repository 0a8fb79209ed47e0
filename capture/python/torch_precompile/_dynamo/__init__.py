"""DynamoTracer: the multi-graph capture and its serving.

Every frame Dynamo compiles while the caller's calls run is recorded through
``torch._dynamo.package.CompilePackage``; the artifact dispatches among the
captured variants by their guards (standalone) or installs them onto the live
code objects (installed).

By stage, each importing only the stages after it and the shared modules
(tests/test_import_graph.py checks the order):

- ``capture``: DynamoCapture, the public state machine: it opens a ``recording``
  session, and writes what it recorded through ``rendering``;
- ``recording/``: Dynamo under a CompilePackage, call by call (``session``: the
  wrapper, the per-call config, each graph lowered as it is compiled), the guard
  filter and its ledger (``guards``), the rule for identity guards
  (``identity``), checks for library objects in place of refusals
  (``library_objects``), what a capture records of process groups
  (``process_groups``);
- ``rendering/``: the pair written from a session (``render``: python_code and
  the cache envelope, sections per ``serving.driver.CONTRACTS``), the frames as
  artifact records (``frames``), the PrecompileSummary (``summary``), and the
  form served without Dynamo ("Dynamo-free", the one name for it: ``dynamo_free``
  builds it from ``dynamo_free_guards``, a variant's guards as source, and
  ``dynamo_free_graphs``/``dynamo_free_autograd``, each graph as a program);
- ``serving/``: one loader per serving mode (``load``), the installed runnable's
  call path (``installed``), and ``driver/``, the artifact's own serving half as
  source parts joined into python_code by mode (``driver.CONTRACTS`` declares
  the parts, sections and names of each mode; the driver's ``dynamo_free_checks``
  and ``installed_dynamo_free`` serve the Dynamo-free form, ``DYNAMO_FREE`` in
  the metadata says an artifact has it).

Shared by every stage, spelled alike in capture and serving: ``spelling`` (guard
sources, slots, frame keys), ``minted`` (the globals Dynamo mints into a module),
``pin_recipes`` (the one vocabulary of pin recipes), ``captured_values`` (the
driver's value guards, run by the capture too) and ``class_paths`` (the methods a
trace found through a class, which MakeFx artifacts check too).

No torch import here (TORCH_LOGS walks this package while torch imports).
"""

# The stages in import order: a module imports only its own stage, the stages
# after it, and SHARED (tests/test_import_graph.py).
STAGES = ("capture", "recording", "rendering", "serving")
SHARED = ("spelling", "minted", "pin_recipes", "captured_values", "class_paths")
