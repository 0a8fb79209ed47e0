"""The native files the wheel carries beside the Python code, and the
``precompile`` command that pip puts on PATH.

``scripts/wheel`` stages the release CLI, ``libprecompile.so`` and its boot
directory under ``_prefix/`` in the layout of an install prefix
(``bin/precompile``, ``lib/precompile/libprecompile.so``,
``lib/precompile/boot/``; docs/CONTRACTS.md), so the CLI finds the shim
relative to itself as it does everywhere else, and the shim finds its boot
directory beside itself.

Why inside the package and not in the wheel's ``.data/`` (``<prefix>/bin``,
``<prefix>/lib``): from ``bin/`` there is no reliable way to find where a
scheme put the data (``--user`` keeps ``sys.prefix`` at the system's, Debian's
scheme uses ``local/``), and the Python layer, which needs the shim's path for
the children it starts, would have to guess too. The package's own directory is
known to both. The price is one Python start-up per ``precompile`` command: the
console script imports this module (no torch) and ``exec``s the CLI.
"""

from __future__ import annotations

import os
import sys

PREFIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_prefix")
CLI = os.path.join(PREFIX, "bin", "precompile")
LIBRARY = os.path.join(PREFIX, "lib", "precompile", "libprecompile.so")


def cli_main() -> None:
    """The ``precompile`` console script: becomes the CLI (same pid, argv,
    exit status and signals)."""
    try:
        os.execv(CLI, [sys.argv[0], *sys.argv[1:]])
    except OSError as e:
        # FileNotFoundError: a wheel built by maturin alone (pip wheel,
        # maturin build) has no CLI; scripts/wheel stages it.
        sys.exit(
            f"precompile: cannot run the CLI bundled with torch_precompile ({CLI}): {e.strerror}; "
            "build the wheel with scripts/wheel (it stages the CLI and the shim) and reinstall it"
        )
