"""Signed pairs (issue 38): a capture signs what it writes when
PRECOMPILE_SIGNING_KEY names a key, ``precompile sign`` signs a pair or a
directory, and with a trust policy (PRECOMPILE_TRUST) ``load`` serves a pair only
when a trusted key signed exactly its bytes: unsigned, tampered (one byte of code
or cache), re-signed by another key and mismatched pairs are refused by a
PrecompileError naming what failed, and nothing of them runs. The signatures are
OpenSSF model signing bundles: the ``model_signing`` library verifies ours and
signs ones we accept."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_python, tagged_json
from test_multirank import CLI

TESTS = Path(__file__).resolve().parent

CAPTURE = r"""
import sys, torch, torch_precompile as tp
sys.path.insert(0, {tests!r})
import pc_models as pm
out = {out!r}
with tp.capture(pm.step, artifact_path=out + "/a.py", cache_path=out + "/a.cache", tracer=tp.DynamoTracer()) as cap:
    cap(pm.MLP(), torch.randn(3, 8))
with tp.capture(pm.step, artifact_path=out + "/b.py", cache_path=out + "/b.cache", backend="eager") as cap:
    cap(pm.MLP(), torch.randn(5, 8))
"""

# Every case in one process: the trust policy is read at each load.
SERVE = r"""
import json, os, sys, torch, torch_precompile as tp
sys.path.insert(0, {tests!r})
import pc_models as pm
cases, marker = {cases!r}, {marker!r}

def libraries():
    return {{l.split()[-1] for l in open("/proc/self/maps") if l.rstrip().endswith(".so")}}

result = {{}}
for name, (trust, art, cache) in cases.items():
    os.environ.pop("PRECOMPILE_TRUST", None)
    if trust:
        os.environ["PRECOMPILE_TRUST"] = trust
    before = libraries()
    try:
        f = tp.load(art, cache)
        m, x = pm.MLP(), torch.randn(3, 8)
        with torch.no_grad():   # other weights than the capture's
            for p in m.parameters():
                p.add_(torch.randn_like(p))
        result[name] = ["served", bool(torch.allclose(f(m, x), pm.step(m, x)))]
    except tp.PrecompileError as e:
        result[name] = ["refused", str(e), sorted(libraries() - before)]
result["marker_written"] = os.path.exists(marker)
print("RESULT " + json.dumps(result))
"""


def _keys(where: Path, name: str) -> tuple[Path, Path]:
    """A P-256 key pair as openssl writes it (SEC1 private, SPKI public)."""
    key, pub = where / f"{name}.pem", where / f"{name}.pub"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
    return key, pub


def _sign(key: Path, *paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), "sign", "--key", str(key), *map(str, paths)], capture_output=True, text=True)


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _copy(src: Path, dst: Path, *names: str, rename: dict[str, str] | None = None) -> Path:
    dst.mkdir()
    for n in names:
        shutil.copy(src / n, dst / (rename or {}).get(n, n))
    return dst


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two pairs captured with a signing key set: a (inductor) and b (eager)."""
    if not CLI.exists() or not shutil.which("openssl"):
        pytest.skip("needs the precompile CLI (scripts/setup) and openssl")
    work = tmp_path_factory.mktemp("signing")
    key, _ = _keys(work, "key")
    _keys(work, "other")
    out = work / "pairs"
    out.mkdir()
    run_python(CAPTURE.format(tests=str(TESTS), out=str(out)), env={"PRECOMPILE_SIGNING_KEY": str(key)}).check()
    return work


