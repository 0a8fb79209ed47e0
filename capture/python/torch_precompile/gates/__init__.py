"""Torch-side lockdown gates: each module patches one subsystem so that, under
``no_compilation()`` / ``serving()`` / the startup variable, an attempted graph
trace, kernel compile, benchmark or autotune raises PrecompileError first.

- ``dynamo``: frame compiles and recompiles (cache hits never reach it);
- ``aot``: make_fx, torch.export and AOTAutograd traces;
- ``inductor``: Inductor graph compiles and its ahead-of-time APIs;
- ``autotune``: Inductor's autotuning and benchmarking;
- ``triton``: Triton kernel compiles (cache misses), autotuner and do_bench;
- ``cpp``: Inductor's C++ kernel builds and torch.utils.cpp_extension;
- ``subprocesses``: compiler executions from Python when the shim is absent.

Every gate checks the lockdown and otherwise calls the original, so unlocked use
(the capture machinery included) and eager PyTorch are unaffected. Gates on
lazily imported torch/Triton modules are armed when those modules import.

No torch import here (TORCH_LOGS walks this package while torch imports).
"""

from __future__ import annotations

import _thread

_lock = _thread.allocate_lock()  # not threading: this package is imported at every boot
_process_gates = False
_torch_gates = False


def install_process_gates() -> None:
    """Gates that need no torch: compiler subprocesses when the shim is absent."""
    global _process_gates
    with _lock:
        if _process_gates:
            return
        _process_gates = True
    from . import subprocesses

    subprocesses.install()


def install_all() -> None:
    """Arm every torch-side gate. Called once, after torch has imported."""
    global _torch_gates
    install_process_gates()
    with _lock:
        if _torch_gates:
            return
        _torch_gates = True
    from . import aot, autotune, cpp, dynamo, inductor, triton

    for module in (dynamo, aot, inductor, autotune, triton, cpp):
        module.install()
