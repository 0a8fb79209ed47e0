"""Loading a DynamoTracer artifact, one function per serving mode (``_loader``
dispatches): exec it and wrap it in a runnable."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..._artifact import execute
from ..._compat import dynamo as _compat
from ..._bases import PrecompiledRunnable, StandaloneRunnable
from ..._errors import PrecompileError


def _refuse_installed_here(meta: dict[str, Any], allow_serve_time_compiles: bool) -> None:
    """What an installed artifact cannot serve through, checked before anything is installed."""
    import sys

    name = meta.get("FN_NAME")
    # Dynamo's settings, where it is imported (a Dynamo-free artifact does not import it)
    config = sys.modules.get("torch._dynamo.config")
    if config is None and not meta.get("DYNAMO_FREE"):
        import torch._dynamo.config as config
    if config is not None and config.compiled_autograd:
        raise PrecompileError(
            f"load: the installed artifact of {name} refuses to load with "
            "torch._dynamo.config.compiled_autograd enabled, which would compile backward "
            "graphs outside the artifact; turn it off in the serving process"
        )
    from torch._utils_internal import justknobs_check

    if (os.environ.get("TORCHDYNAMO_DISABLE", "") == "1" or (config is not None and config.disable)
            or not justknobs_check("pytorch/compiler:enable_dynamo")):
        raise PrecompileError(
            f"load: the installed artifact of {name} serves through Dynamo's frame evaluator, "
            "and Dynamo is disabled in this process (TORCHDYNAMO_DISABLE=1 or the enable_dynamo "
            "killswitch); enable it to serve this artifact"
        )
    if allow_serve_time_compiles and not meta.get("SERVE_TIME_COMPILES"):
        raise PrecompileError(
            f"load(allow_serve_time_compiles=True): the artifact of {name} was captured "
            "before serve-time compiles existed and cannot honor the flag; drop it or capture again"
        )


def _refuse_live_entries(ns: dict[str, Any], name: str) -> None:
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list, _debug_get_precompile_entries

    for code in ns["_pc_install_targets"]():
        if _debug_get_cache_entry_list(code) or _debug_get_precompile_entries(code):
            raise PrecompileError(
                f"load: {code.co_name!r} ({code.co_filename}:{code.co_firstlineno}), a frame the "
                f"installed artifact of {name} installs onto, already has live Dynamo cache "
                "entries in this process (a torch.compile of it, the capture itself, or another "
                "loaded artifact); load the artifact in a fresh process"
            )


def standalone(text: str, meta: dict[str, Any], artifact_path: str,
               compiled: bytes | None = None) -> PrecompiledRunnable:
    """A standalone DynamoTracer artifact: its driver is the runnable, nothing installed."""
    if not meta.get("DYNAMO_FREE"):
        import torch._dynamo  # noqa: F401 - AOTAutograd's unpickling needs Dynamo imported first
    ns = execute(text, artifact_path, compiled)
    if not meta.get("DYNAMO_FREE"):
        _compat.claim_minted_names(ns["_pc_seeded_scopes"]())
    return StandaloneRunnable(ns["forward"], meta, artifact_path)


def installed(text: str, meta: dict[str, Any], artifact_path: str, compiled: bytes | None = None, *,
              allow_serve_time_compiles: bool = False) -> PrecompiledRunnable:
    """An installed DynamoTracer artifact: its entries installed onto the live code
    objects (through torch._C's evaluator when Dynamo-free, else Dynamo's package)."""
    if not meta.get("DYNAMO_FREE"):
        import torch._dynamo  # noqa: F401 - AOTAutograd's unpickling needs Dynamo imported first
    _refuse_installed_here(meta, allow_serve_time_compiles)
    ns = execute(text, artifact_path, compiled)
    _refuse_live_entries(ns, str(meta.get("FN_NAME")))
    fn = ns["_pc_install"]()
    if "torch._dynamo" in sys.modules or allow_serve_time_compiles:
        _compat.claim_minted_names(ns["_pc_seeded_scopes"]())
    from .installed import InstalledRunnable

    return InstalledRunnable(fn, meta, artifact_path, allow_serve_time_compiles=allow_serve_time_compiles, ns=ns)
