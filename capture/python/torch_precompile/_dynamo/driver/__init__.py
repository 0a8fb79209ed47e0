"""The serving half of a Dynamo artifact, as source parts the renderer joins:
an artifact holds only the parts of its own mode (``parts``), each of which
reads on its own. They are templates, not modules: they read the artifact's
metadata and sections, and the parts joined before them (common.py's header
says what each holds). ``_compat/driver_part.py`` is the part with the torch
differences they meet."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent
_COMPAT = _HERE.parent.parent / "_compat" / "driver_part.py"


def parts(mode: str, *, dynamo_free: bool, graph_programs: bool) -> list[Path]:
    """The part files an artifact of this serving mode joins, in order."""
    names = ["common", "fingerprints", "pins"]
    if dynamo_free or graph_programs:
        names.append("graph_programs")
    names.append("lean_checks" if dynamo_free else "dynamo_state")
    files = [_HERE / f"{name}.py" for name in names] + [_COMPAT]
    serving = "standalone" if mode == "standalone" else "installed_lean" if dynamo_free else "installed_dynamo"
    return files + [_HERE / f"{serving}.py"]


def source(mode: str, *, dynamo_free: bool, graph_programs: bool) -> str:
    """The driver of an artifact of this serving mode."""
    return "\n\n".join(p.read_text(encoding="utf-8").strip("\n") + "\n"
                       for p in parts(mode, dynamo_free=dynamo_free, graph_programs=graph_programs))
