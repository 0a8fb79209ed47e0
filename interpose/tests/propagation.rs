//! The lockdown reaches the whole tree: threads, grandchildren through a
//! shell, children given a scrubbed environment, Python's subprocess and
//! os.execve; version probes and non-compilers pass; symlinked compilers
//! are still compilers; an unconfigured process sees nothing.

mod common;

use common::{
    assert_allowed, assert_refused, by_tool, helpers, lib, python, records, Scratch, Shim,
};

// ---- threads -------------------------------------------------------------

fn threads(mode: &str, locked: bool) {
    let s = Scratch::new(&format!("{mode}-{locked}"));
    let shim = if locked {
        Shim::locked(&s.journal())
    } else {
        Shim::open(&s.journal())
    };
    let mut args = vec!["8".to_owned(), "/usr/bin/g++".to_owned()];
    args.extend(s.compile_argv("t%d.o"));
    let ran = shim.spawner(mode, &args);
    ran.expect_code(0);
    // fork children report 200+errno; posix_spawn reports -errno
    let refused_result = if mode == "threads-fork" {
        "result=201"
    } else {
        "result=-1"
    };
    for i in 0..8 {
        let line = format!(
            "thread {i} {}",
            if locked { refused_result } else { "result=0" }
        );
        ran.expect_line(&line);
        if locked {
            assert_refused(&s, &format!("t{i}.o"));
        } else {
            assert_allowed(&s, &format!("t{i}.o"));
        }
    }
    if locked {
        assert_eq!(ran.refusals().len(), 8, "{ran:#?}");
    }
}

#[test]
fn eight_threads_forking_compilers_at_once_are_all_refused() {
    threads("threads-fork", true);
}

#[test]
fn eight_threads_forking_compilers_at_once_all_run_when_open() {
    threads("threads-fork", false);
}

#[test]
fn eight_threads_spawning_compilers_at_once_are_all_refused() {
    threads("threads-spawn", true);
}

#[test]
fn eight_threads_spawning_compilers_at_once_all_run_when_open() {
    threads("threads-spawn", false);
}

// ---- grandchildren and scrubbed environments -------------------------------

/// `spawner posix_spawn /bin/sh sh -c "sh -c '<compile>'"`: the compiler is
/// a grandchild of the first shell.
fn grandchild(shim: &Shim, s: &Scratch) -> common::Ran {
    let inner = format!("sh -c '{}'", s.compile_sh("a.o"));
    shim.spawner("posix_spawn", &["/bin/sh", "sh", "-c", &inner])
}

#[test]
fn a_grandchild_through_sh_c_is_refused() {
    let s = Scratch::new("grandchild-refused");
    let ran = grandchild(&Shim::locked(&s.journal()), &s);
    ran.expect_line("spawn=0").expect_line("status=126");
    assert_refused(&s, "a.o");
}

#[test]
fn a_grandchild_through_sh_c_runs_when_open() {
    let s = Scratch::new("grandchild-allowed");
    grandchild(&Shim::open(&s.journal()), &s).expect_line("status=0");
    assert_allowed(&s, "a.o");
}

/// A shell started with an empty environment (execve envp = {NULL} or NULL),
/// compiling with the absolute path (g++ without PATH cannot find itself).
fn scrubbed(mode: &str, shim: &Shim, s: &Scratch) -> common::Ran {
    let cmd = format!("/usr/bin/{}", s.compile_sh("a.o"));
    shim.spawner(mode, &["/bin/sh", "sh", "-c", &cmd])
}

#[test]
fn a_child_with_an_empty_environment_is_still_locked_down() {
    for mode in ["execve-empty", "execve-null"] {
        let s = Scratch::new(&format!("scrubbed-refused-{mode}"));
        let ran = scrubbed(mode, &Shim::locked(&s.journal()), &s);
        ran.expect_code(126);
        assert_eq!(ran.refusals().len(), 1, "{mode}: {ran:#?}");
        assert_refused(&s, "a.o");
    }
}

