# --- installed_dynamo (SERVING_MODE = "installed", not Dynamo-free) ---
# The captured entries are loaded onto the live code objects through
# torch._dynamo.package, and the frame evaluator serves them;
# torch_precompile.load() wraps the calls.

class _PcBackend:
    """What torch._dynamo.package.CompilePackage.install wants of a backend."""

    def __init__(self, backend_id, kind, payload):
        self._id, self._kind, self._payload = backend_id, kind, payload

    def after_deserialization(self):
        return _pc_payload(self._id, self._kind, self._payload)


def _pc_backends():
    """What the package installs as each compiled graph: its program where the
    artifact holds programs (GRAPHS_AS_PROGRAMS), else Dynamo's backend payload."""
    if GRAPHS_AS_PROGRAMS:
        return {bid: _PcBackend(bid, "fn", fn) for bid, fn in _pc_program_graphs().items()}
    return {bid: _PcBackend(bid, *payload) for bid, payload in _pc_unpack(_BACKENDS).items()}


def _pc_install():
    """Install the captured entries onto the live code objects through Dynamo's
    package, each variant's guard state read as this artifact serves it
    (_pc_read_state); returns the live fn."""
    import torch._dynamo.package as _package

    _pc_check_build()
    _pc_check_traced(_pc_unpack(_TRACED))
    fn = _pc_entry_function()
    cache_entry = _pc_unpack(_PACKAGE)
    backends = _pc_backends()
    pins = _pc_unpack(_VARIANT_PINS)
    try:
        for module_name in _PC_MINTED:
            _pc_minted(module_name, vars(_pc_import(module_name)))
        package = _package.CompilePackage(fn, cache_entry)
        load_state, load_manager = _package.load_guards_state, _package.load_guard_manager
        reading = []

        def read_state(blob):
            reading[:] = [_hashlib.sha256(blob).hexdigest()]
            return _pc_read_state(blob, load_state)

        def build_manager(state, target, scope):
            manager = load_manager(state, target, scope)
            frame_name, held = pins.get(reading[0], ("", []))
            checks = _pc_pin_checks({"name": frame_name}, held, scope)
            if checks is not None:
                _pc_pin_guard(manager, checks, [expr for expr, _recipe in held])
            return manager

        _package.load_guards_state, _package.load_guard_manager = read_state, build_manager
        try:
            with _pc_captured_values():
                package.install(backends)
        finally:
            _package.load_guards_state, _package.load_guard_manager = load_state, load_manager
    except _PrecompileError:
        raise
    except Exception as e:
        _pc_fail(f"cannot install onto this process: {type(e).__name__}: {e}. A captured "
                 "source may have changed since capture; capture again")
    return fn


def _pc_pin_guard(manager, checks, exprs):
    """A variant's pins as one more guard of the manager Dynamo built for it: a
    call whose bindings moved misses the variant, and the refusal names them."""
    ok, why = checks

    def check(f_locals):
        try:
            return bool(ok(f_locals))
        except Exception:  # noqa: BLE001 - a binding that cannot be read: a miss
            return False
    root = manager.root if hasattr(manager, "root") else manager
    root.add_lambda_guard(check, ["the bindings the artifact pins (PINNED_BINDINGS) still hold what "
                                  "the capture compiled against: " + ", ".join(exprs)], None)


def _pc_install_targets():
    """The live code objects _pc_install() would load entries onto."""
    from torch._dynamo.package import _lookup_code

    codes = [_pc_entry_function().__code__]
    for code in _pc_unpack(_PACKAGE).codes[1:]:
        if not code.install_to_global and not code.bypassed:
            try:
                codes.append(_lookup_code(code))
            except Exception as e:
                _pc_fail(f"cannot find the captured frame {code.python_code.co_name!r} in "
                         f"module {code.python_module!r} ({e}); capture again")
    return codes


def _pc_seeded_scopes():
    return _pc_module_scopes({FN_MODULE, *(code.python_module for code in _pc_unpack(_PACKAGE).codes)})


forward = _pc_installed_forward(_pc_install)