def test_a_trust_policy_serves_signed_pairs_and_refuses_the_rest_before_a_byte_runs(signed: Path, tmp_path: Path) -> None:
    pairs, pub, marker = signed / "pairs", str(signed / "key.pub"), tmp_path / "ran"
    assert {p.name for p in pairs.iterdir()} == {"a.py", "a.cache", "a.py.sig", "b.py", "b.cache", "b.py.sig"}
    files = ("a.py", "a.cache", "a.py.sig")
    d = {n: _copy(pairs, tmp_path / n, *files) for n in ("code_byte", "code_runs", "cache_byte", "other_key", "mixed")}
    # one byte of the code (in its header comment), a statement prepended, one byte of the cache
    _flip(d["code_byte"] / "a.py", 3)
    (d["code_runs"] / "a.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n" + (pairs / "a.py").read_text())
    _flip(d["cache_byte"] / "a.cache", -1)
    # re-signed by a key the policy does not hold
    assert _sign(signed / "other.pem", d["other_key"] / "a.py", d["other_key"] / "a.cache").returncode == 0
    # a's code and signature with b's cache under a's name
    shutil.copy(pairs / "b.cache", d["mixed"] / "a.cache")
    unsigned = _copy(pairs, tmp_path / "unsigned", "a.py", "a.cache")
    # a directory signature (precompile sign DIR) stands for a pair without its own
    by_dir = _copy(pairs, tmp_path / "by_dir", "a.py", "a.cache", "b.py", "b.cache")
    p = _sign(signed / "key.pem", by_dir)
    assert p.returncode == 0 and (by_dir / "model.sig").exists(), p.stderr
    dir_tampered = _copy(by_dir, tmp_path / "dir_tampered", "a.py", "a.cache", "model.sig")
    _flip(dir_tampered / "a.cache", 40)

    def case(trust: str, where: Path) -> tuple[str, str, str]:
        return (trust, str(where / "a.py"), str(where / "a.cache"))

    cases = {
        "signed": case(pub, pairs), "by_dir": case(pub, by_dir), "no_policy_unsigned": case("", unsigned),
        "unsigned": case(pub, unsigned), "code_byte": case(pub, d["code_byte"]),
        "code_runs": case(pub, d["code_runs"]), "cache_byte": case(pub, d["cache_byte"]),
        "other_key": case(pub, d["other_key"]), "mixed": case(pub, d["mixed"]),
        "dir_tampered": case(pub, dir_tampered), "policy_of_two": case(f"{signed / 'other.pub'}:{pub}", pairs),
        "missing_policy_key": case(str(tmp_path / "nowhere.pub"), pairs),
        "policy_of_other_key": case(str(signed / "other.pub"), pairs),
    }
    r = run_python(SERVE.format(tests=str(TESTS), cases=cases, marker=str(marker)))
    r.check()
    got = tagged_json(r.stdout, "RESULT")
    for ok in ("signed", "by_dir", "no_policy_unsigned", "policy_of_two"):
        assert got[ok] == ["served", True], (ok, got[ok])
    want = {
        "unsigned": "the pair is unsigned",
        "code_byte": '"a.py" differs from the signed file',
        "code_runs": '"a.py" differs from the signed file',
        "cache_byte": '"a.cache" differs from the signed file',
        "other_key": "signed by a key the trust policy does not hold",
        "mixed": '"a.cache" differs from the signed file',
        "dir_tampered": '"a.cache" differs from the signed file',
        "missing_policy_key": "cannot read the trusted key",
        "policy_of_other_key": "signed by a key the trust policy does not hold",
    }
    for name, text in want.items():
        verdict, message, loaded = got[name]
        assert verdict == "refused" and text in message, (name, got[name])
        assert "PRECOMPILE_TRUST" in message and "Nothing of the pair was run" in message, message
        assert loaded == [], (name, loaded)   # no kernel library of a refused pair was loaded
    assert got["marker_written"] is False     # the prepended statement never ran


