"""The Dynamo-free form of a standalone artifact: frames, guards and graphs that serve
with neither ``torch._dynamo`` nor ``torch._inductor`` imported.

An import alias of Dynamo's own modules in the transformed bytecode (the
profiler hooks around each graph call) is renamed and bound to a stand-in that
imports the module on first attribute use, which only a running profiler makes. Code
objects travel as marshal data (Python-version-locked, as the artifact
already is), guards as the source checks ``dynamo_free_guards`` writes, graphs as the
programs ``dynamo_free_graphs`` writes. ``build`` raises ``NotDynamoFree`` naming the first
part that has no such form; the artifact then keeps Dynamo's own state.
"""

from __future__ import annotations

import contextlib
import marshal
from typing import Any, Iterator

from . import frames as _frames
from . import dynamo_free_graphs
from ..captured_values import built_with_captured_values
from .dynamo_free_guards import HEAVY, NotDynamoFree, Program, record, render
LAZY = "_pc_lazy"  # the prefix a Dynamo-module alias is renamed under (see the driver)


def _renamed(code: Any, names: dict[str, str]) -> Any:
    """code with its global loads of ``names`` renamed, nested code included, so a
    stand-in bound under the new name never shadows the alias a live Dynamo compile
    of the same module binds (it asserts the alias is the real module)."""
    if not names:
        return code
    consts = tuple(_renamed(c, names) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_names=tuple(names.get(n, n) for n in code.co_names), co_consts=consts)


def _reads(source: str, aliases: set[str]) -> list[str]:
    """The aliases among ``aliases`` the checks subscript a globals dict with (the
    messages that merely name one are text, not reads)."""
    import ast

    return sorted({n.slice.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Subscript)
                   and isinstance(n.slice, ast.Constant) and n.slice.value in aliases})


class DynamoFree:
    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.guards: dict[str, Program] = {}
        self.programs: dict[str, str] = {}


def _marshal(code: Any, what: str) -> bytes:
    try:
        return marshal.dumps(code)
    except ValueError as e:
        raise NotDynamoFree(f"the code of {what} cannot be marshalled ({e})") from None


def serving_state(state: Any, policy: set[tuple[str, str]]) -> Any:
    """The guard state without the invariance policy's slots, as the driver serves
    it (see _pc_serving_state there, which does the same to a Dynamo-built manager)."""
    from ..captured_values import without_policy_slots

    without_policy_slots(state.output_graph, policy)
    return state


def build(session: Any, records: list[dict[str, Any]], payloads: dict[str, Any],
          policy: set[tuple[str, str]]) -> DynamoFree:
    import importlib

    from torch._dynamo.package import SerializedCode, load_guards_state

    form = DynamoFree()
    form.programs = dynamo_free_graphs.programs(session, payloads)
    for fi, r in enumerate(records):
        target = SerializedCode.to_code_object(r["code"])
        out = {k: v for k, v in r.items() if k not in ("code", "variants", "imports")}
        heavy = {a: LAZY + a for a, m in r["imports"].items() if m.startswith(HEAVY)}
        out["imports"] = {heavy.get(a, a): m for a, m in r["imports"].items()}
        out["code"] = _marshal(target, f"frame {r['name']!r}")
        out["variants"] = []
        if r["kind"] == _frames.COMPILED:
            scope = vars(importlib.import_module(r["module"]))
            for vi, (blob, body) in enumerate(r["variants"]):
                state = serving_state(_read_guards_state(load_guards_state, blob, r["name"]), policy)
                name = f"_pc_guards_{fi}_{vi}"
                with built_with_captured_values(state):  # os.environ, a module constant
                    recording = record(state, target, scope)
                prog = form.guards[name] = render(recording, scope)
                read = _reads(prog.source, set(heavy))
                if read:
                    raise NotDynamoFree(f"the guards of {r['name']!r} read Dynamo's own modules {read}")
                out["variants"].append((name, _marshal(_renamed(SerializedCode.to_code_object(body), heavy),
                                                       f"a variant of {r['name']!r}"),
                                        state.output_graph.name_of_builtins_dict_key_in_fglobals))
        form.frames.append(out)
    return form


def _read_guards_state(load: Any, blob: bytes, frame: str, *, optimizers_as_saved: bool = True) -> Any:
    """Dynamo's guard state read back, as a serving process would. Its pickle prunes
    what it cannot save (tensors) and leaves a placeholder, which some classes'
    ``__setstate__`` refuses: an optimizer whose state holds step tensors (restored
    as saved for a Dynamo-free build, which reads nothing of its state; a serving
    process that builds Dynamo's guards reads it as Dynamo does)."""
    try:
        from ..captured_values import fsdp_modules_kept

        restore = _optimizers_restored_as_saved() if optimizers_as_saved else contextlib.nullcontext()
        with restore, fsdp_modules_kept():
            return load(blob)
    except Exception as e:  # noqa: BLE001 - any failure here is the same refusal
        raise _unreadable(frame, e) from e


def _unreadable(frame: str, e: Exception) -> Exception:
    import torch

    from ..._errors import PrecompileError

    text = f"{type(e).__name__}: {e}"
    head = (f"capture: the guards Dynamo saved for frame {frame!r} cannot be read back ({text}), "
            "so no serving process could check them")
    if "DefaultsSource" in text:
        why = (f"torch {torch.__version__} cannot read back a guard on a function's default argument "
               "read through another function; pass that value as an argument, or capture on torch 2.15")
    elif "TracingContext" in text:
        why = (f"torch {torch.__version__} rebuilds one of these guards only inside a trace (a "
               "flex_attention score_mod on 2.11); capture on torch 2.15, or keep it out of fn")
    else:
        why = ("they hold an object whose class rebuilds itself from state Dynamo left out (a "
               "torch.optim optimizer with its step state, when opt.step() runs inside fn). Keep "
               "that object out of the captured function: call opt.step() and zero_grad() after "
               "it, outside the capture")
    return PrecompileError(f"{head}: {why}")


def check_readable(records: list[dict[str, Any]]) -> None:
    """Refuse at capture a variant whose guard state a serving process that builds
    Dynamo's guards could not read back (that process would refuse at load)."""
    from torch._dynamo.package import load_guards_state

    for r in records:
        if r["kind"] == _frames.COMPILED:
            for blob, _body in r["variants"]:
                _read_guards_state(load_guards_state, blob, r["name"], optimizers_as_saved=False)


@contextlib.contextmanager
def _optimizers_restored_as_saved() -> Iterator[None]:
    """While a guard state is read: torch.optim's ``__setstate__`` methods fill in
    defaults and convert each parameter's ``step`` to a tensor, which fails on the
    placeholder Dynamo's pickle leaves for a pruned tensor. The guards read the
    optimizer's structure and hyper-parameters, never its state tensors, so it is
    restored as saved. Put back when the read ends."""
    import torch

    def as_saved(self: Any, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    classes, stack = [], [torch.optim.Optimizer]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "__setstate__" in cls.__dict__:
            classes.append((cls, cls.__dict__["__setstate__"]))
    for cls, _real in classes:
        cls.__setstate__ = as_saved
    try:
        yield
    finally:
        for cls, real in classes:
            cls.__setstate__ = real

