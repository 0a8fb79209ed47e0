//! `precompile run [--lockdown [--enforce]] [--strict] [--journal PATH]
//! [--capture DIR | --serve DIR] -- CMD ARGS...`:
//! execs CMD with the shim preloaded and the options as environment
//! variables. It is an exec, so CMD's exit status is ours. With `--enforce`
//! it stays as CMD's parent and supervisor instead (`crate::enforce`).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{anyhow, Context};
use policy::env;

use crate::args::{is_help, usage};
use crate::enforce;
use crate::locate;

const HELP: &str = "usage: precompile run [--lockdown [--enforce]] [--strict] [--journal PATH]
                      [--capture DIR | --serve DIR] [--] CMD [ARGS...]

Runs CMD with libprecompile.so preloaded (first in LD_PRELOAD, other preloads
kept), so that CMD and every process it starts gate their compiler runs.

options:
  --lockdown       refuse every compiler run in the tree
                   (sets TORCH_PRECOMPILE_NO_COMPILATION=1)
  --enforce        with --lockdown: the kernel refuses compiler runs the shim
                   cannot see (raw system calls, static programs, renamed
                   copies of a compiler, a cleared LD_PRELOAD): a seccomp
                   filter sends every exec of the tree to this process, which
                   stays as CMD's parent; fails at start where the kernel
                   lacks seccomp user notification
  --strict         under lockdown, refuse version probes (`g++ --version`) too
                   (sets PRECOMPILE_STRICT=1)
  --journal PATH   append one JSON line per compiler decision to PATH
                   (sets PRECOMPILE_JOURNAL; summarize with `precompile journal PATH`)
  --capture DIR    capture every torch.compile(...) / module.compile() call
                   site of the tree's Python processes into DIR, one pair per
                   site (and rank), indexed in DIR/index.json
                   (sets PRECOMPILE_CAPTURE_DIR; list with `precompile inspect DIR`)
  --serve DIR      serve each of those sites from DIR instead of compiling it;
                   with --lockdown a site DIR lacks raises, naming it
                   (sets PRECOMPILE_SERVE_DIR)
  -h, --help       this text

The exit status is CMD's.
";

#[derive(Debug, Default, PartialEq)]
struct Options {
    lockdown: bool,
    enforce: bool,
    strict: bool,
    journal: Option<OsString>,
    capture: Option<OsString>,
    serve: Option<OsString>,
    command: Vec<OsString>,
}

enum Parsed {
    Help,
    Run(Options),
}

fn parse(args: Vec<OsString>) -> anyhow::Result<Parsed> {
    let mut o = Options::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let bytes = arg.as_bytes();
        if arg == "--" {
            break;
        } else if is_help(&arg) {
            return Ok(Parsed::Help);
        } else if arg == "--lockdown" {
            o.lockdown = true;
        } else if arg == "--enforce" {
            o.enforce = true;
        } else if arg == "--strict" {
            o.strict = true;
        } else if arg == "--journal" {
            let path = it.next().ok_or_else(|| usage("--journal needs a PATH"))?;
            o.journal = Some(path);
        } else if let Some(path) = bytes.strip_prefix(b"--journal=") {
            o.journal = Some(OsStr::from_bytes(path).to_owned());
        } else if arg == "--capture" || arg == "--serve" {
            let dir = it
                .next()
                .filter(|d| !d.is_empty())
                .ok_or_else(|| usage(format!("{} needs a DIR", arg.to_string_lossy())))?;
            if arg == "--capture" {
                o.capture = Some(dir);
            } else {
                o.serve = Some(dir);
            }
        } else if bytes.starts_with(b"-") {
            return Err(usage(format!(
                "run: unknown option `{}` (see `precompile run --help`)",
                arg.to_string_lossy()
            )));
        } else {
            o.command.push(arg);
            break;
        }
    }
    o.command.extend(it);
    if o.command.is_empty() {
        return Err(usage(
            "run: missing command (usage: precompile run [options] -- CMD [ARGS...])",
        ));
    }
    if o.enforce && !o.lockdown {
        return Err(usage(
            "run: --enforce enforces the lockdown; give --lockdown with it",
        ));
    }
    if o.capture.is_some() && o.serve.is_some() {
        return Err(usage(
            "run: --capture and --serve exclude each other (capture once, then serve)",
        ));
    }
    if o.journal.as_ref().is_some_and(|j| j.is_empty()) {
        return Err(usage("run: --journal needs a non-empty PATH"));
    }
    Ok(Parsed::Run(o))
}

/// `lib` first, then the existing preloads minus any copy of the shim.
fn preload_value(lib: &Path, existing: Option<&OsStr>) -> OsString {
    let mut value = lib.as_os_str().as_bytes().to_vec();
    let existing = existing.map(OsStr::as_bytes).unwrap_or(b"");
    for item in existing
        .split(|&b| b == b':' || b == b' ')
        .filter(|s| !s.is_empty())
    {
        let name = Path::new(OsStr::from_bytes(item))
            .file_name()
            .map(OsStr::as_bytes);
        if item == lib.as_os_str().as_bytes() || name == Some(locate::LIB_NAME.as_bytes()) {
            continue;
        }
        value.push(b':');
        value.extend_from_slice(item);
    }
    OsString::from_vec(value)
}

