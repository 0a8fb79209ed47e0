"""Make ``torch.compiler.precompile`` this package, and arm the torch-side gates.

``install()`` runs when torch finishes importing in a booted process (see
``_boot``), or when a script calls ``torch_precompile.install()`` itself.
"""

from __future__ import annotations

import logging
import sys
import threading
from types import ModuleType

log = logging.getLogger(__name__)
_done = False
_lock = threading.Lock()


def install() -> None:
    """Point torch.compiler.precompile and torch.compiler.PrecompileError at this
    package and arm the lockdown gates. Imports torch; idempotent. Without the shim
    it also gates compiler subprocesses started from Python."""
    from . import _lockdown, gates

    if not _lockdown.shim_loaded():
        gates.install_process_gates()
    import torch

    on_torch_imported(torch)


def on_torch_imported(torch: ModuleType) -> None:
    global _done
    with _lock:
        if _done:
            return
        _done = True
    import torch_precompile

    from . import _errors, gates

    compiler = torch.compiler
    compiler.precompile = torch_precompile
    compiler.PrecompileError = _errors.PrecompileError
    sys.modules["torch.compiler.precompile"] = torch_precompile
    gates.install_all()
    log.debug("torch_precompile installed as torch.compiler.precompile")
