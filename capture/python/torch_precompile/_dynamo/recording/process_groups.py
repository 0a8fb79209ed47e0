"""Process groups and the distributed config slot: what a capture records about
them and a serving job must match.

A process group is made anew in every job, so Dynamo's identity guard on one
(``ID_MATCH G['dist'].group.WORLD``) can never hold in another process; and
Dynamo bakes what ``torch.distributed.get_rank()`` / ``get_world_size()``
return into the graph (``y / 2``) with no guard at all beyond the function's
identity. What the graph depends on is the group's shape: its backend, world
size and this process's rank. So each of those drops becomes a *checked
recipe*, carried by the pinning mechanism (``Fact.pin``): the standalone driver
reads the group and refuses a call in a job whose group differs, naming the
field. ``compile_on_one_rank`` (read through its config entry's ContextVar,
whose identity is fixed once ``torch.compiler.config`` is imported) becomes a
check of its value.

Recipes: ``("process_group", backend, world_size, rank)`` and
``("config", module, key, value)``. The rank is ``None`` ("any rank") unless the
trace of the frame read it: every read of a rank goes through
``ProcessGroup.rank`` (``get_rank`` calls it, and Dynamo calls a group's methods
on the real object), which :func:`watching_rank_reads` counts while Dynamo
traces, leaving out the log formatter's; a guard on ``os.environ`` (torchrun's
``RANK``) counts too (:func:`reads_environ`, :func:`rank_pin`). A frame that did
not read it has the same graph on every rank, so one pair serves them all; one
that did serves the rank that captured it only.
"""

from __future__ import annotations

import contextlib
import re
import sys
from typing import Any, Iterator

from ..pin_recipes import make

# The pin expression that stands for the default group (what the baked
# functions read when called without a group).
DEFAULT_GROUP = "<default process group>"

# Config slots whose ContextVar a traced read guards by identity, and which
# the artifact checks by value instead: (module, key).
CHECKED_CONFIG = (("torch.compiler.config", "compile_on_one_rank"),)

# torch.distributed functions Dynamo calls at trace time and bakes the result
# of (torch/_dynamo/variables/torch.py, handle_constant_processgroup_functions).
_BAKED = ("get_rank", "get_world_size", "get_process_group_ranks", "_get_group_size_by_name",
          "_get_group_tag", "_rank_not_in_group", "_resolve_group_name_by_ranks_and_tag")

# A config slot's user override (a ContextVar) and what it holds. torch leaves
# the override set once any Inductor compile patched the slot (it restores the
# value, not the unset state), so a guard on what it holds depends on the
# process's history, not on the setting: both are checked by value instead.
_USER_OVERRIDE = re.compile(r"compiler(?:\.|_dot_)config'?\]?\._config\[(['\"])(\w+)\1\]\.user_override(\.get\(\))?$")


def _c10d() -> Any:
    return sys.modules.get("torch.distributed.distributed_c10d")


# Baked functions whose result is this process's rank (or whether it is in the
# group), whatever the watch saw.
_READ_RANK = ("get_rank", "_rank_not_in_group")

# Reads of a rank seen while Dynamo traced, since the last take_rank_reads().
_rank_reads = [0]


@contextlib.contextmanager
def watching_rank_reads() -> Iterator[None]:
    """Count the reads of a process group's rank made while Dynamo traces, for
    the duration of a capture call: ``ProcessGroup.rank`` is wrapped on the class
    and put back after (nested captures leave the outer wrapper in place)."""
    c10d = _c10d()
    real = None if c10d is None else c10d.ProcessGroup.__dict__.get("rank")
    if real is None or hasattr(real, "__wrapped__"):
        yield
        return
    from torch._guards import TracingContext

    def rank(self: Any, *args: Any, **kwargs: Any) -> Any:
        if TracingContext.try_get() is not None and not _for_a_log_record(sys._getframe(1)):
            _rank_reads[0] += 1
        return real(self, *args, **kwargs)

    rank.__wrapped__ = real  # type: ignore[attr-defined]
    c10d.ProcessGroup.rank = rank
    try:
        yield
    finally:
        c10d.ProcessGroup.rank = real


