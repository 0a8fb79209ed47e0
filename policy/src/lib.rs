//! precompile's rules: which executions are compilations, the lockdown state,
//! the journal record.
//!
//! Linked into the LD_PRELOAD shim, whose exec hooks may run in a vfork child:
//! everything reachable from [`Rules::classify`], [`decide`], [`lockdown`],
//! [`script::shebang`] and [`journal::format_record`] must not allocate, lock, panic, read the
//! environment or log.
#![forbid(unsafe_code)]

pub mod classify;
pub mod compilers;
pub mod env;
pub mod journal;
mod jsonbuf;
pub mod lockdown;
pub mod script;
pub mod verdict;

pub use classify::{Kind, Rules};
pub use verdict::{decide, Lock, Reason, Verdict};
