"""Progress of long work on the ``torch_precompile`` logger, registered with torch's
logging like torch's own components: ``TORCH_LOGS="+torch_precompile"`` (DEBUG) or
``TORCH_LOGS="torch_precompile"`` (INFO), or ``torch._logging.set_logs(
modules={"torch_precompile": logging.INFO})``. Quiet by default, as torch is."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any, Iterator

log = logging.getLogger("torch_precompile")
_registered = False


def register() -> None:
    """Make torch's logging know the name; called by capture() and load(), which
    import torch anyway (this package's import must not)."""
    global _registered
    if _registered:
        return
    _registered = True
    try:
        from torch._logging import _internal

        _internal.register_log("torch_precompile", "torch_precompile")
        if "torch_precompile" in os.environ.get("TORCH_LOGS", ""):
            _internal._init_logs()  # TORCH_LOGS was parsed before the name existed
    except Exception:  # noqa: BLE001 - logging is never a reason to fail a capture
        log.debug("could not register with torch's logging", exc_info=True)


@contextlib.contextmanager
def step(what: str, *args: Any) -> Iterator[None]:
    """Log ``what`` at INFO when it is done, with how long it took."""
    t = time.perf_counter()
    yield
    if log.isEnabledFor(logging.INFO):
        log.info(what + " (%.2f s)", *args, time.perf_counter() - t, stacklevel=3)
