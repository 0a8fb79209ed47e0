"""Torch-side lockdown gates: each module patches one subsystem so that, under
``no_compilation()`` / ``serving()`` / the startup variable, an attempted graph
trace, kernel compile, benchmark or autotune raises PrecompileError first.

No torch import here (TORCH_LOGS walks this package while torch imports).
"""

from __future__ import annotations


def install_process_gates() -> None:
    """Gates that need no torch: compiler subprocesses when the shim is absent."""


def install_all() -> None:
    """Arm every torch-side gate. Called once, after torch has imported."""
