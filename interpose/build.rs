//! Compiles `src/variadic.c`: execl, execlp and execle are C-variadic, which
//! stable Rust cannot define (see hooks.rs).

fn main() {
    println!("cargo:rerun-if-changed=src/variadic.c");
    cc::Build::new()
        .file("src/variadic.c")
        .flag("-fvisibility=hidden")
        .flag_if_supported("-std=gnu11")
        .warnings(true)
        .extra_warnings(true)
        .compile("precompile_variadic");
}