#[test]
fn a_child_with_an_empty_environment_still_journals_when_open() {
    for mode in ["execve-empty", "execve-null"] {
        let s = Scratch::new(&format!("scrubbed-allowed-{mode}"));
        scrubbed(mode, &Shim::open(&s.journal()), &s).expect_code(0);
        assert_allowed(&s, "a.o");
    }
}

#[test]
fn env_dash_i_does_not_escape_the_lockdown() {
    let s = Scratch::new("env-i-refused");
    let shim = Shim::locked(&s.journal());
    // env itself execvp's the compiler with an empty environment ...
    let mut direct = vec!["-i".to_owned(), "/usr/bin/g++".to_owned()];
    direct.extend(s.compile_argv("direct.o").into_iter().skip(1));
    let ran = shim.run("env", &direct);
    assert_eq!(ran.code, Some(126), "{ran:#?}");
    assert_refused(&s, "direct.o");
    // ... and a shell started by `env -i` inherits the lockdown
    let cmd = format!("/usr/bin/{}", s.compile_sh("via-sh.o"));
    let ran = shim.run("env", &["-i", "/bin/sh", "-c", &cmd]);
    assert_eq!(ran.code, Some(126), "{ran:#?}");
    assert_refused(&s, "via-sh.o");
}

#[test]
fn env_dash_i_still_journals_when_open() {
    let s = Scratch::new("env-i-allowed");
    let cmd = format!("/usr/bin/{}", s.compile_sh("a.o"));
    Shim::open(&s.journal())
        .run("env", &["-i", "/bin/sh", "-c", &cmd])
        .expect_code(0);
    assert_allowed(&s, "a.o");
}

/// What a child started with an empty environment receives.
fn child_env(shim: &Shim) -> Vec<String> {
    let ran = shim.spawner("execve-empty", &["/usr/bin/env", "env"]);
    ran.expect_code(0);
    ran.stdout.lines().map(str::to_owned).collect()
}

#[test]
fn an_empty_environment_gets_the_preload_lockdown_journal_and_settings() {
    let s = Scratch::new("child-env");
    let shim = Shim {
        strict: true,
        ..Shim::locked(&s.journal())
    }
    .with("PRECOMPILE_COMPILERS", "mycc:othercc")
    .with("PRECOMPILE_ALLOW", "ninja");
    let env = child_env(&shim);
    let want = [
        format!("LD_PRELOAD={}", lib().display()),
        "TORCH_PRECOMPILE_NO_COMPILATION=1".to_owned(),
        format!("PRECOMPILE_JOURNAL={}", s.journal().display()),
        "PRECOMPILE_STRICT=1".to_owned(),
        "PRECOMPILE_COMPILERS=mycc:othercc".to_owned(),
        "PRECOMPILE_ALLOW=ninja".to_owned(),
    ];
    for w in &want {
        assert!(env.contains(w), "missing {w} in {env:#?}");
    }
    assert_eq!(env.len(), want.len(), "{env:#?}");
}

#[test]
fn the_shim_goes_first_in_ld_preload_without_duplicates() {
    let s = Scratch::new("preload-order");
    let shim = Shim::open(&s.journal()).with(
        "LD_PRELOAD",
        format!("libm.so.6:{} {}", lib().display(), lib().display()),
    );
    let ran = shim.spawner("execve", &["/usr/bin/env", "env"]);
    ran.expect_code(0);
    assert!(
        ran.has_line(&format!("LD_PRELOAD={}:libm.so.6", lib().display())),
        "{ran:#?}"
    );
}

#[test]
fn a_relative_journal_path_is_handed_on_absolute() {
    let s = Scratch::new("relative-journal");
    let mut shim = Shim::open(&s.journal());
    shim.journal = Some("rel.jsonl".into());
    let mut cmd = shim.command(&helpers().spawner);
    cmd.current_dir(&s.dir)
        .args(["execve-empty", "/usr/bin/env", "env"]);
    let ran = common::Ran::from(cmd.output().unwrap());
    ran.expect_line(&format!(
        "PRECOMPILE_JOURNAL={}",
        s.path("rel.jsonl").display()
    ));
}

// ---- Python -----------------------------------------------------------------