def test_the_model_signing_library_reads_our_signatures_and_we_read_its(signed: Path, tmp_path: Path) -> None:
    import model_signing as ms  # requirements-dev.txt
    pairs = signed / "pairs"
    key, pub = signed / "key.pem", signed / "key.pub"
    verifier = ms.verifying.Config().use_elliptic_key_verifier(public_key=pub)
    # a directory we signed, as `model_signing verify key DIR` reads it
    ours = _copy(pairs, tmp_path / "ours", "a.py", "a.cache", "b.py", "b.cache")
    assert _sign(key, ours).returncode == 0
    verifier.verify(ours, ours / "model.sig")
    # a pair the capture signed, among other files: only its own files are signed
    verifier.set_ignore_unsigned_files(True).verify(pairs, pairs / "a.py.sig")
    _flip(ours / "b.cache", 10)
    with pytest.raises(ValueError, match="Signature mismatch"):
        ms.verifying.Config().use_elliptic_key_verifier(public_key=pub).verify(ours, ours / "model.sig")
    # a directory the library signed serves under our trust policy; another key's is refused
    theirs = _copy(pairs, tmp_path / "theirs", "a.py", "a.cache")
    ms.signing.Config().use_elliptic_key_signer(private_key=key).sign(theirs, theirs / "model.sig")
    r = run_python(SERVE.format(tests=str(TESTS), marker=str(tmp_path / "ran"), cases={
        "theirs": (str(pub), str(theirs / "a.py"), str(theirs / "a.cache")),
        "theirs_other_policy": (str(signed / "other.pub"), str(theirs / "a.py"), str(theirs / "a.cache"))}))
    r.check()
    got = tagged_json(r.stdout, "RESULT")
    assert got["theirs"] == ["served", True], got
    assert "signed by a key the trust policy does not hold" in got["theirs_other_policy"][1], got


def test_signing_refuses_bad_keys_and_writes_nothing(signed: Path, tmp_path: Path) -> None:
    # a capture with an unusable signing key fails before anything is written
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key\n")
    out = tmp_path / "out"
    out.mkdir()
    r = run_python(CAPTURE.format(tests=str(TESTS), out=str(out)), env={"PRECOMPILE_SIGNING_KEY": str(junk)})
    assert r.returncode != 0 and "PRECOMPILE_SIGNING_KEY" in r.stderr and "no PEM private key" in r.stderr, r.stderr[-2000:]
    assert list(out.iterdir()) == []
    # the CLI: a public key is no signing key; one file is not a pair; a key is required
    pairs = signed / "pairs"
    p = _sign(signed / "key.pub", pairs / "a.py", pairs / "a.cache")
    assert p.returncode == 1 and "no PEM private key" in p.stderr, p.stderr
    p = _sign(signed / "key.pem", pairs / "a.py")
    assert p.returncode == 2 and "name both files" in p.stderr, p.stderr
    p = subprocess.run([str(CLI), "sign", str(pairs)], capture_output=True, text=True)
    assert p.returncode == 2 and "--key KEY.pem is required" in p.stderr, p.stderr
    assert json.loads(json.dumps(sorted(q.name for q in pairs.iterdir()))) == sorted(
        ["a.py", "a.cache", "a.py.sig", "b.py", "b.cache", "b.py.sig"])


def test_precompile_verify_checks_a_pairs_signature_as_load_would(signed: Path, tmp_path: Path) -> None:
    pairs = signed / "pairs"

    def verify(where: Path, trust: Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(CLI), "verify", str(where / "a.cache"), "--code", str(where / "a.py"),
                               "--trust", str(trust)], capture_output=True, text=True)

    p = verify(pairs, signed / "key.pub")
    assert p.returncode == 0 and f"signed: {pairs / 'a.py.sig'} (by {signed / 'key.pub'})" in p.stdout, p.stdout + p.stderr
    p = verify(pairs, signed / "other.pub")
    assert p.returncode == 1 and "signed by a key the trust policy does not hold" in p.stderr, p.stderr
    tampered = _copy(pairs, tmp_path / "tampered", "a.py", "a.cache", "a.py.sig")
    data = bytearray((tampered / "a.py").read_bytes())
    data[3] ^= 1
    (tampered / "a.py").write_bytes(bytes(data))
    p = verify(tampered, signed / "key.pub")
    # the code no longer matches the cache's code_hash, which verify reports first
    assert p.returncode == 1 and "are not a pair" in p.stderr, p.stderr
    p = subprocess.run([str(CLI), "verify", str(pairs / "a.cache"), "--trust", str(signed / "key.pub")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "give its python_code with --code" in p.stderr, p.stderr
