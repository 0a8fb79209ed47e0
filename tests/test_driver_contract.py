"""The Dynamo artifact's contract (driver/__init__.py's CONTRACTS), checked
statically: every serving mode's parts exist and each uses only the names that
the parts joined before it, the metadata, the mode's sections and program define;
what the loader reads back is defined; every section is read by someone; the
driver definitions the capture runs itself (captured_values.py) are where it takes
them from; and docs/CONTRACTS.md lists the table. Fails when a part uses a name
nothing defines, or when a part, section or loader name is renamed on one side."""

from __future__ import annotations

import ast
import builtins
import symtable
from pathlib import Path

import pytest

from torch_precompile._dynamo import captured_values
from torch_precompile._dynamo.serving import driver

ROOT = Path(__file__).resolve().parent.parent
BUILTINS = set(dir(builtins)) | {"__file__", "__name__"}


def _names(source: str, where: str) -> tuple[set[str], set[str]]:
    """(defined at module level, read as globals anywhere) of a piece of source."""
    top = symtable.symtable(source, where, "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    used = {s.get_name() for s in top.get_symbols() if s.is_referenced()}
    stack = list(top.get_children())
    while stack:
        scope = stack.pop()
        for s in scope.get_symbols():
            if s.is_global() and s.is_referenced():
                used.add(s.get_name())
            if s.is_declared_global() and s.is_assigned():
                defined.add(s.get_name())
        stack.extend(scope.get_children())
    return defined, used


def test_every_join_uses_only_names_defined_before_it() -> None:
    problems = []
    for mode, c in driver.CONTRACTS.items():
        known = BUILTINS | set(driver.METADATA) | set(c.sections) | set(c.program) | set(c.optional)
        everything = set(known)
        for part in c.parts:
            path = driver.part_path(part)
            assert path.exists(), (mode, part)
            defined, used = _names(path.read_text(encoding="utf-8"), str(path))
            missing = used - defined - known
            if missing:
                problems.append(f"{mode}: part {part} uses {sorted(missing)}, which no part before it, "
                                "section, program name or metadata constant defines")
            known |= defined
            everything |= defined
        unread = set(c.host_reads) - everything
        if unread:
            problems.append(f"{mode}: the loader reads {sorted(unread)}, which the artifact does not define")
        # every section is read by a part or the loader
        read = set(c.host_reads)
        for part in c.parts:
            read |= _names(driver.part_path(part).read_text(encoding="utf-8"), part)[1]
        dead = set(c.sections) - read
        if dead:
            problems.append(f"{mode}: sections {sorted(dead)} are written and read by nothing")
    assert not problems, "\n".join(problems)


def test_the_join_check_catches_a_name_nothing_defines(tmp_path: Path) -> None:
    # the check itself: a part reading an undefined name is reported
    defined, used = _names("def f():\n    return _PC_NOWHERE + _pc_here()\n\ndef _pc_here():\n    return 1\n", "x")
    assert used - defined - BUILTINS == {"_PC_NOWHERE"}


def test_the_renderer_writes_every_section_of_every_contract() -> None:
    source = (ROOT / "capture" / "python" / "torch_precompile" / "_dynamo" / "rendering" / "render.py").read_text()
    tree = ast.parse(source)
    producers = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                     and any(getattr(t, "id", None) == "producers" for t in n.targets))
    written = {k.value for k in producers.value.keys}  # type: ignore[attr-defined]
    for mode, c in driver.CONTRACTS.items():
        assert set(c.sections) <= written, (mode, sorted(set(c.sections) - written))
        for name in c.program:  # the program parts render writes
            assert f'"{name} = ' in source or f'f"{name} = ' in source or f"{name} = " in source, (mode, name)


def test_the_definitions_the_capture_runs_are_in_the_parts_it_reads() -> None:
    found: set[str] = set()
    for part in captured_values._PARTS:
        tree = ast.parse(part.read_text(encoding="utf-8"))
        for n in tree.body:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                found.add(n.name)
            elif isinstance(n, ast.Assign):
                found |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    assert set(captured_values._NAMES) <= found, sorted(set(captured_values._NAMES) - found)


def test_docs_list_the_contract_table() -> None:
    docs = (ROOT / "docs" / "CONTRACTS.md").read_text(encoding="utf-8")
    assert driver.table() in docs, "docs/CONTRACTS.md does not hold driver.table(); paste it:\n" + driver.table()


def test_every_pin_kind_names_the_driver_check_that_serves_it() -> None:
    """pin_recipes.KINDS against pins.py: each served kind is a key of
    _PC_PIN_TESTS whose test is the one the kind names, or a kind _pc_pin_checks
    dispatches on itself to the check it names; no other kind reaches the driver,
    and a kind with no check (refused at capture) is in neither."""
    from torch_precompile._dynamo import pin_recipes

    tree = ast.parse(driver.part_path("pins").read_text(encoding="utf-8"))
    table = next(n for n in tree.body if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", None) == "_PC_PIN_TESTS" for t in n.targets))
    served = {k.value: v.elts[0].id for k, v in zip(table.value.keys, table.value.values)}  # type: ignore[attr-defined]
    checks = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_pc_pin_checks")
    for node in ast.walk(checks):
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and isinstance(node.test.left, ast.Subscript)
                and getattr(node.test.left.value, "id", None) == "recipe" and isinstance(node.test.ops[0], ast.Eq)):
            calls = [c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                     and c.func.id.startswith("_pc_") and c.func.id.endswith("_check")]
            served[node.test.comparators[0].value] = calls[0]  # type: ignore[attr-defined]
    want = {name: k.serving_check for name, k in pin_recipes.KINDS.items() if k.serving_check is not None}
    assert served == want, (served, want)
    assert pin_recipes.SERVED == set(served)
    unserved = set(pin_recipes.KINDS) - pin_recipes.SERVED
    assert unserved == {"named"}, unserved


def test_a_pin_recipe_is_made_only_of_a_known_kind_and_its_fields() -> None:
    from torch_precompile._dynamo import pin_recipes

    assert pin_recipes.make("module", "torch") == ("module", "torch")
    assert pin_recipes.describe(pin_recipes.make("process_group", "gloo", 2, None)) == \
        "process group backend=gloo world_size=2 rank=any"
    for bad in (("modul", "torch"), ("module",), ("module", "torch", "extra")):
        with pytest.raises(ValueError, match="pin recipe"):
            pin_recipes.make(*bad)
