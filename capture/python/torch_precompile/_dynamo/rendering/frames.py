"""The package's frames as artifact records, their backends, and the serving mode.

A record is plain data the driver rebuilds from: the frame's code object, the
module it was compiled in, the names Dynamo minted for it, and its variants
(serialized guard state + transformed bytecode). The entry is the package's
first code (CompilePackage records the captured fn first).
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

from ..._errors import PrecompileError

# Frame kinds, as the driver and the summary read them.
COMPILED = "compiled"    # at least one guarded variant
PLAIN = "plain"          # never compiled, or compiled nothing (see frame_records): run as is
BYPASSED = "bypassed"    # compiled, but nothing of it could be packaged
UNCOVERED = "uncovered"  # entered Dynamo and ended with no guarded code


def backend_payloads(session: Any) -> tuple[dict[str, Any], set[str]]:
    """Every captured backend id mapped to a picklable payload the driver turns
    back into the compiled callable, and the ids that have none.

    Inductor graphs travel as the standalone program the capture's backend
    lowered them to, or (a graph it could not lower) as the AOTAutograd bundle
    recorded under their id; eager graphs as their fx GraphModule; a graph Dynamo
    pruned to nothing as the module-level function it calls instead.
    """
    import torch

    payloads: dict[str, Any] = {}
    missing: set[str] = set()
    for backend_id in session.package.cache_entry().backend_ids:
        if backend_id in session.programs:
            payloads[backend_id] = ("program", session.programs[backend_id])
            continue
        if backend_id in session.artifacts:
            payloads[backend_id] = ("aot", session.artifacts[backend_id])
            continue
        compiled = session.package.cached_backends.get(backend_id)
        owner = getattr(compiled, "__self__", None)
        if isinstance(owner, torch.fx.GraphModule) and session.backend == "eager":
            payloads[backend_id] = ("fx", owner)
        elif isinstance(compiled, torch.fx.GraphModule) and session.backend == "eager":
            payloads[backend_id] = ("fx", compiled)
        elif isinstance(compiled, types.FunctionType) and "<locals>" not in compiled.__qualname__:
            payloads[backend_id] = ("fn", compiled)
        else:
            missing.add(backend_id)
    return payloads, missing


def _graphless(code: Any) -> bool:
    """No variant calls a compiled graph or a continuation: running the frame's
    original bytecode gives up nothing compiled."""
    from torch._dynamo.package import SerializedCode

    stack = [SerializedCode.to_code_object(g.dynamo_code) for g in code.guarded_codes]
    while stack:
        c = stack.pop()
        if any(n.startswith(("__compiled_fn", "__resume_at_")) for n in c.co_names):
            return False
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return True


def _library_code(code: types.CodeType) -> bool:
    """A function of the standard library or of torch itself. Dynamo compiles
    one as a frame of its own only when an ordinary call from a graph break
    enters it (torch 2.11 compiles ``typing.cast`` inside ``backward()``): it is
    not the user's computation, and running it as is serves the same result."""
    import os
    import sysconfig

    import torch

    roots = (sysconfig.get_paths()["stdlib"], os.path.dirname(torch.__file__))
    path = os.path.realpath(code.co_filename)
    return any(path.startswith(os.path.realpath(r) + os.sep) for r in roots)


def _lookup(code: Any) -> tuple[str, str] | None:
    """(function name, code source) an ordinary-call frame's live code object is
    found by, as Dynamo's package finds it; None for a continuation or a code
    nothing names."""
    if code.install_to_global or not code.code_source or len(code.function_names) != 1:
        return None
    return code.function_names[0], code.code_source