fn absolute(path: &OsStr) -> anyhow::Result<PathBuf> {
    let p = Path::new(path);
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    Ok(std::env::current_dir()
        .context("cannot read the current directory")?
        .join(p))
}

pub fn main(args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let o = match parse(args)? {
        Parsed::Help => {
            print!("{HELP}");
            return Ok(ExitCode::SUCCESS);
        }
        Parsed::Run(o) => o,
    };
    let lib = locate::preload_library()?;
    let (program, rest) = o
        .command
        .split_first()
        .ok_or_else(|| usage("run: missing command"))?;
    let mut cmd = Command::new(program);
    cmd.args(rest);
    cmd.env(
        env::LD_PRELOAD,
        preload_value(&lib, std::env::var_os(env::LD_PRELOAD).as_deref()),
    );
    if o.lockdown {
        cmd.env(env::NO_COMPILATION, "1");
    }
    if o.strict {
        cmd.env(env::STRICT, "1");
    }
    let journal = o.journal.as_deref().map(absolute).transpose()?;
    if let Some(j) = &journal {
        cmd.env(env::JOURNAL, j);
    }
    if let Some(dir) = &o.capture {
        cmd.env(env::CAPTURE_DIR, absolute(dir)?);
    }
    if let Some(dir) = &o.serve {
        cmd.env(env::SERVE_DIR, absolute(dir)?);
    }
    if o.enforce {
        let strict = o.strict || env::is_on(std::env::var(env::STRICT).ok().as_deref());
        let rules = policy::Rules::from_env_values(
            std::env::var(env::COMPILERS).ok().as_deref(),
            std::env::var(env::ALLOW).ok().as_deref(),
            strict,
        );
        // the supervisor journals where the tree does
        let journal = match journal {
            Some(j) => Some(j),
            None => std::env::var_os(env::JOURNAL)
                .filter(|j| !j.is_empty())
                .map(|j| absolute(&j))
                .transpose()?,
        };
        return match enforce::run(cmd, enforce::Settings { rules, journal })
            .with_context(|| format!("cannot run `{}` enforced", program.to_string_lossy()))?
        {
            Ok(code) => Ok(code),
            Err(err) => Ok(cannot_run(program, err)),
        };
    }
    Ok(cannot_run(program, cmd.exec()))
}

/// CMD could not be started: one line, and a shell's exit status for it.
fn cannot_run(program: &OsStr, err: std::io::Error) -> ExitCode {
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    eprintln!(
        "precompile: {:#}",
        anyhow!(err).context(format!("cannot run `{}`", program.to_string_lossy()))
    );
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn run_opts(v: &[&str]) -> Options {
        match parse(os(v)).unwrap() {
            Parsed::Run(o) => o,
            Parsed::Help => panic!("help"),
        }
    }

    #[test]
    fn parses_options_then_the_command() {
        let o = run_opts(&[
            "--lockdown",
            "--journal",
            "j.jsonl",
            "--",
            "g++",
            "--version",
        ]);
        assert!(o.lockdown && !o.strict && !o.enforce);
        assert_eq!(o.journal.unwrap(), "j.jsonl");
        assert_eq!(o.command, os(&["g++", "--version"]));
        let o = run_opts(&["--lockdown", "--enforce", "true"]);
        assert!(o.lockdown && o.enforce);
        let o = run_opts(&["--strict", "--journal=x", "python3", "-c", "pass"]);
        assert!(o.strict);
        assert_eq!(o.journal.unwrap(), "x");
        assert_eq!(o.command, os(&["python3", "-c", "pass"]));
        let o = run_opts(&["--capture", "sites", "python3", "app.py"]);
        assert_eq!(o.capture.unwrap(), "sites");
        let o = run_opts(&["--serve", "sites", "--lockdown", "python3"]);
        assert!(o.lockdown && o.serve.unwrap() == "sites");
        // options after the command belong to it
        let o = run_opts(&["ls", "--lockdown"]);
        assert!(!o.lockdown);
        assert_eq!(o.command, os(&["ls", "--lockdown"]));
    }

    #[test]
    fn usage_errors() {
        for bad in [
            &[][..],
            &["--"],
            &["--lockdown"],
            &["--journal"],
            &["--bogus", "x"],
            &["--journal=", "x"],
            &["--enforce", "x"],
            &["--capture"],
            &["--capture", "a", "--serve", "b", "x"],
        ] {
            let e = parse(os(bad))
                .err()
                .unwrap_or_else(|| panic!("{bad:?} parsed"));
            assert!(
                e.downcast_ref::<crate::args::UsageError>().is_some(),
                "{bad:?}: {e}"
            );
        }
        assert!(matches!(parse(os(&["--help"])).unwrap(), Parsed::Help));
    }

    #[test]
    fn the_shim_goes_first_without_duplicates() {
        let lib = Path::new("/opt/lib/precompile/libprecompile.so");
        assert_eq!(
            preload_value(lib, None),
            "/opt/lib/precompile/libprecompile.so"
        );
        assert_eq!(
            preload_value(
                lib,
                Some(OsStr::new(
                    "libfoo.so /old/libprecompile.so:/opt/lib/precompile/libprecompile.so"
                ))
            ),
            "/opt/lib/precompile/libprecompile.so:libfoo.so"
        );
    }
}
