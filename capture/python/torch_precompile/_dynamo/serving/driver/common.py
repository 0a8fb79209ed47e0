# ---------------------------------------------------------------------------
# Driver: rebuild the captured frames and serve them. Joined from parts of
# torch_precompile/_dynamo/serving/driver/ by the renderer, each part only where this
# artifact's mode needs it (driver/__init__.py's CONTRACTS: the parts, the
# sections and program they read, what the loader reads back); they read the
# metadata constants and the opaque sections above, and each part uses only the
# parts joined before it:
#
#   _compat part   the torch differences the parts below meet
#   common         decoding, imports, seeding module globals, this host's state
#   fingerprints   what a function, builtin or value is, spelled alike in every
#                  process; the code the capture traced, checked unchanged
#   pins           the bindings a frame's guards could not check, checked by a
#                  portable key (a function's fingerprint, a builtin's name, a
#                  config's values, a process group's shape)
#   graph_programs the compiled graphs from their programs (_GRAPHS)
#   dynamo_free_checks    Dynamo-free frames: marshal'd code, generated guard checks
#     or
#   dynamo_state   frames through Dynamo's serialized guard state and payloads
#   standalone | installed_dynamo_free | installed_dynamo: the serving mode, which
#                  defines forward(), _pc_install() (installed) and
#                  _pc_seeded_scopes()
#
# A frames part (dynamo_free_checks, dynamo_state) defines _pc_code(blob),
# _pc_graphs() and _pc_variants(frame, target, scope) -> [(check, explain,
# transformed code)]: what the serving parts build a frame from.
# ---------------------------------------------------------------------------
import base64 as _base64
import functools as _functools
import hashlib as _hashlib
import importlib as _importlib
import inspect as _inspect
import marshal as _marshal
import os as _os
import pickle as _pickle
import sys as _sys
import types as _types
import zlib as _zlib

import torch as _torch

try:  # the shared error type when torch_precompile is installed; a local one otherwise
    from torch_precompile import PrecompileError as _PrecompileError
except ImportError:  # pragma: no cover - the artifact run on its own
    class _PrecompileError(RuntimeError):
        pass


def _pc_fail(message):
    raise _PrecompileError(f"precompiled {FN_NAME}: {message}")


def _pc_unpack(blob):
    return _pickle.loads(_zlib.decompress(_base64.b64decode(blob)))


# Unpacked once; every frame reads them.
_PC_MINTED = _pc_unpack(_MINTED)


def _pc_program(backend_id, text):
    """A compiled graph from its program, called as Dynamo's transformed bytecode
    calls a compiled graph: positionally."""
    ns = {"__name__": f"{__name__}.{backend_id}"}
    exec(compile(text, f"<precompiled graph {backend_id}>", "exec"), ns)
    if "CALL_POSITIONAL" in ns:  # an fx program: its graph takes the args as they come
        return _functools.partial(ns["CALL_POSITIONAL"], None)
    call = ns["call"]

    def compiled(*args):
        return call(list(args))
    compiled.__name__ = backend_id
    return compiled


def _pc_check_build():
    # Serialized code objects are Python-version-locked and the guard state
    # torch-build-locked: refuse rather than run foreign bytecode.
    here = "%d.%d" % _sys.version_info[:2]
    if PYTHON_VERSION.rsplit(".", 1)[0] != here:
        _pc_fail(f"captured on Python {PYTHON_VERSION}, this is {here}; its code objects "
                 "are version-locked: capture again under this Python")
    if TORCH_VERSION != _torch.__version__:
        _pc_fail(f"captured with torch {TORCH_VERSION}, this is {_torch.__version__}; its "
                 "guard state is build-locked: capture again under this torch")


def _pc_import(name):
    if name == "__main__":
        main, script = _sys.modules.get("__main__"), globals().get("MAIN_SCRIPT")
        here = getattr(main, "__file__", None)
        here = _os.path.realpath(here) if isinstance(here, str) else None
        if script is None or here != script:
            _pc_fail(f"captured from a function defined in the script {script or '(none)'} "
                     f"run as __main__, and this process's __main__ is "
                     f"{here or 'not a script'}; serve it from a run of that script")
        return main
    try:
        return _importlib.import_module(name)
    except ImportError as e:
        _pc_fail(f"the captured module {name!r} is not importable here ({e}); serve with "
                 "the captured code on sys.path")


