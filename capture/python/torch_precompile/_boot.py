"""Interpreter-start boot, run from the shim's ``sitecustomize``.

Imports no torch: it only arranges that :func:`_install.on_torch_imported` runs
the moment torch finishes importing, so scripts that never import torch pay for
nothing but this module.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from types import ModuleType

_booted = False


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """One-shot finder: wraps torch's loader so install runs after torch/__init__."""

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            real_exec(module)
            from ._install import on_torch_imported

            on_torch_imported(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def boot() -> None:
    global _booted
    if _booted:
        return
    _booted = True
    from . import gates

    gates.install_process_gates()
    if "torch" in sys.modules:
        from ._install import on_torch_imported

        on_torch_imported(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _AfterTorchImport())
