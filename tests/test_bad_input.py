"""Bad input that once hung, lied or reached outside the cache (issue 15): a FIFO
passed to load(), an artifact_path that is a directory, and a re-checksummed
cache whose kernel manifest points at a library outside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import run_python

CAPTURE = r"""
import torch, torch_precompile as tp
def f(x):
    return x + 1
with tp.capture(f, artifact_path={code!r}, cache_path={cache!r}, tracer=tp.MakeFxTracer(), backend="eager") as cap:
    cap(torch.ones(2))
"""


def _pair(d: Path) -> tuple[Path, Path]:
    code, cache = d / "m.py", d / "m.cache"
    run_python(CAPTURE.format(code=str(code), cache=str(cache))).check()
    return code, cache


def test_load_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    code, _ = _pair(tmp_path)
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    script = f"""
import torch_precompile as tp
for a, c in (({str(fifo)!r}, {str(fifo)!r}), ({str(code)!r}, {str(fifo)!r}), ({str(tmp_path)!r}, {str(fifo)!r})):
    try:
        tp.load(a, c)
    except tp.PrecompileError as e:
        print("REFUSED", e)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    lines = [l for l in r.stdout.splitlines() if l.startswith("REFUSED")]
    assert len(lines) == 3, r.stdout + r.stderr
    assert "is a FIFO, not a regular file" in lines[0] and "is a FIFO" in lines[1], lines
    assert "is a directory, not a regular file" in lines[2], lines


def test_a_directory_as_artifact_path_replaces_nothing_and_says_so(tmp_path: Path) -> None:
    _pair(tmp_path)
    old = (tmp_path / "m.cache").read_bytes()
    (tmp_path / "adir").mkdir()
    r = run_python(CAPTURE.format(code=str(tmp_path / "adir"), cache=str(tmp_path / "m.cache"))
                   .replace("with tp.capture", "try:\n  with tp.capture").replace("\n    cap(", "\n      cap(")
                   + "except tp.PrecompileError as e:\n  print('REFUSED', e)\n")
    r.check()
    assert "REFUSED" in r.stdout and "adir is a directory, not a file" in r.stdout, r.stdout
    assert "Nothing was replaced." in r.stdout, r.stdout
    assert (tmp_path / "m.cache").read_bytes() == old, "the old cache was replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "m.cache", "m.py"]


def test_a_kernel_manifest_pointing_outside_the_cache_is_refused(tmp_path: Path) -> None:
    code, cache = _pair(tmp_path)
    evil = tmp_path / "evil.so"
    evil.write_bytes(b"\x7fELF not a kernel")
    # re-encode the cache (fresh checksums) with a manifest naming a path outside it
    script = f"""
import json, torch_precompile._native as n
from torch_precompile import _artifact
code = open({str(code)!r}, "rb").read()
header, entries = n.cache_decode(open({str(cache)!r}, "rb").read())
h = json.loads(header)
entries = [(k, name, bytes(d)) for k, name, d in entries if k != "kernel_manifest"] + [
    ("cpp_kernel", "cpp/aa.so", b"\\x7fELF"),
    ("kernel_manifest", "kernels.json", json.dumps({{"cpp": [{{"content": "aa", "binding": "ctypes",
        "key": "k", "entry": "../../../../../../{evil.relative_to("/")}"}}]}}).encode())]
open({str(cache)!r}, "wb").write(bytes(n.cache_encode(_artifact.header_for(code, backend=h["backend"],
    tracer=h["tracer"], meta=h.get("meta")), entries)))
"""
    run_python(script).check()
    cli = Path(sys.prefix) / "bin" / "precompile"
    v = subprocess.run([str(cli), "verify", str(cache), "--code", str(code)], capture_output=True, text=True)
    assert v.returncode != 0 and "evil.so" in v.stderr, v.stdout + v.stderr
    r = run_python(f"""
import warnings, torch, torch_precompile as tp
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    f = tp.load({str(code)!r}, {str(cache)!r})
print("WARNED", [str(x.message) for x in w])
print("SERVED", f(torch.ones(2)).tolist())
""").check()
    assert "ignoring the unreadable cache" in r.stdout and "evil.so" in r.stdout, r.stdout
    assert "SERVED [2.0, 2.0]" in r.stdout