def _pc_seed(scope, name, value):
    # A compile of this module collected later must not delete our binding
    # (only Dynamo, if this process has imported it, installs such hooks).
    if "torch._dynamo.utils" in _sys.modules:
        _pc_disown(_sys.modules["torch._dynamo.utils"].CleanupHook, scope, name)
    scope[name] = value


def _pc_seed_frame(frame, scope):
    """Bind a frame's import aliases in its module; an alias of one of Dynamo's
    own modules (renamed _pc_lazy* by a Dynamo-free capture) imports on first use."""
    for alias, module_name in frame["imports"].items():
        lazy = alias.startswith("_pc_lazy")
        _pc_seed(scope, alias, _PcLazyModule(module_name) if lazy else _pc_import(module_name))


def _pc_seed_builtins(scope, key, module_name):
    """Bind the builtins dict under the key a variant's guards read it through."""
    if scope.get(key, _pc_builtins(scope)) is not _pc_builtins(scope):
        _pc_fail(f"{key!r} in module {module_name!r} is bound to something "
                 "other than the builtins dict the guards read through")
    _pc_seed(scope, key, _pc_builtins(scope))


def _pc_seed_module(scope, module_name, graphs):
    """Bind in a module the frames run in what their bytecode loads by name: the
    compiled graphs and the globals Dynamo minted there. Once per module."""
    for backend_id, graph in graphs.items():
        _pc_seed(scope, backend_id, graph)
    _pc_minted(module_name, scope)


def _pc_function(code, scope, name):
    """A frame's code as Dynamo binds a continuation: a function, or a factory
    taking the closure tuple when it closes over locals."""
    if code.co_freevars:
        def factory(closure):
            return _types.FunctionType(code, scope, name, None, closure)
        return factory
    return _types.FunctionType(code, scope, name)


def _pc_minted(module_name, scope):
    # Values Dynamo bound by id (e.g. ___module_collections_<id>_c0): the
    # package does not record them, so the capture wrote a recipe for each.
    for name, recipe in _PC_MINTED.get(module_name, {}).items():
        _pc_seed(scope, name, _pc_make(recipe, f"the global {name!r} of module {module_name!r}"))


def _pc_make(recipe, what):
    """The object a capture-time recipe names: ("module", name), ("globals",
    module), ("attr", module, qualname) or ("device", str)."""
    try:
        if recipe[0] == "device":
            return _torch.device(recipe[1])
        value = _importlib.import_module(recipe[1])
        if recipe[0] == "globals":
            value = vars(value)
        elif recipe[0] == "attr":
            for part in recipe[2].split("."):
                value = getattr(value, part)
    except (ImportError, AttributeError) as e:
        _pc_fail(f"cannot re-create {what} from {recipe!r} ({e}); serve with the captured "
                 "packages installed")
    return value


def _pc_no_variant(kind):
    """Why the artifact holds no variant of a frame of this kind."""
    if kind == "bypassed":
        return ("was bypassed at capture (its guards could not be serialized or a backend "
                "was missing), so the artifact holds no variant of it")
    return ("ended with no guarded code at capture (Dynamo gave up on it), so the artifact "
            "holds no variant of it")


def _pc_failed_variants(explains, f_locals):
    """The guards each variant failed on these locals, for a refusal."""
    return " | ".join(f"variant {i}: " + " ".join(str(explain(f_locals) or "<guard failed>").split())
                      for i, explain in enumerate(explains))


def _pc_builtins(scope):
    b = scope["__builtins__"]
    return b if isinstance(b, dict) else b.__dict__


def _pc_on_this_host(global_state):
    """A GLOBAL_STATE guard's recorded state (JSON) with this host's thread count:
    the count describes the host (a torchrun worker gets 1), not the computation."""
    import json as _json

    fields = _json.loads(global_state)
    if "num_threads" in fields:
        fields["num_threads"] = _torch.get_num_threads()
    return _json.dumps(fields)


