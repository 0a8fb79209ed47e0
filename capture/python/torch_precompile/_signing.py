"""Signed pairs. A capture signs each pair it writes when PRECOMPILE_SIGNING_KEY
names a private key (`<artifact>.sig`); `load` checks a pair against the trust
policy PRECOMPILE_TRUST before any byte of it runs or any kernel library of it
loads. The format (OpenSSF model signing, key method) and the rules of where a
signature lives are `artifact::signature`'s; this module reads the environment."""

from __future__ import annotations

import logging

from . import _native, _settings
from ._errors import PrecompileError

log = logging.getLogger(__name__)

SIGNING_KEY = _settings.SIGNING_KEY.env
TRUST = _settings.TRUST.env


def signature_for(artifact_path: str, code: bytes, cache_path: str, cache: bytes) -> bytes | None:
    """The signature to write beside the pair, or None when no key is set. A key
    that cannot be used fails here, before the pair is written."""
    key = _settings.get(_settings.SIGNING_KEY)
    if not key:
        return None
    try:
        with open(key, encoding="utf-8") as f:
            pem = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise PrecompileError(
            f"{SIGNING_KEY}={key!r}: cannot read the signing key ({getattr(e, 'strerror', None) or e}); "
            "name a PEM ECDSA P-256 private key, or unset it to write unsigned pairs") from None
    try:
        return _native.sign_pair(pem, artifact_path, code, cache_path, cache).encode()
    except _native.SignatureRefused as e:
        raise PrecompileError(f"{SIGNING_KEY}={key!r}: {e}") from None


def check(artifact_path: str, code: bytes, cache_path: str, cache: bytes) -> None:
    """Nothing when no trust policy is set; else the pair's bytes must be the ones
    a trusted key signed, or PrecompileError names what failed."""
    trust = _settings.get(_settings.TRUST)
    if not trust:
        return
    try:
        sig, key = _native.verify_pair(trust, artifact_path, code, cache_path, cache)
    except _native.SignatureRefused as e:
        raise PrecompileError(
            f"load: refused {artifact_path!r} under the trust policy {TRUST}={trust!r}: {e}. "
            "Nothing of the pair was run. Serve a pair signed by a trusted key "
            "(precompile sign --key KEY.pem DIR, or capture with PRECOMPILE_SIGNING_KEY), "
            "or fix the policy") from None
    log.info("load: %s verified against %s (signed by %s)", artifact_path, sig, key)
