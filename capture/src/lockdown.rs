//! The policy lockdown state machine, for processes without the shim.

use std::cell::Cell;

use policy::lockdown;
use pyo3::prelude::*;

thread_local! {
    // This thread's `serving()` depth (policy keeps the process-wide state).
    static SERVING: Cell<u32> = const { Cell::new(0) };
}

#[pyfunction]
fn set_startup(on: bool) {
    lockdown::set_startup(on)
}

#[pyfunction]
fn lockdown_startup() -> bool {
    lockdown::startup()
}

#[pyfunction]
fn lockdown_enter() -> u32 {
    lockdown::enter()
}

/// New depth, or -1 when it was already zero.
#[pyfunction]
fn lockdown_exit() -> i64 {
    lockdown::exit().map_or(-1, i64::from)
}

#[pyfunction]
fn lockdown_depth() -> u32 {
    lockdown::depth()
}

#[pyfunction]
fn serving_enter() -> u32 {
    SERVING.with(|d| {
        let new = lockdown::serving_entered(d.get());
        d.set(new);
        new
    })
}

#[pyfunction]
fn serving_exit() -> i64 {
    SERVING.with(|d| {
        let new = lockdown::serving_exited(d.get());
        if let Some(n) = new {
            d.set(n);
        }
        new.map_or(-1, i64::from)
    })
}

#[pyfunction]
fn serving_depth() -> u32 {
    SERVING.with(Cell::get)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_startup, m)?)?;
    m.add_function(wrap_pyfunction!(lockdown_startup, m)?)?;
    m.add_function(wrap_pyfunction!(lockdown_enter, m)?)?;
    m.add_function(wrap_pyfunction!(lockdown_exit, m)?)?;
    m.add_function(wrap_pyfunction!(lockdown_depth, m)?)?;
    m.add_function(wrap_pyfunction!(serving_enter, m)?)?;
    m.add_function(wrap_pyfunction!(serving_exit, m)?)?;
    m.add_function(wrap_pyfunction!(serving_depth, m)?)?;
    Ok(())
}
