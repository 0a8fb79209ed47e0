//! Builds the things cargo cannot do by itself for the shim:
//!
//! 1. `src/variadic.c`: execl, execlp and execle are C-variadic, which stable
//!    Rust cannot define (see hooks.rs); `src/tls.c`: the serving depth, a
//!    thread local (Rust's need std); `src/nounwind.c`: the personality
//!    routine core's unwind tables name, which std defines and the release
//!    build (`panic = "abort"`, no std: lib.rs) does not have.
//! 2. Where libgcc_eh.a is: builds that unwind (`cargo test`, which has std
//!    back) link that unwinder in statically (rt.rs), as `gcc -static-libgcc`
//!    does for shared libraries, so that preloading them does not also load
//!    libgcc_s.so.1 into every process of the tree (that second library was
//!    about a third of the std build's per-exec cost). Where it cannot be
//!    found they use the default dynamic libgcc_s (with a warning). The
//!    release build has no unwinder: nothing in it unwinds.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/variadic.c");
    println!("cargo:rerun-if-changed=src/tls.c");
    println!("cargo:rerun-if-changed=src/nounwind.c");
    println!("cargo::rustc-check-cfg=cfg(precompile_gcc_eh)");
    let build = {
        let mut b = cc::Build::new();
        b.file("src/variadic.c")
            .file("src/tls.c")
            .file("src/nounwind.c")
            .flag("-fvisibility=hidden")
            .flag_if_supported("-std=gnu11")
            .warnings(true)
            .extra_warnings(true);
        b
    };
    build.compile("precompile_variadic");
    // Lazy binding: the loader resolves a function imported through the PLT at
    // its first call rather than in every process the shim is preloaded into.
    // Rust links with -z now by default; most of its libc calls go through the
    // GOT, which lazy binding cannot defer (today: 7 symbols deferred, 35 bound
    // at load; a build with every import deferred, -C relro-level=partial, which
    // Cargo cannot set for one package, measured no faster: docs/limits.md says
    // where the per-exec cost goes).
    // A first call in a fork or vfork child resolving `execve` lazily is what
    // every C program linked without -z now does; glibc's resolver takes no
    // lock that fork could have left held.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,lazy");

    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if target_os != "linux" || target_env != "gnu" {
        return;
    }
    let compiler = build.get_compiler();
    let found = Command::new(compiler.path())
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| PathBuf::from(s.trim()))
        .filter(|p| p.is_absolute() && p.is_file());
    match found.as_ref().and_then(|p| p.parent()) {
        Some(dir) => {
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-cfg=precompile_gcc_eh");
        }
        None => println!(
            "cargo:warning=libgcc_eh.a not found: a libprecompile.so built with panic=unwind will load libgcc_s.so.1 in every process"
        ),
    }
}
