"""README.md and docs/ checked against the code: README stays a page a newcomer
reads in ten minutes and names every environment variable the package and the
shim read and every CLI verb; every relative link in README and docs/ resolves;
every docs page is in README's index."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from torch_precompile import _native, _settings

from test_multirank import CLI

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def test_readme_is_short() -> None:
    assert len(README.splitlines()) <= 250, "README.md grew past 250 lines: move detail to a docs/ page"


def test_readme_names_every_environment_variable() -> None:
    table = _section("Environment variables")
    names = {s.env for s in _settings.ALL} | {env for _, env in _native.env_names()}
    missing = sorted(n for n in names if f"`{n}`" not in table)
    assert not missing, f"README's environment table lacks {missing}"


def test_readme_names_every_cli_verb() -> None:
    out = subprocess.run([str(CLI), "--help"], capture_output=True, text=True, check=True).stdout
    verbs = re.findall(r"^  (\S+)\s", out.split("verbs:", 1)[1], re.M)
    table = _section("The CLI")
    assert len(verbs) >= 6
    missing = [v for v in verbs if f"`precompile {v}" not in table]
    assert not missing, f"README's CLI table lacks {missing}"


def test_every_relative_link_resolves_and_every_page_is_indexed() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
    index = _section("Documentation")
    unlisted = [p.name for p in pages[1:] if f"(docs/{p.name})" not in index]
    assert not unlisted, f"docs pages missing from README's Documentation table: {unlisted}"
