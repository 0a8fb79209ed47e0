//! `precompile verify CACHE [--code PY]`: every check `load` makes before it
//! unpacks or runs anything, without unpacking or running anything.

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::Context;

use crate::inspect::parse;

const HELP: &str = "usage: precompile verify CACHE [--code PYTHON_CODE]

Checks a cache completely: magic and format version, the header checksum, every
entry name (no absolute paths, no '..'), every entry's size and sha256, and, with
--code, that the cache was written for exactly that python_code. Nothing is
unpacked or executed. Exit status 0 when everything holds, 1 otherwise (the
reason is printed).
";

pub fn main(args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let Some(p) = parse("verify", args, HELP)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let bytes =
        std::fs::read(&p.cache).with_context(|| format!("cannot read {}", p.cache.display()))?;
    let env = artifact::decode(&bytes)
        .with_context(|| format!("{} failed verification", p.cache.display()))?;
    if let Some(code) = &p.code {
        let code_bytes =
            std::fs::read(code).with_context(|| format!("cannot read {}", code.display()))?;
        env.header.check_code(&code_bytes).with_context(|| {
            format!(
                "{} and {} are not a pair",
                code.display(),
                p.cache.display()
            )
        })?;
    }
    println!(
        "ok: {} ({} {} cache, {} entries verified{})",
        p.cache.display(),
        env.header.tracer,
        env.header.backend,
        env.entries.len(),
        if p.code.is_some() {
            ", python_code matches"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}
