"""The serving half of a Dynamo artifact, as source parts the renderer joins.

An artifact holds only the parts of its own serving mode. They are templates,
not modules: each reads the artifact's metadata, its sections (opaque blobs
render writes) and program (readable graph and guard source), and the parts
joined before it. ``CONTRACTS`` declares, per mode, all of that and what the
loader reads back from the executed artifact; ``render`` writes its sections
from it, docs/CONTRACTS.md lists it, and tests/test_driver_contract.py checks
every join for a name no part, section or program defines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_HERE = Path(__file__).parent
_COMPAT = _HERE.parent.parent.parent / "_compat" / "driver_part.py"

# The metadata constants the parts read (the literal block above the program).
METADATA = ("FN_NAME", "FN_MODULE", "FN_QUALNAME", "TORCH_VERSION", "PYTHON_VERSION", "GRAPHS_AS_PROGRAMS")


@dataclass(frozen=True)
class Contract:
    """What an artifact of one serving mode holds, and what reads it."""

    parts: tuple[str, ...]       # joined in this order; each uses only what precedes it
    sections: tuple[str, ...]    # the opaque sections render writes, in this order
    program: tuple[str, ...]     # names the readable program defines (graphs, guard checks)
    host_reads: tuple[str, ...]  # names torch_precompile's loader reads from the executed artifact
    optional: tuple[str, ...] = ()  # names a part reads only where the metadata says they exist


# The pin recipe kinds, and which check of pins.py serves each: ../pin_recipes.py.

_FRONT = ("compat", "common", "fingerprints", "pins")
_SEEDED = ("_pc_seeded_scopes",)

CONTRACTS: dict[str, Contract] = {
    "standalone, Dynamo-free": Contract(
        parts=(*_FRONT, "graph_programs", "dynamo_free_checks", "standalone"),
        sections=("_TRACED", "_ENTRY_BINDING", "_FRAMES", "_MINTED"),
        program=("_GRAPHS", "_GUARD_SPECS"),
        host_reads=("forward", *_SEEDED)),
    "standalone, Dynamo's guard state": Contract(
        parts=(*_FRONT, "dynamo_state", "standalone"),
        sections=("_TRACED", "_ENTRY_BINDING", "_FRAMES", "_MINTED", "_POLICY_DROPPED", "_SLOT_SPELLING",
                  "_BACKENDS"),
        program=(),
        host_reads=("forward", *_SEEDED)),
    "installed, Dynamo-free": Contract(
        parts=(*_FRONT, "graph_programs", "dynamo_free_checks", "installed_dynamo_free"),
        sections=("_TRACED", "_FRAMES", "_SOURCES", "_TORCH_COMPILED", "_MINTED"),
        program=("_GRAPHS", "_GUARD_SPECS"),
        host_reads=("forward", "_pc_install", "_pc_install_targets", *_SEEDED, "_PC_INSTALLED", "_pc_unpack",
                    "_TORCH_COMPILED")),
    "installed, Dynamo's package, graphs as programs": Contract(
        parts=(*_FRONT, "graph_programs", "dynamo_state", "installed_dynamo"),
        sections=("_TRACED", "_PACKAGE", "_VARIANT_PINS", "_MINTED", "_POLICY_DROPPED", "_SLOT_SPELLING"),
        program=("_GRAPHS",),
        host_reads=("forward", "_pc_install", "_pc_install_targets", *_SEEDED),
        optional=("_BACKENDS",)),
    "installed, Dynamo's package": Contract(
        parts=(*_FRONT, "dynamo_state", "installed_dynamo"),
        sections=("_TRACED", "_PACKAGE", "_VARIANT_PINS", "_MINTED", "_POLICY_DROPPED", "_SLOT_SPELLING",
                  "_BACKENDS"),
        program=(),
        host_reads=("forward", "_pc_install", "_pc_install_targets", *_SEEDED),
        optional=("_pc_program_graphs",)),
}


def contract_name(mode: str, *, dynamo_free: bool, graph_programs: bool) -> str:
    if mode == "standalone":
        return "standalone, Dynamo-free" if dynamo_free else "standalone, Dynamo's guard state"
    if dynamo_free:
        return "installed, Dynamo-free"
    return "installed, Dynamo's package, graphs as programs" if graph_programs else "installed, Dynamo's package"


def contract(mode: str, *, dynamo_free: bool, graph_programs: bool) -> Contract:
    """The contract of an artifact of this serving mode."""
    return CONTRACTS[contract_name(mode, dynamo_free=dynamo_free, graph_programs=graph_programs)]


def part_path(name: str) -> Path:
    return _COMPAT if name == "compat" else _HERE / f"{name}.py"


def parts(mode: str, *, dynamo_free: bool, graph_programs: bool) -> list[Path]:
    """The part files an artifact of this serving mode joins, in order."""
    c = contract(mode, dynamo_free=dynamo_free, graph_programs=graph_programs)
    return [part_path(name) for name in c.parts]


def source(mode: str, *, dynamo_free: bool, graph_programs: bool) -> str:
    """The driver of an artifact of this serving mode."""
    return "\n\n".join(p.read_text(encoding="utf-8").strip("\n") + "\n"
                       for p in parts(mode, dynamo_free=dynamo_free, graph_programs=graph_programs))


def table() -> str:
    """CONTRACTS as the Markdown table docs/CONTRACTS.md holds."""
    rows = ["| serving mode | parts, in join order | sections | program | the loader reads back |",
            "|---|---|---|---|---|"]
    for name, c in CONTRACTS.items():
        def cell(names: tuple[str, ...]) -> str:
            return ", ".join(f"`{n}`" for n in names) or "—"
        sections = cell(c.sections) + (f" (read where the metadata says they exist: {cell(c.optional)})" if c.optional else "")
        rows.append(f"| {name} | {cell(c.parts)} | {sections} | {cell(c.program)} | {cell(c.host_reads)} |")
    return "\n".join(rows) + "\n"