def _for_a_log_record(frame: Any) -> bool:
    """A read made to format a log record (torch's formatter prefixes each line
    with ``[rankN]:``, and Dynamo logs while it traces), not for the traced
    program, whose reads come through Dynamo's variable trackers."""
    while frame is not None:  # from the reader outwards: whichever comes first
        module = frame.f_globals.get("__name__", "")
        if module.startswith("torch._dynamo.variables"):
            return False
        if module == "logging" or module.startswith("torch._logging"):
            return True
        frame = frame.f_back
    return False


def take_rank_reads() -> bool:
    """Whether a rank was read while Dynamo traced since the last call; resets.
    The ledger takes it once per compiled frame, before judging its guards."""
    read, _rank_reads[0] = _rank_reads[0] > 0, 0
    return read


def _rank_of(pg: Any) -> int:
    """The group's rank, not counted as a read of the graph."""
    method = type(pg).rank
    return int(getattr(method, "__wrapped__", method)(pg))


def group_recipe(pg: Any, rank_read: bool) -> tuple[Any, ...]:
    import torch.distributed as dist

    return make("process_group", str(dist.get_backend(pg)), int(pg.size()), _rank_of(pg) if rank_read else None)


def _is_group(value: Any) -> bool:
    c10d = _c10d()
    return c10d is not None and isinstance(value, c10d.ProcessGroup)


def _baked(value: Any) -> str | None:
    c10d = _c10d()
    if c10d is None or not callable(value):
        return None
    return next((n for n in _BAKED if getattr(c10d, n, None) is value), None)


def judge(e: Any, rank_read: bool = True) -> tuple[str, tuple[str, tuple[Any, ...]]] | None:
    """(why the drop is risky unless checked, (pin expression, recipe)) for a
    dropped guard on a process group, a baked torch.distributed function or a
    checked config slot; None for any other guard. ``rank_read``: the frame's
    trace read a rank (the recipe then checks it)."""
    if not e.has_value:
        return None
    value = e.value
    expr = e.orig_guard.originating_source.name
    if _is_group(value):
        return ("holds a process group made at run time, whose identity no serving process can "
                "match; the artifact checks its backend, world size and rank instead",
                (expr, group_recipe(value, rank_read)))
    name = _baked(value)
    if name is not None:
        c10d = _c10d()
        if not c10d.is_initialized():
            return None
        return (f"Dynamo baked what torch.distributed.{name}() returned into the graph, which "
                "the artifact checks against the live process group",
                (DEFAULT_GROUP, group_recipe(c10d._get_default_group(), rank_read or name in _READ_RANK)))
    key = overridden_slot(expr)
    if key is not None:
        module = dict((k, m) for m, k in CHECKED_CONFIG)[key]
        config = sys.modules.get(module)
        if config is not None:
            return (f"reads the configuration slot {module}.{key} through its override, which "
                    "the artifact checks by value",
                    (f"{module}.{key}", make("config", module, key, getattr(config, key))))
    return None


def reads_environ(names: Any) -> bool:
    """Whether guards of these sources read ``os.environ``, where torchrun puts
    each worker's ``RANK`` and ``LOCAL_RANK``: counted as a read of the rank.
    Dynamo inlines ``os.environ[...]``, ``.get()`` and ``os.getenv()`` down to
    the mapping's ``_data`` dict, which the guards name."""
    return any("environ._data" in (n or "") for n in names)


def rank_pin() -> tuple[str, tuple[str, tuple[Any, ...]]] | None:
    """(why, pin) checking the default group's rank, for a frame whose trace read
    a rank but dropped no guard on a process group (``os.environ['RANK']``);
    None outside a torch.distributed job."""
    c10d = _c10d()
    if c10d is None or not c10d.is_initialized():
        return None
    return ("the trace read this process's rank (os.environ or a process group) and Dynamo "
            "baked it into the graph; the artifact checks it against the live "
            "process group", (DEFAULT_GROUP, group_recipe(c10d._get_default_group(), True)))


def overridden_slot(source: str) -> str | None:
    """The checked config slot whose user override ``source`` reads, or None."""
    m = _USER_OVERRIDE.search(source)
    if m is not None and any(m.group(2) == key for _module, key in CHECKED_CONFIG):
        return m.group(2)
    return None
