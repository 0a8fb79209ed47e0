"""Interpreter-start boot, run from the shim's ``sitecustomize``.

Imports no torch and almost nothing else: it only arranges that
:func:`_install.on_torch_imported` runs the moment torch finishes importing, so a
script that never imports torch pays for this module alone. Booting happens under
the shim, which gates compiler executions natively; the Python-level subprocess
gates are for processes without it (``install()``).
"""

import sys

_booted = False


class _AfterTorchImport:
    """One-shot meta-path finder: wraps torch's loader so ``then(torch)`` runs right
    after torch/__init__ has executed (and before the importer sees the module)."""

    def __init__(self, then):
        self._then = then

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            self._then(module)

        spec.loader.exec_module = exec_module
        return spec


def when_torch_imported(then):
    """Run ``then(torch)`` now if torch is imported, else right after it is."""
    if "torch" in sys.modules:
        then(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _AfterTorchImport(then))


def _install(torch):
    from ._install import on_torch_imported

    on_torch_imported(torch)


def boot():
    global _booted
    if _booted:
        return
    _booted = True
    when_torch_imported(_install)
    # The zero-code modes only when asked for: their module (and the settings
    # table's dataclasses/typing imports) costs ~20 ms of every interpreter start.
    import os

    if os.environ.get("PRECOMPILE_CAPTURE") or os.environ.get("PRECOMPILE_SERVE"):
        from . import _envmodes

        _envmodes.arm()
    if os.environ.get("PRECOMPILE_CAPTURE_DIR") or os.environ.get("PRECOMPILE_SERVE_DIR"):
        from . import _compile_sites

        _compile_sites.arm()
