//! Ways around the lockdown a user found (issue 15), each reproduced with a
//! real compiler from inside a locked-down shell: a child loosening the
//! allowed names for its own children, a `#!` script whose interpreter is a
//! compiler, and the dynamic loader run as the program.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use common::{assert_refused, by_tool, records, Scratch, Shim};

const LOOSENED: &str = "g++:cc1plus:as:ld:collect2";

#[test]
fn a_locked_down_child_cannot_allow_compilers_for_its_children() {
    let s = Scratch::new("escape-allow");
    // `env NAME=value` in the tree, and a shell exporting it
    let via_env = format!(
        "env PRECOMPILE_ALLOW={LOOSENED} sh -c '{}'",
        s.compile_sh("e1.o")
    );
    let ran = Shim::locked(&s.journal()).run("/bin/sh", &["-c", &via_env]);
    assert_ne!(ran.code, Some(0), "{ran:#?}");
    assert_refused(&s, "e1.o");
    let via_export = format!(
        "export PRECOMPILE_ALLOW={LOOSENED}; {}",
        s.compile_sh("e1b.o")
    );
    Shim::locked(&s.journal()).run("/bin/sh", &["-c", &via_export]);
    assert_refused(&s, "e1b.o");
    // a name the lockdown's start allowed stays the only one allowed
    let ran = Shim::locked(&s.journal())
        .with("PRECOMPILE_ALLOW", "ninja")
        .run(
            "/bin/sh",
            &["-c", &format!("env PRECOMPILE_ALLOW={LOOSENED} env")],
        );
    assert!(ran.has_line("PRECOMPILE_ALLOW=ninja"), "{ran:#?}");
    assert!(!ran.stdout.contains(LOOSENED), "{ran:#?}");
}

#[test]
fn outside_a_lockdown_a_child_may_still_allow_names() {
    let s = Scratch::new("escape-allow-open");
    let cmd = "env PRECOMPILE_ALLOW=nothing-in-use env";
    let ran = Shim::open(&s.journal()).run("/bin/sh", &["-c", cmd]);
    assert!(ran.has_line("PRECOMPILE_ALLOW=nothing-in-use"), "{ran:#?}");
}

/// `sh -c CMD` run in the scratch directory.
fn sh_in(s: &Scratch, shim: &Shim, cmd: &str) -> std::process::Output {
    shim.command("/bin/sh")
        .args(["-c", cmd])
        .current_dir(&s.dir)
        .output()
        .unwrap()
}

fn script(s: &Scratch, name: &str, first_line: &str) -> String {
    let path = s.path(name);
    // `#` starts a comment for the assembler: the file is also its input
    std::fs::write(&path, format!("{first_line}\n.text\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("./{name}")
}

#[test]
fn a_script_whose_interpreter_is_a_compiler_is_a_compiler_run() {
    let s = Scratch::new("escape-shebang");
    for (name, line) in [
        ("s.sh", "#!/usr/bin/as"),
        ("t.sh", "#!  /usr/bin/as  --32  "),
    ] {
        let run = script(&s, name, line);
        let ran = sh_in(&s, &Shim::locked(&s.journal()), &run);
        assert_ne!(ran.status.code(), Some(0), "{name}: {ran:?}");
        assert!(
            !s.path("a.out").exists(),
            "{name}: the script assembled a.out under lockdown"
        );
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert!(
            stderr.contains("precompile: refused to run compiler"),
            "{name}: {stderr}"
        );
    }
    // a script that runs an interpreter which is itself such a script
    script(&s, "as.sh", "#!/usr/bin/as");
    let outer = script(&s, "outer.sh", &format!("#!{}", s.path("as.sh").display()));
    let ran = sh_in(&s, &Shim::locked(&s.journal()), &outer);
    assert_ne!(ran.status.code(), Some(0), "{ran:?}");
    assert!(
        !s.path("a.out").exists(),
        "a nested interpreter assembled a.out under lockdown"
    );
    let recs = records(&s.journal());
    assert_eq!(recs.len(), 3, "{recs:#?}");
    assert!(
        recs.iter()
            .all(|r| r["verdict"] == "refused" && r["kind"] == "compile"),
        "{recs:#?}"
    );
    // an ordinary script still runs, unrecorded
    let plain = script(&s, "plain.sh", "#!/bin/sh");
    std::fs::write(s.path("plain.sh"), "#!/bin/sh\necho ran\n").unwrap();
    let ran = sh_in(&s, &Shim::locked(&s.journal()), &plain);
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout).trim(),
        "ran",
        "{ran:?}"
    );
    assert_eq!(records(&s.journal()).len(), 3);
}

#[test]
fn a_script_whose_interpreter_is_a_compiler_runs_when_open_and_is_journaled() {
    let s = Scratch::new("escape-shebang-open");
    let run = script(&s, "s.sh", "#!/usr/bin/as");
    let ran = sh_in(&s, &Shim::open(&s.journal()), &run);
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    assert!(s.path("a.out").exists());
    let recs = records(&s.journal());
    assert!(
        recs.iter()
            .any(|r| r["verdict"] == "allowed" && r["kind"] == "compile"),
        "{recs:#?}"
    );
}

fn loader() -> &'static str {
    ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("a dynamic loader")
}

fn cc1plus() -> String {
    let out = Command::new("g++")
        .arg("-print-prog-name=cc1plus")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn the_dynamic_loader_cannot_run_a_compiler() {
    let s = Scratch::new("escape-loader");
    let out = s.path("e3.s");
    let cmd = format!(
        "{} {} -quiet {} -o {}",
        loader(),
        cc1plus(),
        s.src(),
        out.display()
    );
    let ran = Shim::locked(&s.journal()).run("/bin/sh", &["-c", &cmd]);
    assert_ne!(ran.code, Some(0), "{ran:#?}");
    assert_refused(&s, "e3.s");
    std::fs::write(s.path("t.s"), ".text\n").unwrap();
    let cmd = format!(
        "{} --library-path /nonexistent /usr/bin/as {} -o {}",
        loader(),
        s.path("t.s").display(),
        s.path("e3.o").display()
    );
    Shim::locked(&s.journal()).run("/bin/sh", &["-c", &cmd]);
    assert_refused(&s, "e3.o");
    // the loader running an ordinary program is not a compiler run
    let ran =
        Shim::locked(&s.journal()).run("/bin/sh", &["-c", &format!("{} /bin/echo fine", loader())]);
    assert!(ran.has_line("fine"), "{ran:#?}");
    assert!(by_tool(&records(&s.journal()), "echo").is_empty());
}