def frame_records(entry: Any, missing: set[str], lossy: set[tuple[str, str, int]],
                  graph_bypassed: set[tuple[str, str, int]] = frozenset(),
                  eager: Any = frozenset()) -> list[dict[str, Any]]:
    """One record per code the package holds, entry first.

    A frame other than the entry that is not a continuation and is a function
    of the standard library or torch (``_library_code``) is served as plain
    Python. So is one that compiled nothing (no graph, no continuation) and
    lost a guard to the filter (``lossy``: its variant would check less than
    the original does) or is not itself a continuation; and one bypassed (its guards could not be serialized) whose
    bypassed compiles produced no graph (``graph_bypassed`` are the frames one
    did): running its original bytecode gives up nothing compiled. A
    continuation of a library function that holds no variant is plain too
    (Dynamo gave up on it: contextlib's ``__init__`` around DDP's
    ``_inside_ddp_forward``): the function it continues runs as is, so nothing
    reaches it, unless the entry itself is library code. A frame other than the
    entry that Dynamo left to eager after a graph break it could not resume from
    (``eager``, Session.eager_frames) is plain: torch.compile runs its own
    bytecode on every later call too.
    """
    from ..spelling import frame_key

    records = []
    library_entry = bool(entry.codes) and _library_code(entry.codes[0].python_code)
    for i, code in enumerate(entry.codes):
        bypassed = code.bypassed or any(b in missing for b in code.backend_ids)
        variants = [] if bypassed else [(g.guards_state, g.dynamo_code) for g in code.guarded_codes]
        if variants and i > 0 and not code.install_to_global and _library_code(code.python_code):
            kind, variants = PLAIN, []
        elif (variants and i > 0 and _graphless(code)
                and (frame_key(code.python_code) in lossy or not code.install_to_global)):
            kind, variants = PLAIN, []
        elif variants:
            kind = COMPILED
        elif (i > 0 and code.bypassed and not code.backend_ids
              and frame_key(code.python_code) not in graph_bypassed):
            kind = PLAIN
        elif bypassed:
            kind = BYPASSED
        elif i > 0 and code.install_to_global and _library_code(code.python_code) and not library_entry:
            # a continuation of a standard-library or torch function: that function is
            # served as plain Python (above), so nothing reaches its continuation
            kind = PLAIN
        elif i > 0 and frame_key(code.python_code) in eager:
            kind = PLAIN
        elif code.has_compile_id:
            kind = UNCOVERED
        else:
            kind = PLAIN
        records.append({
            "entry": i == 0,
            "kind": kind,
            "name": code.python_code.co_name,
            "key": frame_key(code.python_code),
            "module": code.python_module,
            "code": code.python_code,
            "resume_names": list(code.function_names) if code.install_to_global else [],
            # where an ordinary-call frame's live code object is found again
            "lookup": _lookup(code),
            "imports": dict(code.import_sources),
            "backend_ids": [] if bypassed else list(code.backend_ids),
            "variants": variants,
        })
    return records


def _read_by_pins(record: dict[str, Any]) -> set[str]:
    """The by-id globals the frame's pins read (a class off a module Dynamo bound by
    id, ``G['_<id>_c0'].Tensor``): seeded with the rest, so the pin reads them."""
    import re

    from ..minted import BY_ID

    exprs = [expr for expr, _recipe in record.get("pins", [])]
    exprs += [expr for pins in record.get("variant_pins", []) for expr, _recipe in pins]
    return {n for e in exprs for n in re.findall(r"G\[['\"]([^'\"]+)['\"]\]", e) if BY_ID.match(n)}


def minted_globals(records: list[dict[str, Any]]) -> dict[str, dict[str, tuple[str, ...]]]:
    """module -> {name: recipe} for the by-id globals the compiled frames'
    bytecode loads, after checking every Dynamo-minted name each loads is one
    the driver seeds (raises PrecompileError naming the first gap)."""
    from torch._dynamo.package import SerializedCode

    from .. import minted

    backends = {b for r in records for b in r["backend_ids"]}
    resumes = {n for r in records for n in r["resume_names"]}
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for r in records:
        if r["kind"] != COMPILED:
            continue
        loaded = minted.loaded_globals(SerializedCode.to_code_object(body) for _, body in r["variants"])
        recipes = minted.by_id_recipes(r["name"], r["module"], loaded | _read_by_pins(r))
        minted.check_covered(r["name"], r["module"], loaded,
                             backends | resumes | set(r["imports"]) | set(recipes))
        out.setdefault(r["module"], {}).update(recipes)
    return out


