"""The one error type of the public API (no torch import: the boot path loads it)."""


class PrecompileError(RuntimeError):
    """The error type raised by torch.compiler.precompile and its artifacts.

    Raised when capture, lowering, load, or a runtime call violates the precompile
    contract – e.g. a tensor baked as a constant (invariant 1), an unsupported /
    effectful op, a nested example input, which capture does not support on either
    path (invariant 3), an UNBACKED capture attempted inside another trace
    (invariant 3), a non-tensor output the inductor backend cannot lower, or a
    runtime input whose shape or memory format differs from the example
    (invariants 3 and 6). Under a lockdown (``no_compilation()``, ``serving()`` or
    ``TORCH_PRECOMPILE_NO_COMPILATION=1``) it is also what any attempted graph
    trace, kernel compile, benchmark or autotune raises.
    """

    # Pickle finds a class by module and name: torch.compiler.PrecompileError is
    # torch's own class until install() runs, so the home that always resolves to
    # this class is the package.
    __module__ = "torch_precompile"


def refused(what: str, why: str, remedy: str) -> PrecompileError:
    """A lockdown refusal: what was attempted, why it is refused, what to do."""
    return PrecompileError(f"{what} refused: {why}. {remedy}")
