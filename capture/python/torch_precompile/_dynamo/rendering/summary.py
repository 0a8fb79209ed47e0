"""The PrecompileSummary of a capture session, read off its package and ledger."""

from __future__ import annotations

from typing import Any

from ..._summary import PrecompileSummary
from . import frames as _frames


def summarize(session: Any, records: list[dict[str, Any]] | None = None) -> PrecompileSummary:
    """Coverage and guard information for everything the session captured so far.

    ``records`` are the frame records the artifact is rendered from, when the
    caller already has them; otherwise they are built here. ``bypassed`` and
    ``uncovered_frames`` hold one bare co_name per frame; ``truncated`` holds
    ``co_name (filename:firstlineno)`` once per code that hit the limit; the
    invariance policy's drops (``Ledger.policy``) leave kept_guards.
    """
    entry = session.package.cache_entry()
    ledger = session.ledger
    if records is None:
        _payloads, missing = _frames.backend_payloads(session)
        records = _frames.frame_records(entry, missing, ledger.lossy(), session.graph_bypassed,
                                      session.eager_frames)
    # A graphless frame served as plain Python checks none of its guards.
    skip = {r["key"] for r in records if r["kind"] == _frames.PLAIN}
    dropped = ledger.dropped(skip)
    risky = risky_reasons(session, records)
    policy = ledger.policy(skip)
    code = ledger.dropped_code(skip, kept=policy)
    return PrecompileSummary(
        frames=len(records),
        resume_functions=sum(1 for c in entry.codes if c.install_to_global),
        guarded_codes=sum(len(c.guarded_codes) for c in entry.codes),
        backend_graphs=len({b for r in records for b in r["backend_ids"]}),
        bypassed=tuple(r["name"] for r in records if r["kind"] == _frames.BYPASSED),
        truncated=tuple(sorted(session.truncated)),
        uncovered_frames=tuple(r["name"] for r in records if r["kind"] == _frames.UNCOVERED),
        wont_generalize=ledger.wont_generalize(skip),
        dropped_guards=tuple(sorted(dropped)),
        kept_guards=tuple(sorted(ledger.kept(skip) - policy)),
        risky_dropped_guards=tuple(sorted(set(risky) & dropped)),
        policy_dropped_guards=tuple(sorted(policy)),
        dropped_guard_code=tuple((t, src, code[(t, src)]) for t, src in sorted(dropped | policy)
                                 if (t, src) in code),
        capture_errors=tuple(session.errors),
    )


def risky_reasons(session: Any, records: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """Risky dropped slot -> why: what has neither a check (a pin every serving
    mode runs) nor a proof of invariance (identity.py)."""
    skip = {r["key"] for r in records if r["kind"] == _frames.PLAIN}
    return session.ledger.risky(skip)
