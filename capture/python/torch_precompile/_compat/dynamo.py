"""Dynamo's capture-side entry points. Versions read off PyPI's wheels
(2.11.0, 2.12.0, 2.13.0, 2.14.1, 2.15.0); each function tests for the feature,
not the version.

- ``torch._dynamo.optimize`` takes ``recompile_limit`` from 2.12 and
  ``isolate_recompiles`` from 2.13 (earlier: a config patch around each call for
  the limit, and no isolation, so a
  capture refuses a function this process already compiled, and drops the cache
  entries it made when it ends);
- ``PrecompileContext.take_artifact`` exists from 2.15 (earlier: the same pop on
  the class's artifact dict);
- ``CompilePackage.bypass_current_compile`` exists from 2.15 (earlier: a bypass
  is seen only as ``bypass_current_entry``, so no bypassed frame is told apart;
  and the compile that bypassed then dies in ``convert_frame`` on
  ``assert check_fn.guards_state is not None``, which tests its own package
  reference rather than the output graph's: ``bypass_kills_the_compile``, and
  ``killed_by_bypass`` tells that AssertionError from any other);
- ``convert_frame._compile`` takes the frame's cache entries as a list
  (``cache_entries``, ``cache_entries_for_reasons``) in 2.15 (earlier: the head
  of a linked list, ``cache_entry``, which the recompile reasons also take):
  ``compile_cache_entries``;
- serializing a frame's guard state turns any error into a ``PackageError``, so
  the frame is bypassed, from 2.15 (earlier: a type no package can name, e.g.
  a parametrized module or a TorchScript function, fails the compile with an
  ``InternalTorchDynamoError``: ``guard_serialization_error``);
- ``CompilePackage.current_entry`` is public from 2.15 (earlier: ``_current_entry``);
- the transformed bytecode reads Dynamo's profiler marker only while a profiler
  runs from 2.15 (earlier: on every call unless ``record_runtime_overhead`` is
  off, which a capture turns off so the served bytecode never imports Dynamo);
- ``GuardFilterEntry.code_parts`` exists from 2.15 (earlier: ``orig_guard.code_list``,
  read while the filter runs);
- Dynamo mints a counter-suffixed global (``__builtins_dict___<n>``,
  ``__resume_at_<offset>_<n>``) free in the frame's module from 2.15
  (``unique_id_unbound_in``; earlier: from a per-process counter alone, and
  ``CleanupHook.create`` asserts the name is unbound, so a compile in a process
  that loaded an artifact re-mints a name the artifact seeded and dies of a bare
  AssertionError; ``claim_minted_names`` steps the counter past them).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import re
from typing import Any, Callable, Iterable, Iterator

from .._errors import PrecompileError
from . import raised_in


@functools.cache
def _optimize_takes(name: str) -> bool:
    from torch._dynamo import eval_frame

    return name in inspect.signature(eval_frame._optimize).parameters


def optimize(fn: Callable[..., Any], backend: Any, *, package: Any, guard_filter_fn: Any,
             dynamic: Any, recompile_limit: int) -> Callable[..., Any]:
    """fn under Dynamo with its own recompile region where torch has one."""
    import torch

    kwargs: dict[str, Any] = dict(package=package, guard_filter_fn=guard_filter_fn, dynamic=dynamic)
    if _optimize_takes("recompile_limit"):  # 2.12+
        kwargs.update(recompile_limit=recompile_limit)
    if _optimize_takes("isolate_recompiles"):
        kwargs.update(isolate_recompiles=True)
    else:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

        if _debug_get_cache_entry_list(fn.__code__):
            raise PrecompileError(
                f"capture: {fn.__module__}.{fn.__qualname__} was already compiled in this "
                f"process, and torch {torch.__version__} cannot give a capture a recompile "
                "region of its own (its cache entries would be served instead of recorded); "
                "capture in a fresh process, or on torch 2.13 or later"
            )
    return torch._dynamo.optimize(backend, **kwargs)(fn)


def release(fn: Callable[..., Any]) -> None:
    """End a capture's hold on fn. Where optimize() could not give the capture a
    recompile region, its cache entries sit on fn's code (there were none before:
    optimize() refused that), and would be served to the next capture of fn in
    this process instead of being recorded: drop them."""
    if not _optimize_takes("isolate_recompiles"):
        from torch._C._dynamo.eval_frame import reset_code

        reset_code(fn.__code__)


@contextlib.contextmanager
def recompile_limit(limit: int) -> Iterator[None]:
    """The per-frame recompile limit for one capture call where optimize() could
    not take it."""
    import torch

    if _optimize_takes("recompile_limit"):
        yield
        return
    with torch._dynamo.config.patch(recompile_limit=limit):
        yield


def take_artifact(key: str) -> Any:
    from torch._dynamo.precompile_context import PrecompileContext

    take = getattr(PrecompileContext, "take_artifact", None)
    if take is not None:
        return take(key)
    return PrecompileContext._backend_artifacts_by_key.pop(key, None)


def watches_bypasses(package: Any) -> bool:
    return hasattr(package, "bypass_current_compile")


def compile_cache_entries(arguments: dict[str, Any]) -> tuple[list[Any], Any]:
    """From the bound arguments of ``convert_frame._compile``: the frame's cache
    entries, and what ``get_and_maybe_log_recompilation_reasons`` takes for them."""
    if "cache_entries" in arguments or "cache_entries_for_reasons" in arguments:
        entries = list(arguments.get("cache_entries") or [])
        return entries, arguments.get("cache_entries_for_reasons") or entries
    head = arguments.get("cache_entry")
    entries, entry = [], head
    while entry is not None:
        entries.append(entry)
        entry = entry.next
    return entries, head


def bypass_kills_the_compile(package: Any) -> bool:
    """Whether a package bypass ends the frame's compile in an AssertionError
    inside torch (releases without ``bypass_current_compile``, whose
    ``_compile_inner`` asserts a guard state the bypass left unset)."""
    return not hasattr(package, "bypass_current_compile") and hasattr(package, "bypass_current_entry")


def killed_by_bypass(e: BaseException) -> bool:
    """Whether ``e``, raised by a capture call in which a package bypass was seen
    where ``bypass_kills_the_compile``, is the error that bypass ended the frame's
    compile with: an AssertionError raised in ``torch._dynamo.convert_frame``
    itself (2.11.0's ``_compile_inner`` asserts ``check_fn.guards_state is not
    None``, which Dynamo passes on as it is). 2.15.0 has no such assertion: the
    compile goes on, and the frame is recorded as bypassed."""
    if not isinstance(e, AssertionError):
        return False
    frame = raised_in(e)
    return frame is not None and frame.f_globals.get("__name__") == "torch._dynamo.convert_frame"


def guard_serialization_error(e: BaseException) -> str | None:
    """The error serializing a frame's guard state raised, where torch let it fail
    the compile instead of bypassing the package (see the module docstring);
    None for any other error."""
    found = None
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:  # the innermost one, not Dynamo's wrapper
        seen.add(id(cause))
        tb = cause.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_name in ("serialize_guards", "pickle_guards_state"):
                found = f"{type(cause).__name__}: {cause}"
                break
            tb = tb.tb_next
        cause = cause.__cause__ or cause.__context__
    return found


def bypass_reason() -> str | None:
    """The reason Dynamo gave for the package bypass now in progress, read from
    its caller: ``OutputGraph.bypass_package(reason)`` logs the reason and then
    calls ``package.bypass_current_compile()`` without it. None when the caller
    is not that method (another torch release), so the message falls back to
    "Dynamo logged why"."""
    import sys

    try:
        frame = sys._getframe(2)  # bypass_package -> the session's wrapper -> here
    except ValueError:  # called from the top of a stack: not Dynamo's bypass
        return None
    if frame.f_code.co_name != "bypass_package":
        return None
    reason = frame.f_locals.get("reason")
    return reason if isinstance(reason, str) and reason else None


def current_entry(package: Any) -> Any:
    if hasattr(type(package), "current_entry") or "current_entry" in vars(package):
        return package.current_entry
    return package._current_entry


def stance() -> str:
    """The process-wide ``torch.compiler`` stance's name: the private
    ``torch._dynamo.eval_frame._stance.stance`` (a ``DynamoStance``; the same
    on 2.11 through 2.15). "default" when Dynamo is not imported: nothing can
    have set another, and reading it must not import Dynamo."""
    import sys

    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return "default" if eval_frame is None else eval_frame._stance.stance


def serving_live_entries(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` (a frame-evaluator callback that never compiles), marked so
    the evaluator serves a frame from any live cache entry of its code (a
    ``torch.compile`` of it in this process, whatever its backend) before it
    calls ``callback`` on a miss.

    The evaluator (``lookup`` in torch/csrc/dynamo/extra_state.cpp; the same
    on 2.11.0 and 2.15.0, tested on both) tries a code's precompile entries
    first, whatever the backend, then its cache entries whose backend matches
    the callback's: ``get_backend`` (cache_entry.cpp) follows the callback's
    ``_torchdynamo_orig_backend`` attributes to the end of the chain (what
    Dynamo's fail_on_recompile callback sets to serve its compiling callback's
    entries), and a backend of ``False`` matches every entry. Run-only mode is
    read off the callback itself (``callback is False``), not its backend, so a
    miss still reaches ``callback``. Where torch has ``isolate_recompiles``
    regions (2.15.0; not 2.11.0) the entries looked up are the current region's
    and the default one's: a ``torch.compile(isolate_recompiles=True)`` region
    keeps its entries to itself, as torch keeps them from any other caller."""
    callback._torchdynamo_orig_backend = False  # type: ignore[attr-defined]
    return callback


