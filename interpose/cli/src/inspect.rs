//! `precompile inspect CACHE [--code PY]`: what a cache holds and what a serving
//! host needs, read from the checked header alone (nothing is unpacked or run).
//! `precompile inspect DIR`: the torch.compile sites `precompile run --capture DIR`
//! captured, read from DIR/index.json.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::args::{is_help, usage};

const HELP: &str = "usage: precompile inspect CACHE [--code PYTHON_CODE]
       precompile inspect DIR

Prints a cache's header: backend, tracer, the python_code it belongs to (sha256),
torch build, Python version, platform, every entry (kind, size, name), and what a
frozen kernel requires of the serving host. Only the header is read and checked;
entry bytes are not verified (use `precompile verify` for that). With --code, also
says whether that python_code is the one the cache was written for.

Given a directory `precompile run --capture DIR` wrote, lists its torch.compile
sites: what each compiles, its options, and per rank its pair and what the
capture's summary says (variants, graphs, gaps), each pair's cache header checked.
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
    if p.cache.is_dir() {
        if p.code.is_some() {
            return Err(usage(
                "inspect: --code goes with a CACHE, not a DIR of sites",
            ));
        }
        return sites(&p.cache);
    }
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

/// The sites of a `precompile run --capture DIR` directory, from its index.
fn sites(dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    let path = dir.join("index.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (is {} a directory `precompile run --capture` wrote?)",
            path.display(),
            dir.display()
        )
    })?;
    let index: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a sites index", path.display()))?;
    let sites = index
        .get("sites")
        .and_then(|s| s.as_object())
        .with_context(|| format!("{} has no `sites`", path.display()))?;
    println!("sites            {} in {}", sites.len(), dir.display());
    let text_of = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "?".into(),
    };
    for (site, entry) in sites {
        println!("\n{site}");
        println!("  compiles       {}", text_of(entry.get("what")));
        if let Some(options) = entry.get("options").and_then(|o| o.as_object()) {
            let mut parts: Vec<String> = options.iter().map(|(k, v)| format!("{k}={v}")).collect();
            parts.sort();
            println!("  options        {}", parts.join(" "));
        }
        let Some(ranks) = entry.get("ranks").and_then(|r| r.as_object()) else {
            continue;
        };
        for (rank, pair) in ranks {
            let cache = dir.join(text_of(pair.get("cache")));
            let header = std::fs::read(&cache)
                .map_err(anyhow::Error::from)
                .and_then(|b| artifact::read_header(&b).map_err(anyhow::Error::from));
            let checked = match header {
                Ok(h) => format!(
                    "backend {}, tracer {}, torch {}",
                    h.backend, h.tracer, h.torch_build
                ),
                Err(e) => format!("UNUSABLE: {e:#}"),
            };
            println!(
                "  rank {rank:<9} {} + {} ({checked})",
                text_of(pair.get("artifact")),
                text_of(pair.get("cache"))
            );
            println!(
                "    captured     {} call(s)",
                text_of(pair.get("calls_captured"))
            );
            println!("    summary      {}", text_of(pair.get("summary")));
            // the compiled optimizer: each torch.optim update captured as a pair of its own
            for step in pair
                .get("optimizer_steps")
                .and_then(|s| s.as_array())
                .into_iter()
                .flatten()
            {
                let usable = std::fs::read(dir.join(text_of(step.get("cache"))))
                    .map_err(anyhow::Error::from)
                    .and_then(|b| artifact::read_header(&b).map_err(anyhow::Error::from));
                println!(
                    "    update       {} via {} + {}{}",
                    text_of(step.get("functional")),
                    text_of(step.get("artifact")),
                    text_of(step.get("cache")),
                    match usable {
                        Ok(_) => String::new(),
                        Err(e) => format!(" (UNUSABLE: {e:#})"),
                    }
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
