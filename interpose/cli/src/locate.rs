//! Where libprecompile.so is, relative to this executable (see the install
//! layout in docs/CONTRACTS.md).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

pub const LIB_NAME: &str = "libprecompile.so";

/// The places looked at, in order, for an executable in `exe_dir`:
/// `<exe dir>/../lib/precompile/libprecompile.so` (the installed layout: the
/// wheel's `torch_precompile/_prefix/`)
/// and `<exe dir>/libprecompile.so` (cargo's target/release layout).
pub fn candidates(exe_dir: &Path) -> [PathBuf; 2] {
    [
        exe_dir
            .join("..")
            .join("lib")
            .join("precompile")
            .join(LIB_NAME),
        exe_dir.join(LIB_NAME),
    ]
}

/// The absolute path of the shim.
pub fn preload_library() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the precompile executable")?;
    let dir = exe
        .parent()
        .context("the precompile executable has no directory")?;
    let looked = candidates(dir);
    for path in &looked {
        if path.is_file() {
            return std::fs::canonicalize(path)
                .with_context(|| format!("cannot resolve {}", path.display()));
        }
    }
    bail!(
        "cannot find {LIB_NAME}: looked for {} and {}; build it with `cargo build --release -p interpose` \
         or install the wheel that scripts/wheel builds",
        looked[0].display(),
        looked[1].display()
    )
}