def code_parts(entry: Any) -> tuple[str, ...]:
    """A guard filter entry's rendered checks. torch 2.15 snapshots them on the
    entry; earlier releases leave them on the guard itself, where the inspection
    build that runs just before the filter put them (a later build may rebind
    them, so read them while the filter runs)."""
    parts = getattr(entry, "code_parts", None)
    if parts is None:
        parts = getattr(entry.orig_guard, "code_list", None)
    return tuple(parts or ())


def bytecode_config() -> dict[str, Any]:
    """Dynamo configuration for a capture's transformed bytecode."""
    import torch._dynamo.codegen as codegen

    if hasattr(codegen, "_pregraph_marker_enter_template"):
        return {}
    return {"record_runtime_overhead": False}


# The counter-suffixed names an artifact seeds into a module: the builtins dict
# key and continuations (compiled graphs carry a uuid, import aliases no counter).
_COUNTED = re.compile(r"^(?:__builtins_dict__|__resume_at_\d+)_(\d+)$")


def claim_minted_names(scopes: Iterable[dict[str, Any]]) -> None:
    """Keep Dynamo's later compiles in this process off the counter-suffixed names
    an artifact seeded into ``scopes`` (module dicts). torch 2.15 mints such a
    name free in the module; earlier releases take the next number of a counter
    that starts at 0 in every process, so the capture's numbers come round again:
    step that counter past the largest seeded one. Not a patch: the counter stays
    torch's, only further along (the seeded names stay bound while the artifact
    is loaded)."""
    from torch._dynamo import bytecode_transformation as bt

    if hasattr(bt, "unique_id_unbound_in"):
        return
    top = max((int(m.group(1)) for scope in scopes for name in list(scope)
               if (m := _COUNTED.match(name))), default=-1)
    if top < 0:
        return
    bt._unique_id_counter = itertools.count(max(next(bt._unique_id_counter), top + 1))


@contextlib.contextmanager
def seeded_compiled_fn_names(seed: str, counter: Iterator[int]) -> Iterator[None]:
    """Dynamo names each compiled graph ``__compiled_fn_<n>_<uuid4>`` (2.11 and
    2.15 alike, through ``bytecode_transformation.unique_id``): random, so two
    processes that compile one program (the ranks of a data-parallel job) write
    artifacts that differ in those names alone. While active, the uuid is derived
    from ``seed`` and ``counter``: the same calls compiled under the same seed
    name their graphs alike. The seed must be unique to what is captured (a
    site), as the uuid is what keeps two artifacts' names apart in one process."""
    import hashlib
    import uuid

    from torch._dynamo import bytecode_transformation

    class _Seeded:
        @staticmethod
        def uuid4() -> uuid.UUID:
            digest = hashlib.sha256(f"{seed}:{next(counter)}".encode()).digest()
            return uuid.UUID(bytes=digest[:16], version=4)

    real = bytecode_transformation.uuid
    bytecode_transformation.uuid = _Seeded  # type: ignore[assignment]
    try:
        yield
    finally:
        bytecode_transformation.uuid = real
