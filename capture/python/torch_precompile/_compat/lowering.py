"""The standalone AOTAutograd + Inductor lowering (``compile_to_python`` in
``torch._functorch._aot_autograd.to_standalone_python``, from 2.14): whether it
keeps a graph dynamic.

The lowering keeps a graph's symbolic sizes (shapes mode ``"from_graph"``) only
when ``_graph_has_dynamic_shapes`` finds a symbolic fake on a placeholder;
otherwise it specializes the graph to the example inputs' sizes. A graph Dynamo
hands its backend carries its fakes under ``meta["example_value"]``, make_fx's
under ``meta["val"]``.

- 2.15 reads both keys;
- 2.14.1 reads only ``"val"``: every Dynamo graph counts as static, so a graph
  Dynamo compiled dynamic (guards accepting any batch) was lowered to code
  asserting the one batch it was captured with ("expected size 6==3").

``graph_has_dynamic_shapes`` is 2.15's reading; ``dynamic_shapes_seen`` makes the
lowering use it for one call where torch's own reads the graph otherwise.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


def graph_has_dynamic_shapes(gm: Any) -> bool:
    """Whether any placeholder of ``gm`` is a SymInt or a tensor with a symbolic
    size, stride or storage offset, under either metadata key."""
    import torch

    def symbolic(v: Any) -> bool:
        return isinstance(v, torch.SymInt)

    for node in gm.graph.find_nodes(op="placeholder"):
        for key in ("val", "example_value"):
            val = node.meta.get(key)
            if symbolic(val):
                return True
            if isinstance(val, torch.Tensor) and (
                any(symbolic(s) for s in val.shape)
                or any(symbolic(s) for s in val.stride())
                or symbolic(val.storage_offset())
            ):
                return True
    return False


@contextlib.contextmanager
def dynamic_shapes_seen(gm: Any) -> Iterator[None]:
    """While ``compile_to_python(gm, ...)`` runs in this block, it lowers ``gm``
    dynamic exactly when ``graph_has_dynamic_shapes(gm)`` says so. Torch's own
    reading is replaced only when it disagrees on ``gm`` (2.14), and restored on
    exit."""
    from torch._functorch._aot_autograd import to_standalone_python as lowering

    own = lowering._graph_has_dynamic_shapes
    if own(gm) == graph_has_dynamic_shapes(gm):
        yield
        return
    lowering._graph_has_dynamic_shapes = graph_has_dynamic_shapes
    try:
        yield
    finally:
        lowering._graph_has_dynamic_shapes = own
