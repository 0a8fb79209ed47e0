"""Zero-code-change modes (PRECOMPILE_CAPTURE / PRECOMPILE_SERVE), armed at boot.

Not implemented yet: when either variable is set, say so on stderr once rather
than silently ignoring it.
"""

import os
import sys


def arm():
    for name in ("PRECOMPILE_CAPTURE", "PRECOMPILE_SERVE"):
        if os.environ.get(name):
            sys.stderr.write(
                f"torch_precompile: {name} is set but environment-driven capture/serve "
                "is not implemented in this version; it is ignored\n"
            )
