//! Journal lines written by the Python layer, in the shim's exact format.

use std::fs::OpenOptions;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use policy::journal::{format_record, Fields, LINE_BUDGET};
use pyo3::prelude::*;

use crate::rules::{kind_from_str as kind_of, verdict_of};

/// Append one record (a single O_APPEND write, like the shim's) to `path`.
#[pyfunction]
#[pyo3(signature = (path, exe, argv, cwd, kind, allowed, reason))]
#[allow(clippy::too_many_arguments)]
fn journal_append(
    path: &str,
    exe: Vec<u8>,
    argv: Vec<Vec<u8>>,
    cwd: Vec<u8>,
    kind: &str,
    allowed: bool,
    reason: &str,
) -> PyResult<()> {
    let time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let pid = std::process::id() as i64;
    let ppid = std::os::unix::process::parent_id() as i64;
    let mut buf = vec![0u8; LINE_BUDGET];
    let n = format_record(
        &mut buf,
        Fields {
            time,
            pid,
            ppid,
            tid: pid,
            rank: policy::env::rank(std::env::var(policy::env::RANK).ok().as_deref()),
            exe: &exe,
            argv: argv.iter().map(Vec::as_slice),
            cwd: &cwd,
            kind: kind_of(kind)?,
            verdict: verdict_of(allowed, reason)?,
            source: "python",
        },
    );
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(&buf[..n])?;
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(journal_append, m)?)?;
    Ok(())
}
