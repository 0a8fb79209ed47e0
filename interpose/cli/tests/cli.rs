//! The `precompile` command line, run as a real process from an installed
//! layout rebuilt in a scratch directory (bin/precompile and
//! lib/precompile/libprecompile.so).

use std::path::PathBuf;
use std::process::{Command, Output};

const OURS: &[&str] = &[
    "LD_PRELOAD",
    "TORCH_PRECOMPILE_NO_COMPILATION",
    "PRECOMPILE_JOURNAL",
    "PRECOMPILE_STRICT",
    "PRECOMPILE_COMPILERS",
    "PRECOMPILE_ALLOW",
    "PRECOMPILE_LOG",
];

/// The shim cargo built for this test run (a dev-dependency).
fn built_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [
        deps.join("libprecompile.so"),
        deps.join("../libprecompile.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("libprecompile.so next to the test binary (cargo builds it as a dev-dependency)")
}

struct Install {
    root: PathBuf,
}

impl Install {
    /// `layout`: "installed" (bin/ + lib/precompile/), "flat" (lib beside the
    /// binary, like target/release) or "none" (no library).
    fn new(name: &str, layout: &str) -> Install {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("precompile-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::copy(
            env!("CARGO_BIN_EXE_precompile"),
            root.join("bin/precompile"),
        )
        .unwrap();
        match layout {
            "installed" => {
                std::fs::create_dir_all(root.join("lib/precompile")).unwrap();
                std::fs::copy(built_lib(), root.join("lib/precompile/libprecompile.so")).unwrap();
            }
            "flat" => {
                std::fs::copy(built_lib(), root.join("bin/libprecompile.so")).unwrap();
            }
            _ => {}
        }
        std::fs::write(root.join("a.cc"), "int f() { return 1; }\n").unwrap();
        Install { root }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p)
    }

    fn lib(&self) -> PathBuf {
        std::fs::canonicalize(self.path("lib/precompile/libprecompile.so")).unwrap()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.path("bin/precompile"));
        for v in OURS {
            c.env_remove(v);
        }
        c.args(args).current_dir(&self.root);
        c
    }

    fn run(&self, args: &[&str]) -> Out {
        Out(output(&mut self.cmd(args)))
    }
}

/// Runs `c`, retrying while the kernel answers ETXTBSY: another test thread that
/// forks while this test's copy of the binary is still open for writing holds
/// that fd until its child execs, and exec of a file open for writing fails.
fn output(c: &mut Command) -> Output {
    for _ in 0..100 {
        match c.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            r => return r.unwrap(),
        }
    }
    c.output().unwrap()
}

impl Drop for Install {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

struct Out(Output);

impl Out {
    fn code(&self) -> i32 {
        self.0.status.code().unwrap_or(-1)
    }
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    #[track_caller]
    fn one_error_line(&self, code: i32, needle: &str) {
        assert_eq!(
            self.code(),
            code,
            "stdout {} stderr {}",
            self.stdout(),
            self.stderr()
        );
        let err = self.stderr();
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.starts_with("precompile: ") && err.contains(needle),
            "{err}"
        );
    }
}

