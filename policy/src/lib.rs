//! precompile's rules: which executions are compilations, the lockdown state,
//! the journal record.
//!
//! Linked into the LD_PRELOAD shim, whose exec hooks may run in a vfork child:
//! everything reachable from [`Rules::classify`], [`decide`], [`lockdown`],
//! [`script::shebang`] and [`journal::format_record`] must not allocate, lock, panic, read the
//! environment or log.
#![forbid(unsafe_code)]
// Without std (alloc only, for the compiler lists of `Rules`): the shim links
// this crate into a library with no std in it, loaded into every process of
// the tree (interpose/build.rs says why). Unit tests get std from the harness.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

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