def _pc_object_setattr_ignore_descriptor(obj, name, value):
    """torch._dynamo.utils' helper the transformed bytecode replays an attribute
    set the traced code made with, on every call: the instance-dict update of
    CPython's generic setattr (a threading.local keeps its per-thread dict apart)."""
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        import threading as _threading

        if not isinstance(obj, _threading.local):
            raise
        d = _threading.local.__getattribute__(obj, "__dict__")
    d[name] = value


# What the transformed bytecode reads off Dynamo's modules outside a profiler,
# served without importing Dynamo: the attribute-set replay, and the size
# reads of a dynamic graph's inputs (Dynamo's are the same reads, wrapped so
# that Dynamo does not trace them: nothing traces here while Dynamo is absent).
_PC_LAZY_STAND_INS = {
    ("torch._dynamo.utils", "object_setattr_ignore_descriptor"): _pc_object_setattr_ignore_descriptor,
    ("torch._dynamo.utils", "call_size"): lambda x, i: x.size(i),
    ("torch._dynamo.utils", "call_stride"): lambda x, i: x.stride(i),
    ("torch._dynamo.utils", "call_storage_offset"): lambda x: x.storage_offset(),
}


class _PcLazyModule:
    """An import alias of one of Dynamo's own modules: the transformed bytecode
    loads it around each graph call but reads it only while a profiler runs or to
    replay an attribute set the traced code made or read a dynamic size (stand-ins
    above while Dynamo is not imported), so the import waits for the first other
    read (and the module is kept for the next)."""

    def __init__(self, name):
        self._pc_name = name

    def __getattr__(self, attr):
        if self._pc_name not in _sys.modules:  # else Dynamo's own, as imported
            stand_in = _PC_LAZY_STAND_INS.get((self._pc_name, attr))
            if stand_in is not None:
                return stand_in
        try:
            module = self.__dict__["_pc_module"]
        except KeyError:
            module = self.__dict__["_pc_module"] = _importlib.import_module(self._pc_name)
        return getattr(module, attr)


def _pc_module_scopes(names):
    """The module dicts of ``names`` and of every module a minted global is bound
    in: what the artifact seeds names into once loaded (torch_precompile.load()
    keeps later compiles in the process off those names)."""
    return [vars(_pc_import(name)) for name in sorted(set(names) | set(_PC_MINTED))]


def _pc_installed_forward(install):
    """forward() of an installed artifact run alone (torch_precompile.load() wraps
    the calls instead): ``install()`` (the mode part's) on the first call, then each
    call with the evaluator in run-only mode, so the entries serve and any other
    call runs as is."""
    served = []

    def forward(*args, **kwargs):
        if not served:
            served.append(install())
        from torch._C._dynamo.eval_frame import set_eval_frame

        prior = set_eval_frame(False)
        try:
            return served[0](*args, **kwargs)
        finally:
            set_eval_frame(prior)
    return forward


def _pc_live_entry():
    """The captured function as the serving process defines it, through the
    wrappers a decorator puts under its name; None when its name holds none."""
    fn = _pc_import(FN_MODULE)
    for part in FN_QUALNAME.split("."):
        fn = getattr(fn, part, None)
    for _ in range(8):
        if isinstance(fn, _types.FunctionType) and fn.__code__.co_name == FN_QUALNAME.rsplit(".", 1)[-1] \
                and not getattr(fn, "__precompile_site__", False):
            return fn
        fn = getattr(fn, "__wrapped__", None)
    return None


def _pc_entry_function():
    """The captured function as the serving process defines it."""
    fn = _pc_import(FN_MODULE)
    for part in FN_QUALNAME.split("."):
        fn = getattr(fn, part, None)
    while getattr(fn, "__precompile_site__", False):  # @torch.compile's wrapper under fn's name
        fn = fn.__wrapped__
    if not isinstance(fn, _types.FunctionType):
        _pc_fail(f"{FN_MODULE}.{FN_QUALNAME} is not a function in the serving process")
    return fn