def _named_globals(record: dict[str, Any]) -> set[str]:
    from torch._dynamo.package import SerializedCode

    out: set[str] = set()
    stack = [SerializedCode.to_code_object(body) for _, body in record["variants"]]
    if record["kind"] == PLAIN:
        stack.append(SerializedCode.to_code_object(record["code"]))
    while stack:
        code = stack.pop()
        out.update(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return out


def reachable(records: list[dict[str, Any]]) -> set[int]:
    """The frames a standalone driver reaches: the entry, then every
    continuation some reachable frame's bytecode names by LOAD_GLOBAL."""
    seen = {i for i, r in enumerate(records) if r["entry"]}
    pending = list(seen)
    named: set[str] = set()
    while pending:
        named |= _named_globals(records[pending.pop()])
        grew = {i for i, r in enumerate(records)
                if i not in seen and any(n in named for n in r["resume_names"])}
        seen |= grew
        pending.extend(grew)
    return seen


def serving_mode(records: list[dict[str, Any]]) -> str:
    """"standalone" when the entry reaches every frame that holds a variant;
    "installed" when one is entered only by an ordinary call (a graph break
    inside a child module's forward), which only the frame evaluator sees."""
    reach = reachable(records)
    compiled = {i for i, r in enumerate(records) if r["kind"] == COMPILED}
    return "standalone" if compiled <= reach else "installed"


# Remedies for the bypass reasons a user can act on, by a phrase of Dynamo's reason.
_BYPASS_REMEDIES = (
    ("Serialization of parametrized modules",
     "a module with a parametrization (torch.nn.utils.parametrize: weight_norm, "
     "spectral_norm, orthogonal; Wav2Vec2's positional convolution) is a class made at "
     "run time that no serving process can name. For serving, fold it into a plain "
     "parameter before the capture (torch.nn.utils.parametrize.remove_parametrizations("
     "module, 'weight') keeps its current value), or capture with MakeFxTracer(), which "
     "lifts the parameters as they are"),
    ("ScriptFunction'>",  # 2.15: "...ScriptFunction'> cannot be saved", 2.11: "...'> for object"
     "a TorchScript function (@torch.jit.script: DeBERTa-v2's attention helpers) reached "
     "from the frame has a type Dynamo cannot name in a package. Capture with PYTORCH_JIT=0 "
     "in the environment (set before torch is imported, so @torch.jit.script returns the "
     "Python function and Dynamo traces it); the artifact serves with TorchScript on or off"),
)


def bypass_explanation(reason: str | None) -> str:
    """Dynamo's reason for a bypass, with the remedy when one is known."""
    if not reason:
        return "(Dynamo logged why); fix that and capture again"
    first = reason.strip().splitlines()[0]
    for phrase, remedy in _BYPASS_REMEDIES:
        if phrase in reason:
            return f"Dynamo: {first!r}: {remedy}"
    return f"Dynamo: {first!r}; fix that and capture again"


def check_entry(records: list[dict[str, Any]], fn_name: str,
                bypass_reasons: dict[Any, str] | None = None) -> None:
    """Refuse an entry the artifact could not serve at all."""
    entry = records[0]
    if entry["kind"] == COMPILED:
        return
    if entry["kind"] == BYPASSED:
        reason = (bypass_reasons or {}).get(entry["key"])
        how = ("Dynamo could not package it" if reason else
               "its guards could not be serialized or its graph held parameters by static address")
        raise PrecompileError(
            f"capture: the entry frame of {fn_name} was bypassed ({how}), so no variant of "
            f"it can be served. {bypass_explanation(reason)}"
        )
    raise PrecompileError(
        f"capture: the entry frame of {fn_name} produced no guarded code, so the artifact "
        "would serve nothing; capture the function that calls the model, e.g. a "
        "module-level 'def step(model, x): return model(x)'"
    )


def main_script() -> str | None:
    """The real path of the script running as __main__ (``python app.py``), if any:
    a function defined there is served by a later run of the same script."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.realpath(path) if isinstance(path, str) and os.path.isfile(path) else None