fn py(shim: &Shim, code: &str) -> common::Ran {
    shim.run(python(), &["-c", code])
}

fn subprocess_code(s: &Scratch) -> String {
    format!(
        "import subprocess\n\
         try:\n    print('rc', subprocess.run({:?}).returncode)\n\
         except OSError as e:\n    print('errno', e.errno)\n",
        s.compile_argv("a.o")
    )
}

#[test]
fn python_subprocess_run_is_refused() {
    let s = Scratch::new("py-subprocess-refused");
    let ran = py(&Shim::locked(&s.journal()), &subprocess_code(&s));
    ran.expect_line("errno 1");
    assert_eq!(ran.refusals().len(), 1, "{ran:#?}");
    assert_refused(&s, "a.o");
}

#[test]
fn python_subprocess_run_runs_when_open() {
    let s = Scratch::new("py-subprocess-allowed");
    py(&Shim::open(&s.journal()), &subprocess_code(&s)).expect_line("rc 0");
    assert_allowed(&s, "a.o");
}

#[test]
fn python_os_execve_with_an_empty_env_is_refused() {
    let s = Scratch::new("py-execve-refused");
    let argv = s.compile_argv("a.o");
    let code = format!(
        "import os\ntry:\n    os.execve('/usr/bin/g++', {argv:?}, {{}})\nexcept OSError as e:\n    print('errno', e.errno)\n"
    );
    py(&Shim::locked(&s.journal()), &code).expect_line("errno 1");
    assert_refused(&s, "a.o");
    // a shell exec'd with {} inherits the lockdown and refuses in turn
    let sh = format!("/usr/bin/{}", s.compile_sh("b.o"));
    let code = format!("import os\nos.execve('/bin/sh', ['sh', '-c', {sh:?}], {{}})\n");
    py(&Shim::locked(&s.journal()), &code).expect_code(126);
    assert_refused(&s, "b.o");
}

#[test]
fn python_os_execve_with_an_empty_env_runs_when_open() {
    let s = Scratch::new("py-execve-allowed");
    let sh = format!("/usr/bin/{}", s.compile_sh("a.o"));
    let code = format!("import os\nos.execve('/bin/sh', ['sh', '-c', {sh:?}], {{}})\n");
    py(&Shim::open(&s.journal()), &code).expect_code(0);
    assert_allowed(&s, "a.o");
}

// ---- what is not a compile ---------------------------------------------------

#[test]
fn a_version_probe_is_allowed_under_lockdown_and_journaled() {
    let s = Scratch::new("probe-allowed");
    let ran =
        Shim::locked(&s.journal()).spawner("posix_spawn", &["/usr/bin/g++", "g++", "--version"]);
    ran.expect_line("spawn=0").expect_line("status=0");
    assert!(ran.stdout.contains("g++"), "{ran:#?}");
    let recs = records(&s.journal());
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0]["kind"], "probe");
    assert_eq!(recs[0]["verdict"], "allowed");
    assert_eq!(recs[0]["reason"], "probe-allowed");
}

#[test]
fn a_version_probe_is_refused_under_strict_lockdown() {
    let s = Scratch::new("probe-strict");
    let shim = Shim {
        strict: true,
        ..Shim::locked(&s.journal())
    };
    let ran = shim.spawner("posix_spawn", &["/usr/bin/g++", "g++", "--version"]);
    ran.expect_line("spawn=1");
    let lines = ran.refusals();
    assert_eq!(lines.len(), 1, "{ran:#?}");
    assert!(
        lines[0].contains("compiler probe `g++ --version`"),
        "{}",
        lines[0]
    );
    let recs = records(&s.journal());
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0]["verdict"], "refused");
    assert_eq!(recs[0]["reason"], "strict-probe");
}

#[test]
fn strict_without_lockdown_allows_probes() {
    let s = Scratch::new("probe-strict-open");
    let shim = Shim {
        strict: true,
        ..Shim::open(&s.journal())
    };
    shim.spawner("posix_spawn", &["/usr/bin/g++", "g++", "--version"])
        .expect_line("status=0");
    assert_eq!(records(&s.journal())[0]["verdict"], "allowed");
}

