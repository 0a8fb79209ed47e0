//! `precompile verify CACHE [--code PY [--trust KEYS]]`: every check `load`
//! makes before it unpacks or runs anything, without unpacking or running
//! anything; with `--trust`, the pair's signature as `PRECOMPILE_TRUST` checks it.

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::Context;

use artifact::signature;

use crate::args::usage;
use crate::inspect::parse;

const HELP: &str = "usage: precompile verify CACHE [--code PYTHON_CODE [--trust KEYS]]

Checks a cache completely: magic and format version, the header checksum, every
entry name (no absolute paths, no '..'), every entry's size and sha256, every
path the kernel manifest names (an entry of this cache, by the same rule), and, with
--code, that the cache was written for exactly that python_code and that the
python_code's BACKEND and TRACER are the cache's. Nothing is unpacked or
executed. The one check of `load` it cannot make is the torch build, which needs
the serving torch: it prints the build the frozen kernels need. With --trust
(':'-separated public key files and directories, as PRECOMPILE_TRUST), the pair
must also be signed by one of those keys over exactly these bytes (its own
ARTIFACT.sig, else the directory's model.sig), as `load` requires under a trust
policy. Exit status 0 when everything holds, 1 otherwise (the reason is printed).
";

pub fn main(mut args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let trust = match args.iter().position(|a| a == "--trust") {
        Some(i) if i + 1 < args.len() => {
            let spec = args.remove(i + 1);
            args.remove(i);
            Some(spec.to_string_lossy().into_owned())
        }
        Some(_) => {
            return Err(usage(
                "verify: --trust needs KEYS (public key files or directories, ':'-separated)",
            ))
        }
        None => None,
    };
    let Some(p) = parse("verify", args, HELP)? else {
        return Ok(ExitCode::SUCCESS);
    };
    if trust.is_some() && p.code.is_none() {
        return Err(usage(
            "verify: --trust checks a pair: give its python_code with --code",
        ));
    }
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
        let text = String::from_utf8_lossy(&code_bytes);
        for (name, want) in [
            ("BACKEND", &env.header.backend),
            ("TRACER", &env.header.tracer),
        ] {
            let found = literal(&text, name);
            if found.as_deref() != Some(want.as_str()) {
                anyhow::bail!(
                    "{} and {} are not a pair: the cache says {} {:?}, python_code says {:?}",
                    code.display(),
                    p.cache.display(),
                    name.to_lowercase(),
                    want,
                    found.unwrap_or_else(|| "<no such line>".into())
                );
            }
        }
        if let Some(spec) = &trust {
            let keys = signature::trust_policy(spec).context("verify: the trust policy")?;
            let (sig, verified) =
                signature::verify_pair(&keys, code, &code_bytes, &p.cache, &bytes).with_context(
                    || {
                        format!(
                            "{} and {} are not signed by a trusted key",
                            code.display(),
                            p.cache.display()
                        )
                    },
                )?;
            println!("signed: {} (by {})", sig.display(), verified.key_label);
        }
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
    println!(
        "needs torch build {} (load compares it with the serving torch)",
        env.header.torch_build
    );
    Ok(ExitCode::SUCCESS)
}

/// The string of a top-level `NAME = '...'` line of python_code (the metadata
/// block writes them with Python's repr: single quotes unless the text has one).
fn literal(code: &str, name: &str) -> Option<String> {
    let prefix = format!("{name} = ");
    let line = code.lines().find(|l| l.starts_with(&prefix))?;
    let value = line[prefix.len()..].trim();
    let quote = value.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    value
        .strip_prefix(quote)?
        .strip_suffix(quote)
        .map(str::to_owned)
}
