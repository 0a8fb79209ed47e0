"""Importable entry modules, one per torch.compile site of a module or a bound method.

A module cannot be captured as fn (Dynamo compiles it through its own wrapper
frame); a site that compiles one captures ``template.call(model, ...)`` instead.
The artifact finds its entry again by module name, so each site's entry lives in a
module of its own, ``torch_precompile._sites.s_<id>``: the template's file loaded
under that name by the finder below, in any process that imports this package (the
artifact's import of the entry module imports it first). The source is the
template's file, so the artifact's source checks read it as for any module.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


_PREFIX = __name__ + ".s_"
_TEMPLATE = Path(__file__).with_name("template.py")


class _EntryFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith(_PREFIX) or not name[len(_PREFIX):].isalnum():
            return None
        return importlib.util.spec_from_file_location(name, _TEMPLATE)


if not any(isinstance(f, _EntryFinder) for f in sys.meta_path):
    sys.meta_path.append(_EntryFinder())


def entry_module(site_id: str) -> ModuleType:
    """The entry module of the site with this id (letters and digits)."""
    return importlib.import_module(_PREFIX + site_id)
