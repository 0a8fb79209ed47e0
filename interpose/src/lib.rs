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
//!
//! No std: the library is loaded into every process of the tree, and with std
//! it was 0.6 MB (std's panic and backtrace machinery, which stable Rust
//! cannot leave out) with 1,127 relocations, about a third of the shim's whole
//! per-exec cost (scripts/bench exec; docs/limits.md itemizes what is left).
//! `core` and `alloc` only, over libc's malloc ([`rt`]); a panic aborts
//! (release builds are `panic = "abort"`). Builds that unwind (`cargo test`
//! forces that on everything it links) get std back, with the same code.
#![cfg_attr(not(any(test, panic = "unwind")), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

extern crate alloc;

pub mod abi;
mod boot;
mod buf;
mod envp;
mod gate;
pub mod hooks;
mod journal;
mod log;
mod once;
mod raw;
mod real;
mod resolve;
mod rt;
mod script;
mod state;
mod sys;

/// Runs before `main` in every process the library is loaded into (an
/// `.init_array` entry, as a C `__attribute__((constructor))` is). With
/// nothing configured it only resolves the real functions and reads a few
/// variables (one pass over the environment): nothing visible. Its cost is
/// paid at every exec of the tree (scripts/bench exec, README).
fn load(argv: raw::CStrArray<'_>) {
    let start = state::StartEnv::read();
    boot::logging(&start);
    real::init();
    state::init(&start);
    let settings = state::get();
    boot::python_path(settings, &start, argv);
    log::debug("precompile", |w| {
        w.push(b"precompile shim loaded pid=")
            .push_int(sys::getpid());
        w.push(b" lock=").push_str(log::lock_name(state::lock()));
        w.push(b" journal=");
        log::push_opt(w, journal::armed().map(|j| j.path().to_bytes()));
        w.push(b" preload=");
        log::push_opt(w, settings.self_path.map(core::ffi::CStr::to_bytes));
    });
}

type Argv = *const *const core::ffi::c_char;

/// glibc calls each `.init_array` entry with `main`'s (argc, argv, envp), in
/// the main program and in a library dlopen'ed later alike.
extern "C" fn load_entry(_argc: core::ffi::c_int, argv: Argv, _envp: Argv) {
    // SAFETY: argv as glibc passes it: null or a NULL-terminated array of C
    // strings on the initial stack, never freed; only read here.
    load(unsafe { raw::CStrArray::from_raw(argv) });
}

#[used]
#[link_section = ".init_array"]
static LOAD: extern "C" fn(core::ffi::c_int, Argv, Argv) = load_entry;
