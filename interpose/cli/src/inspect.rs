//! `precompile inspect CACHE [--code PY]`: what a cache holds and what a serving
//! host needs, read from the checked header alone (nothing is unpacked or run).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::args::{is_help, usage};

const HELP: &str = "usage: precompile inspect CACHE [--code PYTHON_CODE]

Prints a cache's header: backend, tracer, the python_code it belongs to (sha256),
torch build, Python version, platform, every entry (kind, size, name), and what a
frozen kernel requires of the serving host. Only the header is read and checked;
entry bytes are not verified (use `precompile verify` for that). With --code, also
says whether that python_code is the one the cache was written for.
";

pub struct Parsed {
    pub cache: PathBuf,
    pub code: Option<PathBuf>,
}

pub fn parse(verb: &str, args: Vec<OsString>, help: &str) -> anyhow::Result<Option<Parsed>> {
    let mut cache = None;
    let mut code = None;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if is_help(&a) {
            print!("{help}");
            return Ok(None);
        } else if a == "--code" {
            let v = it
                .next()
                .ok_or_else(|| usage(format!("{verb}: --code needs a path")))?;
            code = Some(PathBuf::from(v));
        } else if cache.is_none() {
            cache = Some(PathBuf::from(a));
        } else {
            return Err(usage(format!(
                "{verb}: unexpected argument `{}`",
                a.to_string_lossy()
            )));
        }
    }
    let cache = cache.ok_or_else(|| usage(format!("{verb}: missing CACHE path")))?;
    Ok(Some(Parsed { cache, code }))
}

pub fn main(args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let Some(p) = parse("inspect", args, HELP)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let bytes =
        std::fs::read(&p.cache).with_context(|| format!("cannot read {}", p.cache.display()))?;
    let header = artifact::read_header(&bytes)
        .with_context(|| format!("{} is not a usable cache", p.cache.display()))?;
    println!("cache            {}", p.cache.display());
    println!("format version   {}", header.format_version);
    println!("backend          {}", header.backend);
    println!("tracer           {}", header.tracer);
    println!("python_code      sha256 {}", header.code_hash);
    println!("torch build      {}", header.torch_build);
    println!("python           {}", header.python_version);
    println!("platform         {}", header.platform);
    println!("created by       {}", header.created_by);
    let requirements = header
        .meta
        .get("host_requirements")
        .and_then(|v| v.as_str())
        .unwrap_or("none recorded");
    println!("host needs       {requirements}");
    let mut keys: Vec<_> = header
        .meta
        .keys()
        .filter(|k| *k != "host_requirements")
        .collect();
    keys.sort();
    for k in keys {
        println!("meta.{k:<11} {}", header.meta[k]);
    }
    let total: u64 = header.entries.iter().map(|e| e.size).sum();
    println!(
        "entries          {} ({} bytes)",
        header.entries.len(),
        total
    );
    for e in &header.entries {
        println!("  {:<16} {:>10}  {}", e.kind, e.size, e.name);
    }
    if let Some(code) = p.code {
        let code_bytes =
            std::fs::read(&code).with_context(|| format!("cannot read {}", code.display()))?;
        match header.check_code(&code_bytes) {
            Ok(()) => println!("--code           {} matches", code.display()),
            Err(e) => println!("--code           {} DOES NOT match: {e}", code.display()),
        }
    }
    Ok(ExitCode::SUCCESS)
}
