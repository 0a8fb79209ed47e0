"""Every environment variable the Python layer reads, declared once.

The native names are the same strings as policy/src/env.rs (a test checks that the
two agree through ``_native``). Booleans: only exactly ``"1"`` means on.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Setting:
    env: str
    doc: str


NO_COMPILATION = Setting(
    "TORCH_PRECOMPILE_NO_COMPILATION",
    "exactly 1 at process start: the whole process is locked down; exported as 1 "
    "while no_compilation() is active so children inherit it",
)
JOURNAL = Setting("PRECOMPILE_JOURNAL", "path of the JSON-lines journal of compiler runs")
STRICT = Setting("PRECOMPILE_STRICT", "1: version probes are refused under lockdown too")
COMPILERS = Setting("PRECOMPILE_COMPILERS", "extra compiler names, colon-separated")
ALLOW = Setting("PRECOMPILE_ALLOW", "names removed from the compiler list, colon-separated")
CAPTURE = Setting("PRECOMPILE_CAPTURE", "pkg.mod:fn to capture when pkg.mod is imported")
ARTIFACT = Setting("PRECOMPILE_ARTIFACT", "python_code path for PRECOMPILE_CAPTURE")
CACHE = Setting("PRECOMPILE_CACHE", "cache path for PRECOMPILE_CAPTURE")
TRACER = Setting("PRECOMPILE_TRACER", "dynamo | make_fx, for PRECOMPILE_CAPTURE")
BACKEND = Setting("PRECOMPILE_BACKEND", "inductor | eager, for PRECOMPILE_CAPTURE")
SERVE = Setting("PRECOMPILE_SERVE", "pkg.mod:fn=M.py,M.cache[;...] to serve when pkg.mod is imported")
CAPTURE_DIR = Setting("PRECOMPILE_CAPTURE_DIR", "DIR: capture every torch.compile call site into DIR "
                      "(precompile run --capture DIR)")
SERVE_DIR = Setting("PRECOMPILE_SERVE_DIR", "DIR: serve every torch.compile call site from DIR "
                    "(precompile run --serve DIR)")
LIB = Setting("PRECOMPILE_LIB", "path of libprecompile.so, when it is not in the usual place")
SIGNING_KEY = Setting("PRECOMPILE_SIGNING_KEY", "a PEM private key: every pair a capture writes is signed")
TRUST = Setting("PRECOMPILE_TRUST", "':'-separated public key files and directories: load serves only "
                "pairs they signed")

ALL = (NO_COMPILATION, JOURNAL, STRICT, COMPILERS, ALLOW, CAPTURE, ARTIFACT, CACHE, TRACER,
       BACKEND, SERVE, CAPTURE_DIR, SERVE_DIR, LIB, SIGNING_KEY, TRUST)


def get(setting: Setting) -> str | None:
    value = os.environ.get(setting.env)
    return value if value else None


def is_on(setting: Setting) -> bool:
    return os.environ.get(setting.env) == "1"
