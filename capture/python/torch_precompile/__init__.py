"""torch.compiler.precompile on stock torch: ahead-of-time capture, compile-free
serving, and a lockdown that holds across threads and child processes.

Importing this package never imports torch (the boot path and ``TORCH_LOGS``
walking rely on that); torch is imported when a capture or load runs, or by
:func:`install`.
"""

from ._api import Capture, PrecompiledRunnable, capture, load
from ._errors import PrecompileError
from ._install import install
from ._lockdown import no_compilation, serving
from ._summary import PrecompileSummary
from ._tracers import DynamoTracer, MakeFxTracer

__version__ = "0.1.0"

__all__ = [
    "capture",
    "load",
    "no_compilation",
    "serving",
    "install",
    "Capture",
    "PrecompiledRunnable",
    "PrecompileSummary",
    "DynamoTracer",
    "MakeFxTracer",
    "PrecompileError",
]
