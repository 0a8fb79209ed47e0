"""Interpreter-start boot, run from the shim's ``sitecustomize``: the entry at
the top of the package, which nothing in it imports.

Imports no torch and almost nothing else: it registers
:func:`_install.on_torch_imported` with the package's one after-import hook
(``gates.on_import``) and arms the zero-code modes asked for, so a script that
never imports torch pays for this module alone. Booting happens under
the shim, which gates compiler executions natively; the Python-level subprocess
gates are for processes without it (``install()``).
"""

from .gates.on_import import when_imported

_booted = False


def _install(torch):
    from ._install import on_torch_imported

    on_torch_imported(torch)


def boot():
    global _booted
    if _booted:
        return
    _booted = True
    when_imported("torch", _install, strict=True)
    # The zero-code modes only when asked for: their module (and the settings
    # table's dataclasses/typing imports) costs ~20 ms of every interpreter start.
    import os

    if os.environ.get("PRECOMPILE_CAPTURE") or os.environ.get("PRECOMPILE_SERVE"):
        from . import _envmodes

        _envmodes.arm()
    if os.environ.get("PRECOMPILE_CAPTURE_DIR") or os.environ.get("PRECOMPILE_SERVE_DIR"):
        from . import _compile_sites

        _compile_sites.arm()
