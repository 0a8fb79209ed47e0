"""The standalone lowerings: whether torch has them, and whether the
AOTAutograd + Inductor one keeps a graph dynamic.

Whether torch has them (each read off 2.11.0 and 2.15.0; 2.12 and 2.13 unchecked):

- ``compile_to_python`` in ``torch._functorch._aot_autograd.to_standalone_python``,
  the standalone AOTAutograd + Inductor lowering, exists from 2.14 (2.14.1 below;
  2.11.0 has no such module): ``compile_to_python`` answers it or None;
- ``torch._inductor.standalone_compile``'s ``_resolve_ignore_shape_env``,
  ``_runnable_source`` and ``_standalone_context``, the pieces that lowering is
  made of, exist in 2.15.0 (whose ``compile_to_python`` imports two of them;
  2.11.0's module has none; 2.14 unchecked): ``standalone_inductor`` answers
  them or None.

Whether it can emit Inductor's C++ wrapper:

``torch._inductor.compile_to_python`` (2.15.0; the inner step of the lowering)
pins ``cpp_wrapper=False`` and calls ``compile_fx_inner`` without its
``cpp_wrapper`` keyword, which it imports from ``torch._inductor.compile_fx`` at
call time. ``cpp_wrapper_lowering`` makes that call a C++-wrapper compile; the
module it yields (the wrapper and every kernel of the graph in one library,
``CppWrapperCodeCache.load_pybinding``) composes with AOTAutograd's runtime
wrappers as the Python one does. On a torch where the lowering is shaped
otherwise the block changes nothing and the program keeps Python's wrapper.

Whether it keeps a graph dynamic:

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
from typing import Any, Callable, Iterator, NamedTuple


def compile_to_python() -> Callable[..., Any] | None:
    """torch's standalone AOTAutograd + Inductor lowering,
    ``compile_to_python(gm, example_inputs, options=...) -> (source, bundle)``;
    None on a torch without it (2.11.0; it exists from 2.14)."""
    try:
        from torch._functorch._aot_autograd.to_standalone_python import compile_to_python as lower
    except ImportError:
        return None
    return lower


class StandaloneInductor(NamedTuple):
    """The pieces of ``torch._inductor.standalone_compile`` a forward and
    backward lowering through ``compile_fx`` is made of."""

    resolve_ignore_shape_env: Callable[[str], bool]  # shapes mode -> compile_fx's ignore_shape_env
    runnable_source: Callable[[Any], str]            # a compiled graph -> its module source
    standalone_context: Callable[..., Any]           # (gm, shapes mode, aot=) -> the context to compile in


def standalone_inductor() -> StandaloneInductor | None:
    """Those pieces; None on a torch without them (2.11.0; 2.15.0 has them)."""
    try:
        from torch._inductor.standalone_compile import (
            _resolve_ignore_shape_env,
            _runnable_source,
            _standalone_context,
        )
    except ImportError:
        return None
    return StandaloneInductor(_resolve_ignore_shape_env, _runnable_source, _standalone_context)


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


@contextlib.contextmanager
def cpp_wrapper_lowering() -> Iterator[None]:
    """While ``compile_to_python`` runs in this block, Inductor compiles the graph
    with its C++ wrapper (see the module docstring); restored on exit. The wrapper
    is built apart from its kernels (``cpp_wrapper_build_separate``: the entry at
    -O1, the kernels at -O3, linked into one library): as one -O3 unit a 32-layer
    graph's wrapper took 120 s to capture against 42 s with Python's wrapper;
    apart, about 45 s."""
    from torch._inductor import compile_fx, config

    real = compile_fx.compile_fx_inner

    def compile_fx_inner(gm: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["cpp_wrapper"] = True
        with config.patch(cpp_wrapper=True, cpp_wrapper_build_separate=True):
            return real(gm, example_inputs, *args, **kwargs)

    compile_fx.compile_fx_inner = compile_fx_inner
    try:
        yield
    finally:
        compile_fx.compile_fx_inner = real
