//! Classification and verdicts, the same rules the shim applies.

use policy::{env, Kind, Lock, Reason, Rules, Verdict};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pub fn kind_from_str(kind: &str) -> PyResult<Kind> {
    match kind {
        "other" => Ok(Kind::Other),
        "probe" => Ok(Kind::Probe),
        "compile" => Ok(Kind::Compile),
        _ => Err(PyValueError::new_err(format!("unknown kind {kind:?}"))),
    }
}

fn lock_from_str(lock: Option<&str>) -> PyResult<Lock> {
    match lock {
        None => Ok(Lock::Open),
        Some("startup") => Ok(Lock::Startup),
        Some("no_compilation") => Ok(Lock::NoCompilation),
        Some("serving") => Ok(Lock::Serving),
        Some(other) => Err(PyValueError::new_err(format!("unknown lock {other:?}"))),
    }
}

const REASONS: [Reason; 7] = [
    Reason::NotACompiler,
    Reason::Unlocked,
    Reason::ProbeAllowed,
    Reason::StartupLockdown,
    Reason::NoCompilation,
    Reason::Serving,
    Reason::StrictProbe,
];

pub fn verdict_of(allowed: bool, reason: &str) -> PyResult<Verdict> {
    REASONS
        .into_iter()
        .find(|r| r.as_str() == reason)
        .map(|reason| Verdict { allowed, reason })
        .ok_or_else(|| PyValueError::new_err(format!("unknown reason {reason:?}")))
}

/// "other" | "probe" | "compile" for an execution, under the rules the
/// environment configures (PRECOMPILE_COMPILERS, PRECOMPILE_ALLOW).
#[pyfunction]
#[pyo3(signature = (exe, argv, resolved=None, compilers=None, allow=None))]
fn classify(
    exe: Vec<u8>,
    argv: Vec<Vec<u8>>,
    resolved: Option<Vec<u8>>,
    compilers: Option<&str>,
    allow: Option<&str>,
) -> &'static str {
    let rules = Rules::from_env_values(compilers, allow, false);
    rules
        .classify(&exe, resolved.as_deref(), argv.iter().map(Vec::as_slice))
        .as_str()
}

/// (allowed, reason, explanation) for a classified execution under a lock
/// (None, "startup", "no_compilation" or "serving").
#[pyfunction]
#[pyo3(signature = (kind, lock, strict=false))]
fn decide(
    kind: &str,
    lock: Option<&str>,
    strict: bool,
) -> PyResult<(bool, &'static str, &'static str)> {
    let v = policy::decide(kind_from_str(kind)?, lock_from_str(lock)?, strict);
    Ok((v.allowed, v.reason.as_str(), v.reason.explain()))
}

/// The environment variable names, spelled once in policy/src/env.rs.
#[pyfunction]
fn env_names() -> Vec<(&'static str, &'static str)> {
    vec![
        ("NO_COMPILATION", env::NO_COMPILATION),
        ("JOURNAL", env::JOURNAL),
        ("STRICT", env::STRICT),
        ("COMPILERS", env::COMPILERS),
        ("ALLOW", env::ALLOW),
        ("LOG", env::LOG),
    ]
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(classify, m)?)?;
    m.add_function(wrap_pyfunction!(decide, m)?)?;
    m.add_function(wrap_pyfunction!(env_names, m)?)?;
    Ok(())
}
