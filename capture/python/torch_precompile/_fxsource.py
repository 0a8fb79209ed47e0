"""An fx graph as plain source: the one rendering both tracers' eager programs use."""

from __future__ import annotations

from typing import Any


def graph_source(gm: Any) -> tuple[str, str, list[str]]:
    """(the fx builtins' imports, ``def _graph(self, *inputs)``, the globals the code
    needs that have no source form). The graph's codegen must be fx's plain
    positional one."""
    from torch.fx.graph import _custom_builtins

    code = gm.graph.python_code(root_module="self")
    unknown = sorted(set(code.globals) - set(_custom_builtins) - {"torch"})
    imports = "\n".join(sorted({cb.import_str for cb in _custom_builtins.values()}))
    return imports, code.src.replace("def forward(self", "def _graph(self", 1), unknown
