//! `precompile`: the command line. A small dispatcher, one module per verb.
//!
//! Errors print as one line, `precompile: <error>: <cause>: …` (the whole
//! anyhow chain), and exit non-zero: 2 for a usage error, 1 otherwise.

mod args;
mod enforce;
mod inspect;
mod journal;
mod locate;
mod preload_path;
mod run;
mod sign;
mod verify;

use std::ffi::OsString;
use std::process::ExitCode;

use args::UsageError;

/// One verb: its name, one-line summary, and entry point.
struct Verb {
    name: &'static str,
    summary: &'static str,
    main: fn(Vec<OsString>) -> anyhow::Result<ExitCode>,
}

const VERBS: &[Verb] = &[
    Verb {
        name: "run",
        summary: "run a command with the shim preloaded",
        main: run::main,
    },
    Verb {
        name: "preload-path",
        summary: "print the absolute path of libprecompile.so",
        main: preload_path::main,
    },
    Verb {
        name: "inspect",
        summary: "show a cache's header and what a serving host needs",
        main: inspect::main,
    },
    Verb {
        name: "verify",
        summary: "check a cache (and its python_code) without running anything",
        main: verify::main,
    },
    Verb {
        name: "sign",
        summary: "sign a directory of pairs or one pair (OpenSSF model signing)",
        main: sign::main,
    },
    Verb {
        name: "journal",
        summary: "summarize a compile journal",
        main: journal::main,
    },
];

fn usage() -> String {
    let mut s = String::from(
        "precompile: ahead-of-time capture and compile-free serving for PyTorch\n\n\
         usage: precompile <verb> [options] [args]\n\nverbs:\n",
    );
    for v in VERBS {
        s.push_str(&format!("  {:<14}{}\n", v.name, v.summary));
    }
    s.push_str("\n`precompile <verb> --help` describes one verb.\n");
    s
}

fn verb_list() -> String {
    let names: Vec<&str> = VERBS.iter().map(|v| v.name).collect();
    format!("verbs: {}", names.join(", "))
}

fn dispatch(mut argv: Vec<OsString>) -> anyhow::Result<ExitCode> {
    if argv.is_empty() {
        return Err(UsageError(format!(
            "missing verb ({}; see `precompile --help`)",
            verb_list()
        ))
        .into());
    }
    let verb = argv.remove(0);
    let verb = verb.to_string_lossy();
    match verb.as_ref() {
        "-h" | "--help" | "help" => {
            print!("{}", usage());
            return Ok(ExitCode::SUCCESS);
        }
        "-V" | "--version" => {
            println!("precompile {}", env!("CARGO_PKG_VERSION"));
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    match VERBS.iter().find(|v| v.name == verb) {
        Some(v) => (v.main)(argv),
        None => Err(UsageError(format!("unknown verb `{verb}` ({})", verb_list())).into()),
    }
}

fn main() -> ExitCode {
    match dispatch(std::env::args_os().skip(1).collect()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("precompile: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
