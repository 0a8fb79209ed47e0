//! Every exported exec entry, driven from a real C program: under the
//! startup lockdown a compile is refused (the caller sees EPERM, nothing
//! runs, one stderr line, one `refused` record); with no lockdown it runs
//! (its output file appears) and is journaled as `allowed`.
//!
//! `system` and `popen` are not hooked: glibc starts /bin/sh through an
//! internal spawn. These tests are the proof that the shell inherits the
//! shim and gates its own exec of the compiler.

mod common;

use common::{assert_allowed, assert_refused, Scratch, Shim};

/// How a mode is invoked and what its caller reports.
#[derive(Clone, Copy)]
enum Via {
    /// `spawner MODE PROGRAM ARGV...`; the process becomes the program.
    Exec(&'static str),
    /// `spawner MODE PROGRAM ARGV...`; reports spawn=/status=.
    Spawn(&'static str),
    /// `spawner MODE "SHELL COMMAND"`; reports status=.
    Shell(&'static str),
    /// `spawner MODE /usr/bin/g++ ARGV...` in a (v)fork child; reports child-exit=.
    Fork(&'static str),
}

fn program_for(mode: &str) -> &'static str {
    match mode {
        "execvp" | "execvpe" | "execlp" | "posix_spawnp" => "g++", // searched on PATH
        _ => "/usr/bin/g++",
    }
}

fn run(via: Via, shim: &Shim, s: &Scratch, out: &str) -> common::Ran {
    match via {
        Via::Exec(mode) | Via::Spawn(mode) | Via::Fork(mode) => {
            let mut args = vec![program_for(mode).to_owned()];
            args.extend(s.compile_argv(out));
            shim.spawner(mode, &args)
        }
        Via::Shell(mode) => shim.spawner(mode, &[s.compile_sh(out)]),
    }
}

fn refused(via: Via, name: &str) {
    let s = Scratch::new(&format!("refused-{name}"));
    let ran = run(via, &Shim::locked(&s.journal()), &s, "a.o");
    match via {
        Via::Exec(_) => ran.expect_line("errno=1").expect_code(111),
        Via::Spawn(_) => ran.expect_line("spawn=1"),
        // dash reports a refused exec as "Operation not permitted", status 126
        Via::Shell(_) => ran.expect_line("status=126"),
        Via::Fork(_) => ran.expect_line("child-exit=201"), // 200 + EPERM
    };
    let lines = ran.refusals();
    assert_eq!(lines.len(), 1, "one refusal line expected: {ran:#?}");
    assert!(lines[0].contains("compiler `g++ -c "), "{}", lines[0]);
    assert!(
        lines[0].contains("TORCH_PRECOMPILE_NO_COMPILATION=1 was set at process start"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("(pid "), "{}", lines[0]);
    assert_refused(&s, "a.o");
}

fn allowed(via: Via, name: &str) {
    let s = Scratch::new(&format!("allowed-{name}"));
    let ran = run(via, &Shim::open(&s.journal()), &s, "a.o");
    match via {
        Via::Exec(_) => ran.expect_code(0),
        Via::Spawn(_) => ran.expect_line("spawn=0").expect_line("status=0"),
        Via::Shell(_) => ran.expect_line("status=0"),
        Via::Fork(_) => ran.expect_line("child-exit=0"),
    };
    assert!(ran.refusals().is_empty(), "{ran:#?}");
    assert_allowed(&s, "a.o");
}

macro_rules! both {
    ($refused:ident, $allowed:ident, $via:expr) => {
        #[test]
        fn $refused() {
            refused($via, stringify!($refused));
        }
        #[test]
        fn $allowed() {
            allowed($via, stringify!($allowed));
        }
    };
}

both!(
    execve_is_refused_under_lockdown,
    execve_runs_when_open,
    Via::Exec("execve")
);
both!(
    execv_is_refused_under_lockdown,
    execv_runs_when_open,
    Via::Exec("execv")
);
both!(
    execvp_via_path_is_refused_under_lockdown,
    execvp_via_path_runs_when_open,
    Via::Exec("execvp")
);
both!(
    execvpe_is_refused_under_lockdown,
    execvpe_runs_when_open,
    Via::Exec("execvpe")
);
both!(
    execl_is_refused_under_lockdown,
    execl_runs_when_open,
    Via::Exec("execl")
);
both!(
    execlp_is_refused_under_lockdown,
    execlp_runs_when_open,
    Via::Exec("execlp")
);
both!(
    execle_is_refused_under_lockdown,
    execle_runs_when_open,
    Via::Exec("execle")
);
both!(
    fexecve_is_refused_under_lockdown,
    fexecve_runs_when_open,
    Via::Exec("fexecve")
);
both!(
    execveat_is_refused_under_lockdown,
    execveat_runs_when_open,
    Via::Exec("execveat")
);
both!(
    posix_spawn_is_refused_under_lockdown,
    posix_spawn_runs_when_open,
    Via::Spawn("posix_spawn")
);
both!(
    posix_spawnp_is_refused_under_lockdown,
    posix_spawnp_runs_when_open,
    Via::Spawn("posix_spawnp")
);
both!(
    system_is_refused_by_the_shell_under_lockdown,
    system_runs_when_open,
    Via::Shell("system")
);
both!(
    popen_is_refused_by_the_shell_under_lockdown,
    popen_runs_when_open,
    Via::Shell("popen")
);
both!(
    fork_exec_is_refused_under_lockdown,
    fork_exec_runs_when_open,
    Via::Fork("fork-exec")
);
both!(
    vfork_exec_is_refused_under_lockdown,
    vfork_exec_runs_when_open,
    Via::Fork("vfork-exec")
);

/// The rlib crate type exists only so cargo builds the cdylib for these
/// tests; its exported exec hooks must not end up in the test binaries.
#[test]
fn the_test_binary_does_not_carry_the_hooks() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("nm")
        .arg(&exe)
        .output()
        .expect("nm (binutils)");
    assert!(out.status.success());
    let syms = String::from_utf8_lossy(&out.stdout);
    assert!(
        !syms.contains("precompile_lockdown_enter"),
        "the shim was linked into {}",
        exe.display()
    );
    assert!(!syms
        .lines()
        .any(|l| l.ends_with(" T execve") || l.ends_with(" T posix_spawn")));
}
