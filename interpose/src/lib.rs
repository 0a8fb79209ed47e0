//! `libprecompile.so`: the LD_PRELOAD shim that enforces precompile's
//! compile lockdown across a whole process tree.
//!
//! - [`boot`]: the constructor reads the environment (see docs/CONTRACTS.md),
//!   resolves the real libc functions ([`real`]), locates itself, and in a
//!   Python process puts the boot directory on PYTHONPATH.
//! - [`hooks`]: the exec family, each entry gated ([`gate`]), journaled
//!   ([`journal`]) and handed the child's environment ([`envp`]).
//! - [`abi`]: the C ABI the Python layer drives the lockdown with.
//!
//! Read STYLE.md's fork/exec section before touching anything reachable
//! from [`hooks`]: it may run in a vfork child or between fork and exec of
//! a multithreaded parent, so no allocation, lock, `std::env`, logging,
//! `dlsym` or panic; raw pointers become typed values only in [`raw`].
//!
//! Not covered (by construction of an LD_PRELOAD shim): statically linked
//! executables, programs that make the exec system call directly
//! (`syscall(SYS_execve)`, Go's runtime, io_uring), setuid/setgid programs
//! (the loader ignores LD_PRELOAD for them), and a child that clears
//! LD_PRELOAD *and* execs through one of those paths.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod abi;
mod boot;
mod buf;
mod envp;
mod gate;
pub mod hooks;
mod journal;
mod log;
mod raw;
mod real;
mod resolve;
mod script;
mod state;
mod sys;

/// Runs before `main` in every process the library is loaded into. With
/// nothing configured it only resolves the real functions and reads a few
/// variables (one pass over the environment): nothing visible. Its cost is
/// paid at every exec of the tree (scripts/bench exec, README).
#[ctor::ctor]
fn load() {
    let start = state::StartEnv::read();
    boot::logging(&start);
    real::init();
    state::init(&start);
    let settings = state::get();
    boot::python_path(settings, &start);
    tracing::debug!(
        pid = std::process::id(),
        lock = ?policy::lockdown::current(),
        journal = ?journal::armed().map(|j| j.path().to_string_lossy().into_owned()),
        preload = ?settings.self_path,
        "precompile shim loaded"
    );
}