#[test]
fn preload_path_finds_the_installed_layout() {
    let i = Install::new("pp-installed", "installed");
    let out = i.run(&["preload-path"]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    assert_eq!(out.stdout().trim(), i.lib().display().to_string());
}

#[test]
fn preload_path_finds_the_target_dir_layout() {
    let i = Install::new("pp-flat", "flat");
    let out = i.run(&["preload-path"]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    let want = std::fs::canonicalize(i.path("bin/libprecompile.so")).unwrap();
    assert_eq!(out.stdout().trim(), want.display().to_string());
}

#[test]
fn preload_path_without_a_library_is_one_clear_error() {
    let i = Install::new("pp-none", "none");
    i.run(&["preload-path"])
        .one_error_line(1, "cannot find libprecompile.so");
}

#[test]
fn run_locks_the_command_down_and_journals() {
    let i = Install::new("run-locked", "installed");
    let compile = format!(
        "g++ -c {} -o {}",
        i.path("a.cc").display(),
        i.path("a.o").display()
    );
    let out = i.run(&[
        "run",
        "--lockdown",
        "--journal",
        "j.jsonl",
        "--",
        "sh",
        "-c",
        &compile,
    ]);
    assert_eq!(out.code(), 126, "{}", out.stderr());
    assert!(
        out.stderr()
            .contains("precompile: refused to run compiler `g++ -c"),
        "{}",
        out.stderr()
    );
    assert!(!i.path("a.o").exists());
    let journal = std::fs::read_to_string(i.path("j.jsonl")).unwrap();
    let r: serde_json::Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
    assert_eq!(r["verdict"], "refused");

    let summary = i.run(&["journal", "j.jsonl"]);
    assert_eq!(summary.code(), 0);
    let text = summary.stdout();
    assert!(text.contains("1 record, 0 unreadable lines"), "{text}");
    assert!(text.contains("refused 1"), "{text}");
    assert!(text.contains(&compile), "{text}");
}

#[test]
fn run_without_lockdown_lets_the_compile_run() {
    let i = Install::new("run-open", "installed");
    let compile = format!(
        "g++ -c {} -o {}",
        i.path("a.cc").display(),
        i.path("a.o").display()
    );
    let out = i.run(&["run", "--journal=j.jsonl", "sh", "-c", &compile]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    assert!(i.path("a.o").exists());
    let summary = i.run(&["journal", "--json", "j.jsonl"]);
    let v: serde_json::Value = serde_json::from_str(&summary.stdout()).unwrap();
    assert_eq!(v["by_tool"]["g++"]["allowed"], 1, "{v}");
    assert_eq!(v["by_verdict"].get("refused"), None, "{v}");
}

#[test]
fn run_sets_the_environment_and_keeps_other_preloads() {
    let i = Install::new("run-env", "installed");
    let out = Out(output(
        i.cmd(&[
            "run",
            "--lockdown",
            "--strict",
            "--journal",
            "j.jsonl",
            "--",
            "env",
        ])
        .env("LD_PRELOAD", "libm.so.6"),
    ));
    assert_eq!(out.code(), 0, "{}", out.stderr());
    let env = out.stdout();
    for want in [
        format!("LD_PRELOAD={}:libm.so.6", i.lib().display()),
        "TORCH_PRECOMPILE_NO_COMPILATION=1".to_owned(),
        "PRECOMPILE_STRICT=1".to_owned(),
        format!(
            "PRECOMPILE_JOURNAL={}",
            std::fs::canonicalize(&i.root)
                .unwrap()
                .join("j.jsonl")
                .display()
        ),
    ] {
        assert!(env.lines().any(|l| l == want), "missing {want} in\n{env}");
    }
}

#[test]
fn run_exits_with_the_commands_status() {
    let i = Install::new("run-status", "installed");
    assert_eq!(i.run(&["run", "--", "sh", "-c", "exit 7"]).code(), 7);
}

#[test]
fn run_errors_are_one_line() {
    let i = Install::new("run-errors", "installed");
    i.run(&["run"]).one_error_line(2, "missing command");
    i.run(&["run", "--lockdown", "--"])
        .one_error_line(2, "missing command");
    i.run(&["run", "--bogus", "x"])
        .one_error_line(2, "unknown option `--bogus`");
    i.run(&["run", "--", "precompile-no-such-command"])
        .one_error_line(127, "cannot run `precompile-no-such-command`");
}

#[test]
fn journal_counts_torn_lines_and_garbage() {
    let i = Install::new("journal-torn", "installed");
    let good = r#"{"time": 1.0, "pid": 5, "ppid": 1, "tid": 5, "exe": "/usr/bin/nvcc", "argv": ["nvcc", "-c", "k.cu"], "cwd": "/", "kind": "compile", "verdict": "refused", "reason": "serving", "source": "shim"}"#;
    std::fs::write(
        i.path("j.jsonl"),
        format!("{good}\n{}\nnot json\n{good}\n", &good[..50]),
    )
    .unwrap();
    let out = i.run(&["journal", "j.jsonl"]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    let text = out.stdout();
    assert!(text.contains("2 records, 2 unreadable lines"), "{text}");
    assert!(text.contains("nvcc"), "{text}");
    assert!(text.contains("unreadable lines: 2, 3"), "{text}");
}

#[test]
fn journal_errors_are_one_line() {
    let i = Install::new("journal-errors", "installed");
    i.run(&["journal", "missing.jsonl"])
        .one_error_line(1, "cannot read journal missing.jsonl");
    i.run(&["journal"]).one_error_line(2, "missing PATH");
}

#[test]
fn every_verb_has_help() {
    let i = Install::new("help", "installed");
    for args in [
        &["--help"][..],
        &["help"],
        &["run", "--help"],
        &["preload-path", "--help"],
        &["journal", "--help"],
    ] {
        let out = i.run(args);
        assert_eq!(out.code(), 0, "{args:?}");
        assert!(
            out.stdout().contains("usage: precompile"),
            "{args:?}: {}",
            out.stdout()
        );
    }
    i.run(&[]).one_error_line(2, "missing verb");
    i.run(&["frobnicate"])
        .one_error_line(2, "unknown verb `frobnicate`");
}

#[test]
fn the_cli_does_not_link_the_shim() {
    let out = Command::new("nm")
        .arg("-D")
        .arg(env!("CARGO_BIN_EXE_precompile"))
        .output()
        .expect("nm");
    let syms = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        !syms.contains("precompile_lockdown_enter"),
        "the CLI carries the shim's ABI"
    );
    assert!(
        !syms.lines().any(|l| l.ends_with(" T execve")),
        "the CLI defines execve"
    );
    let ldd = Command::new("ldd")
        .arg(env!("CARGO_BIN_EXE_precompile"))
        .output()
        .expect("ldd");
    assert!(!String::from_utf8_lossy(&ldd.stdout).contains("libprecompile"));
}
