"""Stand-ins for the Inductor names a generated MakeFx program imports, so serving
its frozen kernels never imports ``torch._inductor`` (which imports Dynamo too: about
2.5 s of a 4 s cold start, against 1.5 s for ``import torch`` itself).

The program imports these instead of Inductor's (``serve_imports`` rewrites the
import lines at capture, falling back to Inductor's own where torch_precompile is
absent). Each stand-in serves what the frozen cache holds and hands everything else
to the real Inductor object, imported on first need, so a kernel that is not frozen
still JIT-compiles (or is refused under the lockdown) exactly as Inductor's would.
No torch import at module level: the program has imported torch already.
"""

from __future__ import annotations

import sys
from typing import Any

from . import restore

ALIGN_BYTES = 64  # torch._inductor.utils.ALIGN_BYTES


def align(nbytes: int) -> int:
    """torch._inductor.utils._align: round up to a multiple of ALIGN_BYTES."""
    return (nbytes + ALIGN_BYTES - 1) & -ALIGN_BYTES


def run_intermediate_hooks(name: str, val: Any) -> None:
    # Hooks can only be registered through torch._inductor.hooks; until something
    # imports it there are none to run.
    hooks = sys.modules.get("torch._inductor.hooks")
    if hooks is not None:
        hooks.run_intermediate_hooks(name, val)


def maybe_profile(should_profile: bool, *args: Any, **kwargs: Any) -> Any:
    from torch._inductor.utils import maybe_profile as real

    return real(should_profile, *args, **kwargs)


def assert_tensor_metadata(tensor: Any, expected_size: tuple[Any, ...], expected_stride: tuple[Any, ...],
                           expected_dtype: Any, op_name: str | None = None) -> None:
    """torch._inductor.runtime.runtime_utils.assert_tensor_metadata, same messages."""
    import torch

    if tensor is None:
        return
    if tensor.dtype != expected_dtype:
        op_msg = f"\nError in op: {op_name}" if op_name else ""
        raise RuntimeError(
            f"expected dtype {expected_dtype} but got {tensor.dtype}"
            + op_msg
            + "\nThis error most often comes from an incorrect fake (aka meta) "
            "kernel for a custom op."
            "\nUse torch.library.opcheck to test your custom op."
            "\nSee https://pytorch.org/docs/stable/library.html#torch.library.opcheck"
        )
    torch._C._dynamo.guards.assert_size_stride(tensor, expected_size, expected_stride, op_name)


def mark_dynamo_propagated_dynamic_indices(t: Any, dims: set[int]) -> None:
    """torch._functorch._aot_autograd.runtime_wrappers' helper of that name, which a
    dynamic graph's program calls on its outputs (its module imports Dynamo)."""
    if hasattr(t, "_dynamo_propagated_dynamic_indices"):
        t._dynamo_propagated_dynamic_indices |= dims
    else:
        t._dynamo_propagated_dynamic_indices = dims.copy()


class AsyncCompile:
    """Inductor's AsyncCompile for a program whose C++ kernels may be frozen:
    ``cpp_pybinding`` returns the frozen library's kernel directly; everything else
    goes to a real AsyncCompile, and ``wait`` then resolves what it started."""

    def __init__(self) -> None:
        self._inductor: Any = None

    def _real(self) -> Any:
        if self._inductor is None:
            from torch._inductor.async_compile import AsyncCompile as Real

            self._inductor = Real()
        return self._inductor

    def cpp_pybinding(self, argtypes: list[str], source_code: str) -> Any:
        kernel = restore.frozen_pybinding(argtypes, source_code)
        if kernel is not None:
            return kernel
        return self._real().cpp_pybinding(argtypes, source_code)

    def wait(self, scope: dict[str, Any]) -> None:
        if self._inductor is not None:
            self._inductor.wait(scope)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._real(), name)


class CppWrapperCodeCache:
    """Inductor's CppWrapperCodeCache for a program lowered with its C++ wrapper:
    ``load_pybinding`` returns the frozen wrapper library's entry directly (the
    wrapper and every kernel of the graph are one library); a wrapper that is not
    frozen goes to Inductor's own, which builds it (refused under the lockdown)."""

    @staticmethod
    def load_pybinding(argtypes: list[str], main_code: str, device_type: str = "cpu", *,
                       num_outputs: int = -1, extra_flags: Any = (), kernel_code: str | None = None,
                       **flags: Any) -> Any:
        # flags: the build-only keywords of this torch's signature (needs_vec_isa,
        # kernel_needs_vec_isa, submit_fn), which the content key does not hold
        entry = restore.frozen_cpp_wrapper(argtypes, main_code, device_type, num_outputs,
                                           extra_flags, kernel_code)
        if entry is not None:
            return entry
        from torch._inductor.codecache import CppWrapperCodeCache as Real

        return Real.load_pybinding(argtypes, main_code, device_type, num_outputs=num_outputs,
                                   extra_flags=extra_flags, kernel_code=kernel_code, **flags)


class ExternKernels:
    """Inductor's ``extern_kernels`` namespace. The capture records where each name
    the program calls lives in torch (``torch.addmm``, ``torch.ops.mkldnn.x``); a
    name it could not place (a Python helper inside Inductor) comes from Inductor's
    own namespace on first use."""

    def __init__(self, places: dict[str, str]) -> None:
        self._places = dict(places)

    def __getattr__(self, name: str) -> Any:
        # Only names not yet resolved reach here; each is resolved once and kept
        # as an instance attribute (racing threads resolve to the same object).
        if name.startswith("__") or name == "_places":
            raise AttributeError(name)
        place = self._places.get(name)
        if place is not None:
            import torch

            fn: Any = torch
            for part in place.split(".")[1:]:
                fn = getattr(fn, part)
        else:
            from torch._inductor.select_algorithm import extern_kernels

            fn = getattr(extern_kernels, name)
        setattr(self, name, fn)
        return fn
