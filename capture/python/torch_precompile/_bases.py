"""The public base types, below everything that implements them: ``Capture``
(what capture() returns; each tracer subclasses it) and ``PrecompiledRunnable``
(what load() returns). The tracers and loaders import these from here, and
``_api`` imports the tracers, so the dependency runs one way.
"""

from __future__ import annotations

from typing import Any, Generic, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Capture(Generic[_P, _R]):
    """The caller-driven capture torch.compiler.precompile.capture returns.

    Part of the prototype torch.compiler.precompile API, so it may change without a
    deprecation cycle. Enter it as a context manager to arm the capture, call it
    exactly as you would fn inside the block – each call runs for real, is folded
    into the capture, and returns that run's result – and the artifact is written
    to the artifact_path / cache_path files when the block exits. How many calls a
    capture takes is the tracer's: MakeFxTracer takes exactly one. Call save()
    inside the block to write what has been captured so far to those same files
    without ending the capture. A block that raises writes nothing it has not
    already saved, and a block that made no call raises PrecompileError on exit
    rather than writing an empty artifact. A capture is single-use: once its block
    exits it cannot be entered again, so call capture() again to retry. That
    includes a failed write at exit: the spent capture does not keep its pair, so
    fix the path and capture again.
    """

    def __enter__(self) -> Capture[_P, _R]:
        raise NotImplementedError

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        # a block that raised writes nothing it had not saved
        self.close(write=exc_type is None)

    def close(self, *, write: bool = True) -> None:
        """End the block as its exit does: write the artifact (``write=True``) or
        keep only what save() wrote. Internal: the zero-code modes' long-lived
        captures end this way."""
        raise NotImplementedError

    def suspend(self) -> None:
        """Step out of the block's process-wide scopes between calls, keeping what
        they hold, so another capture can run in this process; resume() before
        the next call, save() or close(). Internal: one capture per site."""

    def resume(self) -> None:
        """Step back into the scopes suspend() left."""

    def unsaved(self) -> bool:
        """Whether calls since the last save() captured something it does not hold."""
        return True

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        raise NotImplementedError

    def save(self) -> None:
        """Write everything captured so far to the artifact files without ending the capture.

        Each call re-renders and rewrites both files, so a job that dies between
        saves leaves the last checkpoint loadable. A refusal (such as a
        DynamoTracer require_* gate) or a failed write raises but writes nothing
        partial, and the capture stays open. Raises PrecompileError outside the
        capture's with block.
        """
        raise NotImplementedError

    def summary(self) -> Any:
        """The PrecompileSummary of what this capture has covered so far."""
        raise NotImplementedError


class PrecompiledRunnable:
    """What torch.compiler.precompile.load returns.

    A callable with the captured fn's calling convention that can also be entered
    as a context manager and unloaded. A standalone artifact installs nothing, so
    for it __enter__/__exit__/unload() are no-ops. Removing an installed artifact's
    entries is not implemented yet either, so they stay installed until the process
    exits: serve an installed artifact from a process you can throw away. Part of
    the prototype torch.compiler.precompile API, so it may change without a
    deprecation cycle.

    Variables:
        installed (bool) – Whether loading this artifact installed onto the
            captured code objects (SERVING_MODE = "installed"); False for a
            standalone artifact.
    """

    installed: bool = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def __enter__(self) -> PrecompiledRunnable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unload()

    def unload(self) -> None:
        """Remove whatever this loaded artifact installed; currently a no-op in every mode."""


class StandaloneRunnable(PrecompiledRunnable):
    """A standalone artifact: calls go straight to its driver; nothing is installed."""

    installed = False

    def __init__(self, forward: Any, meta: dict[str, Any], path: str) -> None:
        self._forward = forward
        self.metadata = meta
        self.artifact_path = path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._forward(*args, **kwargs)

    def __repr__(self) -> str:
        return (f"<PrecompiledRunnable {self.metadata.get('FN_NAME')} "
                f"tracer={self.metadata.get('TRACER')} backend={self.metadata.get('BACKEND')} "
                f"standalone from {self.artifact_path}>")
