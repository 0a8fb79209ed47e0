//! `precompile preload-path`: prints the shim's absolute path, for
//! `LD_PRELOAD=$(precompile preload-path) python train.py`.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::args::{is_help, usage};
use crate::locate;

const HELP: &str = "usage: precompile preload-path

Prints the absolute path of libprecompile.so, the LD_PRELOAD shim:

    LD_PRELOAD=$(precompile preload-path) python train.py

It is looked for at <dir of precompile>/../lib/precompile/libprecompile.so,
then at <dir of precompile>/libprecompile.so. Installed from the wheel, the
`precompile` on PATH execs the CLI inside the torch_precompile package
(torch_precompile/_prefix/bin/), so the shim printed is the package's.
";

pub fn main(args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    if let Some(a) = args.first() {
        if is_help(a) {
            print!("{HELP}");
            return Ok(ExitCode::SUCCESS);
        }
        return Err(usage(format!(
            "preload-path takes no arguments (got `{}`)",
            a.to_string_lossy()
        )));
    }
    println!("{}", locate::preload_library()?.display());
    Ok(ExitCode::SUCCESS)
}
