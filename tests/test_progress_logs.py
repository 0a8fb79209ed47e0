"""Progress of a capture and a load is logged on the ``torch_precompile`` logger,
registered with torch's logging: quiet by default, shown by
TORCH_LOGS="+torch_precompile" or torch._logging.set_logs(modules={"torch_precompile": logging.INFO})."""

from __future__ import annotations

from pathlib import Path

from conftest import run_python

TESTS = Path(__file__).resolve().parent

ROUND_TRIP = r"""
import logging, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models
if {set_logs!r}:
    import torch._logging
    tp.MakeFxTracer  # the public names load lazily; capture() registers the logger
    from torch_precompile._progress import register
    register()
    torch._logging.set_logs(modules={{"torch_precompile": logging.INFO}})
fn, model, args = pc_models.make("mlp", seed=0)
with tp.capture(fn, artifact_path="p.py", cache_path="p.cache", tracer=tp.MakeFxTracer(), backend="eager") as cap:
    cap(*args)
tp.load("p.py", "p.cache")(*args)
print("done")
"""


def _run(tmp_path: Path, env: dict[str, str] | None = None, set_logs: bool = False) -> str:
    r = run_python(ROUND_TRIP.format(tests=str(TESTS), set_logs=set_logs), cwd=tmp_path, env=env).check()
    assert "done" in r.stdout
    return r.stderr


def test_quiet_by_default(tmp_path: Path) -> None:
    err = _run(tmp_path)
    assert "capture: wrote" not in err and "load:" not in err, err


def test_torch_logs_shows_capture_and_load_progress(tmp_path: Path) -> None:
    err = _run(tmp_path, env={"TORCH_LOGS": "+torch_precompile"})
    for line in ("capture pc_models.step: traced with make_fx", "rendered the eager program",
                 "capture: wrote p.py", "load: pc_models.step (tracer make_fx, backend eager, standalone)"):
        assert line in err, (line, err)
    assert "torch_precompile/_makefx/capture.py" in err, "the log line names its caller: " + err


def test_set_logs_turns_it_on(tmp_path: Path) -> None:
    err = _run(tmp_path, set_logs=True)
    assert "capture: wrote p.py" in err, err
