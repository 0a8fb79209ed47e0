"""PrecompileSummary: what a Dynamo capture covered, as immutable plain data.

Frozen dataclass of tuples, so it pickles, compares by value and hashes. No torch
import: the summary is read by tools that never load torch.
"""

from __future__ import annotations

import collections
import dataclasses

_SHOWN = 5  # frame lists and risky slots are cut to this many in the digest


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrecompileSummary:
    """Coverage and guard information from an observed precompile capture.

    str(summary) renders a one-line digest: the counts, the dropped guards tallied
    by type, the risky slots and frame lists cut to their first five entries
    (+N more), and the first non-empty line of the first capture error. Everything
    here describes the calls that ran, not every possible input or unexecuted
    branch, and once truncated is non-empty every count and frame list is a lower
    bound.

    The guard fields hold (guard_type, source) slots, the source spelled with the
    local scope stripped (L['self'].act -> self.act; G['CFG'].width unchanged). Each
    list holds a slot once, however many frames or variants carried it. Relations,
    stated rather than checked: kept_guards and dropped_guards are disjoint within
    one frame variant; risky_dropped_guards is drawn from dropped_guards;
    policy_dropped_guards is disjoint from both; dropped_guard_code draws its slots
    from dropped_guards and policy_dropped_guards; every wont_generalize source is
    the source half of a kept_guards slot.

    Variables:
        frames: Captured frames, bypassed/truncated/uncovered ones included.
        resume_functions: Of those, the graph-break continuations.
        guarded_codes: Guarded code objects across all frames.
        backend_graphs: Compiled backend graphs.
        bypassed: co_name of each frame the package holds nothing servable for.
        truncated: co_name (filename:firstlineno) of each frame that hit the
            recompile limit (a lower bound).
        uncovered_frames: co_name of each frame that ran, ended with no guarded
            code and was not bypassed.
        wont_generalize: guard sources a kept value-equality guard on a bare
            argument name pins while no other variant serves another value.
        dropped_guards: slots the serialized copy's guard filter rejected.
        kept_guards: slots the filter kept and the invariance policy left in place.
        risky_dropped_guards: the subset of dropped_guards observed to tell
            captured variants apart, or a configuration-chosen binding.
        policy_dropped_guards: kept slots the invariance policy dropped because
            they held identically across every captured variant.
        dropped_guard_code: (guard_type, source, rendered_check) per dropped slot
            whose guard rendered a check.
        capture_errors: one message per distinct exception a capture call raised,
            the exception type first ("RuntimeError: boom").
    """

    frames: int
    resume_functions: int
    guarded_codes: int
    backend_graphs: int
    bypassed: tuple[str, ...] = ()
    truncated: tuple[str, ...] = ()
    uncovered_frames: tuple[str, ...] = ()
    wont_generalize: tuple[str, ...] = ()
    dropped_guards: tuple[tuple[str, str], ...] = ()
    kept_guards: tuple[tuple[str, str], ...] = ()
    risky_dropped_guards: tuple[tuple[str, str], ...] = ()
    policy_dropped_guards: tuple[tuple[str, str], ...] = ()
    dropped_guard_code: tuple[tuple[str, str, str], ...] = ()
    capture_errors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Lists given by a caller become tuples, so the summary stays hashable.
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, list):
                value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
                object.__setattr__(self, field.name, value)

    @property
    def complete(self) -> bool:
        """Whether the capture covers everything it exercised.

        Coverage only: False if a frame was bypassed, hit the recompile limit
        (truncated) or ended with no guarded code (uncovered_frames), if a capture
        call raised (capture_errors), or if nothing was compiled (both
        guarded_codes and backend_graphs must be non-zero).
        """
        return (
            not self.bypassed
            and not self.truncated
            and not self.uncovered_frames
            and not self.capture_errors
            and self.guarded_codes > 0
            and self.backend_graphs > 0
        )

    @property
    def dropped_guard_types(self) -> dict[str, int]:
        """The distinct dropped slots counted by guard type."""
        return dict(collections.Counter(t for t, _ in self.dropped_guards))

    @property
    def kept_guard_types(self) -> dict[str, int]:
        """The distinct kept slots counted by guard type."""
        return dict(collections.Counter(t for t, _ in self.kept_guards))

    def __str__(self) -> str:
        parts = [
            f"{_count(self.frames, 'frame')} ({self.resume_functions} from graph breaks)",
            _count(self.guarded_codes, "guarded code"),
            _count(self.backend_graphs, "backend graph"),
        ]
        if self.dropped_guards:
            parts.append(
                f"dropped guards {self.dropped_guard_types} ({len(self.kept_guards)} kept)"
            )
        if self.risky_dropped_guards:
            risky = tuple(f"{t} {src}" for t, src in self.risky_dropped_guards)
            parts.append(f"RISKY drops {_first(risky)}")
        if self.policy_dropped_guards:
            parts.append(_count(len(self.policy_dropped_guards), "policy-dropped guard"))
        if self.wont_generalize:
            parts.append(_count(len(self.wont_generalize), "value-pinned source"))
        if self.uncovered_frames:
            parts.append(f"{len(self.uncovered_frames)} UNCOVERED: {_first(self.uncovered_frames)}")
        if self.truncated:
            parts.append(f">={len(self.truncated)} TRUNCATED: {_first(self.truncated)}")
        if self.bypassed:
            parts.append(f"{len(self.bypassed)} BYPASSED: {_first(self.bypassed)}")
        if self.capture_errors:
            n = len(self.capture_errors)
            first_line = next(
                (line for line in self.capture_errors[0].splitlines() if line.strip()), ""
            )
            clause = f"{n} CAPTURE ERROR{'' if n == 1 else 'S'}: {first_line!r}"
            if n > 1:
                clause += f" +{n - 1} more"
            parts.append(clause)
        return ", ".join(parts)


def _count(k: int, noun: str) -> str:
    return f"{k} {noun}" if k == 1 else f"{k} {noun}s"


def _first(items: tuple[str, ...]) -> str:
    more = len(items) - _SHOWN
    return f"{list(items[:_SHOWN])}" + (f" +{more} more" if more > 0 else "")
