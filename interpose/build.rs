//! Builds the two things cargo cannot do by itself for the shim:
//!
//! 1. `src/variadic.c`: execl, execlp and execle are C-variadic, which stable
//!    Rust cannot define (see hooks.rs).
//! 2. The unwinder linked in statically (libgcc_eh.a, as `gcc -static-libgcc`
//!    does for shared libraries), so that preloading the shim does not also
//!    load libgcc_s.so.1 into every process of the tree: that second library
//!    was about a third of the shim's whole per-exec cost. Where libgcc_eh.a
//!    cannot be found the default dynamic libgcc_s is used (with a warning).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/variadic.c");
    let build = {
        let mut b = cc::Build::new();
        b.file("src/variadic.c")
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
    // GOT, which lazy binding cannot defer (today: 14 symbols deferred, 52 bound
    // at load; docs/limits.md says where the rest of the per-exec cost goes).
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
            // whole-archive: the unwinder's symbols must be defined before
            // std's `-lgcc_s` comes up in the link line, so that (with
            // --as-needed) libgcc_s is never recorded as NEEDED.
            println!("cargo:rustc-link-lib=static:+whole-archive=gcc_eh");
        }
        None => println!(
            "cargo:warning=libgcc_eh.a not found: libprecompile.so will load libgcc_s.so.1 in every process"
        ),
    }
}
