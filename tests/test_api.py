"""The public surface: names, exact signatures and defaults of the specification,
and the boot wiring into torch.compiler."""

from __future__ import annotations

import inspect

import pytest

import torch_precompile as tp
from conftest import run_python

SIGNATURES = {
    "capture": "(fn, /, *, artifact_path, cache_path, tracer=DynamoTracer(guard_filter_fn=None, "
               "recompile_limit=256, dynamic=None, require_complete=True, require_no_risky_drops=True), "
               "backend='inductor')",
    "load": "(artifact_path, cache_path, *, allow_serve_time_compiles=False)",
    "no_compilation": "()",
    "DynamoTracer": "(guard_filter_fn=None, recompile_limit=256, dynamic=None, require_complete=True, "
                    "require_no_risky_drops=True)",
    "MakeFxTracer": "(decompositions=None)",
    "PrecompileSummary": "(*, frames, resume_functions, guarded_codes, backend_graphs, bypassed=(), "
                         "truncated=(), uncovered_frames=(), wont_generalize=(), dropped_guards=(), "
                         "kept_guards=(), risky_dropped_guards=(), policy_dropped_guards=(), "
                         "dropped_guard_code=(), capture_errors=())",
}


def _bare(sig: inspect.Signature) -> str:
    """The signature as the specification prints it: no annotations, no return type."""
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_matches_the_specification(name):
    assert _bare(inspect.signature(getattr(tp, name))) == SIGNATURES[name]


def test_public_names():
    for name in ("capture", "load", "no_compilation", "serving", "Capture", "PrecompiledRunnable",
                 "PrecompileSummary", "DynamoTracer", "MakeFxTracer", "PrecompileError"):
        assert name in tp.__all__ and hasattr(tp, name)
    assert issubclass(tp.PrecompileError, RuntimeError)
    assert tp.PrecompiledRunnable.installed is False
    for method in ("__enter__", "__exit__", "__call__", "save", "summary"):
        assert callable(getattr(tp.Capture, method))


def test_importing_the_package_does_not_import_torch():
    r = run_python("import sys, torch_precompile; print('torch' in sys.modules)").check()
    assert r.stdout.strip() == "False"


def test_install_points_torch_compiler_at_this_package():
    r = run_python("""
import torch, torch_precompile
torch_precompile.install()
import torch.compiler.precompile as p
assert p is torch_precompile, p
assert torch.compiler.precompile is torch_precompile
assert torch.compiler.PrecompileError is torch_precompile.PrecompileError
try:
    raise torch_precompile.PrecompileError("x")
except torch.compiler.PrecompileError:
    print("caught")
""").check()
    assert "caught" in r.stdout


def test_native_env_names_agree_with_the_python_settings():
    from torch_precompile import _native, _settings

    native = dict(_native.env_names())
    assert native["NO_COMPILATION"] == _settings.NO_COMPILATION.env
    assert native["JOURNAL"] == _settings.JOURNAL.env
    assert native["STRICT"] == _settings.STRICT.env
    assert native["COMPILERS"] == _settings.COMPILERS.env
    assert native["ALLOW"] == _settings.ALLOW.env
