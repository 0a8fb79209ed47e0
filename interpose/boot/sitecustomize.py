"""precompile's boot hook, installed as <libdir>/boot/sitecustomize.py.

libprecompile.so puts this directory first on PYTHONPATH in Python processes,
so this runs at interpreter start (site imports `sitecustomize`). It boots the
Python layer when the torch_precompile package is importable (its boot imports
no torch), then chains to the `sitecustomize` this file shadows, if any.
"""


def _precompile_boot():
    try:
        import torch_precompile._boot as boot
    except ImportError as e:
        # Only the package itself being absent is expected; an ImportError
        # from inside it is a real error and surfaces as site reports it.
        if e.name in ("torch_precompile", "torch_precompile._boot"):
            return
        raise
    boot.boot()


def _precompile_chain():
    """Imports the next `sitecustomize` on sys.path, the one this shadows."""
    import os
    import sys

    here = os.path.normcase(os.path.dirname(os.path.abspath(__file__)))

    def is_here(entry):
        if not isinstance(entry, str):
            return False
        return os.path.normcase(os.path.abspath(entry or os.curdir)) == here

    removed = [(i, p) for i, p in enumerate(sys.path) if is_here(p)]
    for i, _ in reversed(removed):
        del sys.path[i]
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize as chained
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        chained = None
    finally:
        for i, p in removed:
            sys.path.insert(i, p)
        if me is not None:
            sys.modules["sitecustomize"] = me
    return chained


try:
    _precompile_boot()
finally:
    # the module the chain imported, or None
    _chained = _precompile_chain()
