//! `torch_precompile._native`: bindings to `policy` and `artifact`.
//!
//! Bindings translate, they do not decide: every rule lives in the two crates.
//! Without the shim this module's copy of the `policy` lockdown state is the
//! process's one state (with the shim, Python drives the shim's copy instead).

mod cache;
mod journal;
mod lockdown;
mod rules;
mod signing;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    lockdown::register(m)?;
    rules::register(m)?;
    journal::register(m)?;
    cache::register(m)?;
    signing::register(m)?;
    Ok(())
}
