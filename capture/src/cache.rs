//! The cache envelope (`artifact` crate) for Python: encode, verify, unpack,
//! and the atomic writes behind both files of a pair.

use std::path::Path;

use artifact::{Entry, Header};
use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

create_exception!(
    _native,
    CacheError,
    PyValueError,
    "A cache of ours that is wrong (corrupt, mismatched, unsafe)."
);
create_exception!(
    _native,
    ForeignCache,
    CacheError,
    "Not a cache this build reads: another file or format version."
);

fn to_py(e: artifact::Error) -> PyErr {
    match e {
        artifact::Error::Io { .. } => PyOSError::new_err(e.to_string()),
        e if e.is_foreign() => ForeignCache::new_err(e.to_string()),
        e => CacheError::new_err(e.to_string()),
    }
}

fn header_from_json(header_json: &str) -> PyResult<Header> {
    let mut value: serde_json::Value = serde_json::from_str(header_json)
        .map_err(|e| PyValueError::new_err(format!("header is not JSON: {e}")))?;
    if let Some(obj) = value.as_object_mut() {
        obj.entry("format_version")
            .or_insert(artifact::FORMAT_VERSION.into());
        obj.entry("entries")
            .or_insert(serde_json::Value::Array(vec![]));
        obj.entry("meta")
            .or_insert(serde_json::Value::Object(Default::default()));
    }
    serde_json::from_value(value).map_err(|e| PyValueError::new_err(format!("bad header: {e}")))
}

/// Envelope bytes for a header (JSON object) and (kind, name, data) entries.
#[pyfunction]
fn cache_encode<'py>(
    py: Python<'py>,
    header_json: &str,
    entries: Vec<(String, String, Vec<u8>)>,
) -> PyResult<Bound<'py, PyBytes>> {
    let header = header_from_json(header_json)?;
    let entries: Vec<Entry> = entries
        .into_iter()
        .map(|(kind, name, data)| Entry { kind, name, data })
        .collect();
    let bytes = artifact::encode(&header, &entries).map_err(to_py)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Verify everything and return (header JSON, [(kind, name, data)]).
#[pyfunction]
fn cache_decode<'py>(
    py: Python<'py>,
    data: &[u8],
) -> PyResult<(String, Vec<(String, String, Bound<'py, PyBytes>)>)> {
    let env = py.allow_threads(|| artifact::decode(data)).map_err(to_py)?;
    let header =
        serde_json::to_string(&env.header).map_err(|e| CacheError::new_err(e.to_string()))?;
    let entries = env
        .entries
        .iter()
        .map(|e| (e.kind.clone(), e.name.clone(), PyBytes::new(py, &e.data)))
        .collect();
    Ok((header, entries))
}

/// The checked header alone, as JSON (entry bytes not verified).
#[pyfunction]
fn cache_read_header(data: &[u8]) -> PyResult<String> {
    let header = artifact::read_header(data).map_err(to_py)?;
    serde_json::to_string(&header).map_err(|e| CacheError::new_err(e.to_string()))
}

/// Verify the envelope and unpack its entries under `dir`; returns the paths written.
#[pyfunction]
fn cache_extract(py: Python<'_>, data: &[u8], dir: &str) -> PyResult<Vec<String>> {
    py.allow_threads(|| {
        let env = artifact::decode(data)?;
        artifact::extract_to(&env, Path::new(dir))
    })
    .map(|paths| {
        paths
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect()
    })
    .map_err(to_py)
}

#[pyfunction]
fn sha256_hex(data: &[u8]) -> String {
    artifact::sha256_hex(data)
}

/// Temp file, fsync, rename, fsync the directory.
#[pyfunction]
fn write_atomic(py: Python<'_>, path: &str, data: &[u8]) -> PyResult<()> {
    py.allow_threads(|| artifact::write_atomic(Path::new(path), data))
        .map_err(|e| PyOSError::new_err(format!("cannot write {path}: {e}")))
}

/// Both temps written and fsynced before either is renamed into place.
#[pyfunction]
fn write_pair_atomic(
    py: Python<'_>,
    code_path: &str,
    code: &[u8],
    cache_path: &str,
    cache: &[u8],
) -> PyResult<()> {
    py.allow_threads(|| {
        artifact::write_pair_atomic(Path::new(code_path), code, Path::new(cache_path), cache)
    })
    .map_err(|e| PyOSError::new_err(format!("cannot write {code_path} / {cache_path}: {e}")))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CacheError", m.py().get_type::<CacheError>())?;
    m.add("ForeignCache", m.py().get_type::<ForeignCache>())?;
    m.add("FORMAT_VERSION", artifact::FORMAT_VERSION)?;
    m.add_function(wrap_pyfunction!(cache_encode, m)?)?;
    m.add_function(wrap_pyfunction!(cache_decode, m)?)?;
    m.add_function(wrap_pyfunction!(cache_read_header, m)?)?;
    m.add_function(wrap_pyfunction!(cache_extract, m)?)?;
    m.add_function(wrap_pyfunction!(sha256_hex, m)?)?;
    m.add_function(wrap_pyfunction!(write_atomic, m)?)?;
    m.add_function(wrap_pyfunction!(write_pair_atomic, m)?)?;
    Ok(())
}
