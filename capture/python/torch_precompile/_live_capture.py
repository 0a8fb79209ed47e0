"""The zero-code layer's one capture lifecycle, on top of the public API: module
and ``__main__`` targets (``_envmodes``) and torch.compile sites
(``_compile_sites``) each keep a capture open for the process's lifetime. It
opens at the first call, folds every call in, checkpoints (``save()``) when a
call captured something new so a job killed later still leaves a loadable pair,
is abandoned at the first failure (the job runs on uncaptured: capture must never
break it), and closes at exit. Also the layer's one stderr voice and rank."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable, ContextManager

from ._api import BACKENDS  # noqa: F401 - the backends a zero-code capture accepts
from ._bases import Capture

PREFIX = "torch_precompile"


def say(message: str) -> None:
    """One line on stderr, as every zero-code message is said."""
    sys.stderr.write(f"{PREFIX}: {message}\n")
    sys.stderr.flush()


def rank() -> str:
    """This torchrun worker's rank (``RANK``), "0" outside torchrun."""
    value = os.environ.get("RANK", "")
    return value if value.isdigit() else "0"


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [""])[0]


class LiveCapture:
    """One capture kept open for the process's lifetime; ``name`` prefixes what it
    says (``PRECOMPILE_CAPTURE='m:f'``, ``torch.compile site f@app.py:3``)."""

    def __init__(self, name: str, artifact: str, open_capture: Callable[[], Capture], *,
                 suspended: bool = False) -> None:
        self.name = name
        self.artifact = artifact
        self._open_capture = open_capture
        # several live captures in one process step out of the block's scopes between calls
        self._suspended = suspended
        self.cap: Capture | None = None
        self.calls = self.captured = self.saved = 0
        self.failed: str | None = None

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], *,
             scope: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
             check: Callable[[Capture], str | None] = lambda cap: None,
             on_save: Callable[[], None] = lambda: None) -> Any:
        """fn's result, the call folded into the capture (or run as itself once
        capture failed). ``scope``: what the capture call runs inside; ``check``: a
        reason to drop the capture after a call (that call's result is kept);
        ``on_save``: after each checkpoint."""
        self.calls += 1
        if self.failed is not None:
            return fn(*args, **kwargs)
        try:
            if self.cap is None:
                self.cap = self._open_capture()
                self.cap.__enter__()
            elif self._suspended:
                self.cap.resume()
            try:
                with scope():
                    result = self.cap(*args, **kwargs)
                why = check(self.cap)
                if why is not None:
                    self.failed = why
                    say(f"{self.name}: {why}")
                    self.abandon()
                    return result
                self.captured += 1
                self._checkpoint(on_save)
            finally:
                if self.cap is not None and self._suspended:
                    self.cap.suspend()
        except Exception as e:  # noqa: BLE001 - capture must never break the job
            self.failed = f"{type(e).__name__}: {e}"
            say(f"{self.name}: capture failed on call {self.calls} ({_first_line(e)}); the call "
                "runs uncaptured and capture stops")
            self.abandon()
            return fn(*args, **kwargs)
        return result

    def _checkpoint(self, on_save: Callable[[], None]) -> None:
        assert self.cap is not None
        try:
            if self.cap.unsaved():
                self.cap.save()
                on_save()
            self.saved = self.captured
        except Exception as e:  # noqa: BLE001 - said; the last checkpoint is kept
            say(f"{self.name}: checkpoint after call {self.calls} not written ({_first_line(e)})")

    def abandon(self) -> None:
        """Drop the capture, keeping only what a checkpoint wrote."""
        if self.cap is not None:
            with contextlib.suppress(Exception):
                if self._suspended:
                    self.cap.resume()
                self.cap.close(write=False)
        self.cap = None

    def finish(self, on_close: Callable[[], None] = lambda: None) -> Any:
        """Close the capture at exit; its summary, or None when nothing was opened or
        the write failed (said). When the last checkpoint holds every captured call
        the block closes without writing again: that would redo it after the job
        tore down what the guards read (a destroyed process group)."""
        if self.cap is None:
            return None
        try:
            summary = self.cap.summary()
            if self._suspended:
                self.cap.resume()
            self.cap.close(write=self.saved != self.captured)
            on_close()
        except Exception as e:  # noqa: BLE001
            say(f"{self.name}: writing {self.artifact} failed: {_first_line(e)}; the last "
                "checkpoint (if any) is kept")
            return None
        return summary
