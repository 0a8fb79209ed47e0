//! Signed pairs (`artifact::signature`) for Python: the signature text a
//! capture writes beside its pair, and the check `load` makes before it runs
//! any byte of a pair when a trust policy is set.

use std::path::Path;

use artifact::signature::{self, PrivateKey, SignatureError};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    _native,
    SignatureRefused,
    PyValueError,
    "A pair the trust policy does not vouch for, or a key that cannot be used."
);

fn to_py(e: SignatureError) -> PyErr {
    SignatureRefused::new_err(e.to_string())
}

/// The text of `<artifact>.sig` for the pair's bytes, signed by the PEM key.
#[pyfunction]
fn sign_pair(
    key_pem: &str,
    artifact_path: &str,
    code: &[u8],
    cache_path: &str,
    cache: &[u8],
) -> PyResult<String> {
    let key = PrivateKey::from_pem(key_pem).map_err(to_py)?;
    signature::sign_pair(
        &key,
        Path::new(artifact_path),
        code,
        Path::new(cache_path),
        cache,
    )
    .map_err(to_py)
}

/// Where a pair's own signature lives: `<artifact>.sig`.
#[pyfunction]
fn pair_signature_path(artifact_path: &str) -> String {
    signature::files::pair_signature_path(Path::new(artifact_path))
        .display()
        .to_string()
}

/// Checks the pair's bytes against its signature under the trust policy
/// `trust` (':'-separated key files and directories); returns the signature
/// file and the key file that vouched for it.
#[pyfunction]
fn verify_pair(
    py: Python<'_>,
    trust: &str,
    artifact_path: &str,
    code: &[u8],
    cache_path: &str,
    cache: &[u8],
) -> PyResult<(String, String)> {
    py.allow_threads(|| {
        let keys = signature::trust_policy(trust)?;
        signature::verify_pair(
            &keys,
            Path::new(artifact_path),
            code,
            Path::new(cache_path),
            cache,
        )
    })
    .map(|(sig, v)| (sig.display().to_string(), v.key_label))
    .map_err(to_py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SignatureRefused", m.py().get_type::<SignatureRefused>())?;
    m.add_function(wrap_pyfunction!(pair_signature_path, m)?)?;
    m.add_function(wrap_pyfunction!(sign_pair, m)?)?;
    m.add_function(wrap_pyfunction!(verify_pair, m)?)?;
    Ok(())
}