#[test]
fn non_compilers_are_unaffected_under_lockdown() {
    let s = Scratch::new("non-compilers");
    let shim = Shim::locked(&s.journal());
    shim.spawner("posix_spawn", &["/bin/true", "true"])
        .expect_line("status=0");
    shim.spawner("execvp", &["true", "true"]).expect_code(0);
    shim.run("/bin/sh", &["-c", "echo shell-ok"])
        .expect_line("shell-ok");
    let ran = py(
        &shim,
        "import subprocess; print(subprocess.run(['true']).returncode, 6 * 7)",
    );
    ran.expect_line("0 42");
    assert!(ran.stderr.is_empty(), "{ran:#?}");
    assert!(
        records(&s.journal()).is_empty(),
        "non-compilers are not journaled"
    );
}

#[test]
fn an_unconfigured_process_sees_nothing() {
    let shim = Shim {
        preload: true,
        ..Shim::default()
    };
    let ran = shim.spawner("execve", &["/bin/sh", "sh", "-c", "echo hello; true"]);
    ran.expect_code(0).expect_line("hello");
    assert!(ran.stderr.is_empty(), "{ran:#?}");
    // the only trace a child gets is the preload itself
    let env = child_env(&shim);
    assert_eq!(env, vec![format!("LD_PRELOAD={}", lib().display())]);
}

#[test]
fn precompile_log_turns_on_the_shims_log_on_stderr() {
    let shim = Shim {
        preload: true,
        ..Shim::default()
    }
    .with("PRECOMPILE_LOG", "debug");
    let ran = shim.run("/bin/true", &[] as &[&str]);
    ran.expect_code(0);
    assert!(ran.stderr.contains("precompile shim loaded"), "{ran:#?}");
}

// ---- symlinks ------------------------------------------------------------------

#[test]
fn a_compiler_behind_symlinks_is_still_a_compiler() {
    let s = Scratch::new("symlinks");
    // mytool -> hop -> /usr/bin/c++ -> /etc/alternatives/c++ -> /usr/bin/g++ -> g++-12
    std::os::unix::fs::symlink("/usr/bin/c++", s.path("hop")).unwrap();
    std::os::unix::fs::symlink("hop", s.path("mytool")).unwrap();
    let shim = Shim::locked(&s.journal());
    let tool = s.path("mytool").display().to_string();
    let mut args = vec![tool.clone(), "mytool".to_owned()];
    args.extend(s.compile_argv("direct.o").into_iter().skip(1));
    shim.spawner("execve", &args).expect_line("errno=1");
    assert!(!s.path("direct.o").exists());
    // found on PATH by execvp under its innocent name
    let path = format!("{}:/usr/bin:/bin", s.dir.display());
    let mut args = vec!["mytool".to_owned(), "mytool".to_owned()];
    args.extend(s.compile_argv("path.o").into_iter().skip(1));
    shim.clone()
        .with("PATH", path)
        .spawner("execvp", &args)
        .expect_line("errno=1");
    assert!(!s.path("path.o").exists());
    let recs = records(&s.journal());
    assert_eq!(by_tool(&recs, "mytool").len(), 2, "{recs:#?}");
    assert!(recs.iter().all(|r| r["verdict"] == "refused"), "{recs:#?}");
}

#[test]
fn a_missing_compiler_is_not_journaled() {
    let s = Scratch::new("missing");
    let shim = Shim::locked(&s.journal()).with("PATH", "/nonexistent:/usr/bin");
    // a shell's PATH walk tries candidates that do not exist first
    let ran = shim.spawner("execve", &["/bin/sh", "sh", "-c", &s.compile_sh("a.o")]);
    ran.expect_code(126);
    assert_eq!(ran.refusals().len(), 1, "{ran:#?}");
    assert_refused(&s, "a.o");
    let ran = shim.spawner(
        "execvp",
        &["g++-does-not-exist", "g++-does-not-exist", "-c", "x.c"],
    );
    ran.expect_line("errno=2");
    assert_eq!(records(&s.journal()).len(), 1);
}
