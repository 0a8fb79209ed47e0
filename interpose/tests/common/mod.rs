//! Shared fixtures for the shim's integration tests: real processes, no mocks.
//!
//! - The library under test is the `libprecompile.so` cargo built for this
//!   very test run (`target/<profile>/deps/`, next to the test executable);
//!   `PRECOMPILE_TEST_LIB` overrides it.
//! - C helper programs (`tests/helpers/*.c`) are compiled with `cc` at test
//!   time into `CARGO_TARGET_TMPDIR`, without the shim.
//! - Each test gets a fresh scratch directory and a tiny C++ source to
//!   compile with `g++`, and runs its processes with a clean environment
//!   (no inherited precompile variables) plus exactly the settings it asks for.
//!
//! Not covered by these tests, because an LD_PRELOAD shim cannot see them:
//! statically linked executables, direct system calls (`syscall(SYS_execve)`,
//! Go's runtime, io_uring), setuid/setgid programs (the loader drops
//! LD_PRELOAD for them), and a process that clears LD_PRELOAD and then execs
//! through one of those paths.
//! `interpose/cli/tests/routes.rs` tries those routes for real, under the
//! shim alone and under `precompile run --enforce`, which covers them.
#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The variables the tests control; never inherited from the test runner.
const OURS: &[&str] = &[
    "LD_PRELOAD",
    "TORCH_PRECOMPILE_NO_COMPILATION",
    "PRECOMPILE_JOURNAL",
    "PRECOMPILE_STRICT",
    "RANK",
    "PRECOMPILE_COMPILERS",
    "PRECOMPILE_ALLOW",
    "PRECOMPILE_LOG",
    "PYTHONPATH",
];

/// The shim under test.
pub fn lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        if let Some(p) = std::env::var_os("PRECOMPILE_TEST_LIB") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("test executable path");
        let deps = exe.parent().expect("deps dir");
        let candidates = [
            deps.join("libprecompile.so"),
            deps.join("..").join("libprecompile.so"),
            deps.join("..").join("..").join("release").join("libprecompile.so"),
        ];
        let found = candidates.iter().find(|p| p.is_file()).unwrap_or_else(|| {
            panic!(
                "libprecompile.so not found (looked at {candidates:?}); run `cargo test -p interpose` \
                 (which builds it) or set PRECOMPILE_TEST_LIB"
            )
        });
        std::fs::canonicalize(found).expect("canonical library path")
    })
}

fn tmp_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("precompile-interpose")
}

/// The compiled C helpers: `spawner` and `abi`.
pub struct Helpers {
    pub spawner: PathBuf,
    pub abi: PathBuf,
}

pub fn helpers() -> &'static Helpers {
    static HELPERS: OnceLock<Helpers> = OnceLock::new();
    HELPERS.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join("helpers");
        let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
        let out = tmp_root().join("helpers");
        std::fs::create_dir_all(&out).unwrap();
        let build = |name: &str, link_shim: bool| {
            // built under a private name, then renamed into place: another
            // test binary may be using the previous build right now
            let exe = out.join(name);
            let tmp = out.join(format!("{name}.{}.tmp", std::process::id()));
            let mut cc = Command::new("cc");
            cc.args(["-O1", "-Wall", "-Werror", "-pthread", "-o"])
                .arg(&tmp)
                .arg("-I")
                .arg(&include)
                .arg(src.join(format!("{name}.c")));
            if link_shim {
                // linked against the shim, as a C user of precompile.h would be.
                // DT_RPATH, not RUNPATH: searched before LD_LIBRARY_PATH, which
                // `cargo test` points at target/*/deps and target/* (where
                // another build of the library may sit: a second copy loaded
                // beside the preloaded one would hook every exec twice).
                let dir = lib().parent().unwrap();
                cc.arg("-L")
                    .arg(dir)
                    .arg("-lprecompile")
                    .arg("-Wl,--disable-new-dtags")
                    .arg(format!("-Wl,-rpath,{}", dir.display()));
            }
            let status = cc
                .arg("-ldl")
                .env_remove("LD_PRELOAD")
                .status()
                .expect("run cc (a C compiler is needed to build the test helpers)");
            assert!(status.success(), "building helper {name} failed");
            std::fs::rename(&tmp, &exe).unwrap();
            exe
        };
        Helpers {
            spawner: build("spawner", false),
            abi: build("abi", true),
        }
    })
}

/// The real Python interpreter: not a wrapper script (pyenv shims), and
/// outside any virtual environment, so that an installed torch_precompile
/// cannot change what the boot tests see.
pub fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        if let Some(p) = std::env::var_os("PRECOMPILE_TEST_PYTHON") {
            return PathBuf::from(p);
        }
        let out = Command::new("python3")
            .args([
                "-c",
                "import sys; print(getattr(sys, '_base_executable', sys.executable))",
            ])
            .env_remove("LD_PRELOAD")
            .output()
            .expect("python3 is needed for the Python tests (or set PRECOMPILE_TEST_PYTHON)");
        assert!(out.status.success());
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// A fresh directory for one test, holding a C++ source file `a.cc`.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = tmp_root().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.cc"), "int answer() { return 42; }\n").unwrap();
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn src(&self) -> String {
        self.path("a.cc").display().to_string()
    }

    /// `g++ -c a.cc -o <out>` as argv.
    pub fn compile_argv(&self, out: &str) -> Vec<String> {
        vec![
            "g++".into(),
            "-c".into(),
            self.src(),
            "-o".into(),
            self.path(out).display().to_string(),
        ]
    }

    /// The same as one shell command line.
    pub fn compile_sh(&self, out: &str) -> String {
        self.compile_argv(out).join(" ")
    }

    pub fn journal(&self) -> PathBuf {
        self.path("journal.jsonl")
    }
}

impl Drop for Scratch {
    /// Kept after a failure, for a look at the journal and outputs.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// How a test process is started: which of the shim's settings it gets.
#[derive(Clone, Default)]
pub struct Shim {
    pub preload: bool,
    pub lockdown: bool,
    pub strict: bool,
    pub journal: Option<PathBuf>,
    pub env: Vec<(String, OsString)>,
}

impl Shim {
    /// Preloaded, not locked, journaling to `journal`.
    pub fn open(journal: &Path) -> Shim {
        Shim {
            preload: true,
            journal: Some(journal.to_path_buf()),
            ..Shim::default()
        }
    }

    /// Preloaded, locked down at start, journaling to `journal`.
    pub fn locked(journal: &Path) -> Shim {
        Shim {
            lockdown: true,
            ..Shim::open(journal)
        }
    }

    pub fn with(mut self, name: &str, value: impl Into<OsString>) -> Shim {
        self.env.push((name.to_owned(), value.into()));
        self
    }

    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        for v in OURS {
            c.env_remove(v);
        }
        if self.preload {
            c.env("LD_PRELOAD", lib());
        }
        if self.lockdown {
            c.env("TORCH_PRECOMPILE_NO_COMPILATION", "1");
        }
        if self.strict {
            c.env("PRECOMPILE_STRICT", "1");
        }
        if let Some(j) = &self.journal {
            c.env("PRECOMPILE_JOURNAL", j);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::null());
        c
    }

    /// Runs `program args...` to completion.
    pub fn run<S: AsRef<std::ffi::OsStr>>(
        &self,
        program: impl AsRef<std::ffi::OsStr>,
        args: &[S],
    ) -> Ran {
        Ran::from(
            self.command(program)
                .args(args)
                .output()
                .expect("spawn test process"),
        )
    }

    /// Runs the spawner helper in `mode` with `args`.
    pub fn spawner<S: AsRef<std::ffi::OsStr>>(&self, mode: &str, args: &[S]) -> Ran {
        let mut all: Vec<OsString> = vec![mode.into()];
        all.extend(args.iter().map(|a| a.as_ref().to_owned()));
        self.run(&helpers().spawner, &all)
    }
}

/// A finished process.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Ran {
    fn from(o: Output) -> Ran {
        Ran {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Ran {
    pub fn has_line(&self, line: &str) -> bool {
        self.stdout.lines().any(|l| l.trim() == line)
    }

    #[track_caller]
    pub fn expect_line(&self, line: &str) -> &Ran {
        assert!(
            self.has_line(line),
            "expected stdout line `{line}`\n{self:#?}"
        );
        self
    }

    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Ran {
        assert_eq!(self.code, Some(code), "unexpected exit status\n{self:#?}");
        self
    }

    /// The shim's refusal lines on stderr.
    pub fn refusals(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("precompile: refused to run"))
            .collect()
    }
}

/// Every line of the journal, each required to be a whole JSON record.
#[track_caller]
pub fn records(journal: &Path) -> Vec<Value> {
    let text = match std::fs::read_to_string(journal) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("read {}: {e}", journal.display()),
    };
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("journal line {} is not JSON ({e}): {line:?}", i + 1));
            for key in [
                "time", "pid", "ppid", "tid", "exe", "argv", "cwd", "kind", "verdict", "reason",
                "source",
            ] {
                assert!(
                    v.get(key).is_some(),
                    "journal line {} lacks `{key}`: {line}",
                    i + 1
                );
            }
            v
        })
        .collect()
}

/// The records whose executable's file name is `tool`.
pub fn by_tool<'a>(records: &'a [Value], tool: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| {
            let exe = r["exe"].as_str().unwrap_or("");
            Path::new(exe).file_name().and_then(|n| n.to_str()) == Some(tool)
        })
        .collect()
}

fn argv_has(r: &Value, needle: &str) -> bool {
    r["argv"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(needle)))
}

/// Asserts the journal holds exactly one refused compile of `out` (the
/// argv names it) and no allowed one, and the file was not produced.
#[track_caller]
pub fn assert_refused(s: &Scratch, out: &str) {
    let out_path = s.path(out).display().to_string();
    assert!(!s.path(out).exists(), "{out} was produced under lockdown");
    let recs = records(&s.journal());
    let about: Vec<&Value> = recs.iter().filter(|r| argv_has(r, &out_path)).collect();
    assert_eq!(
        about.len(),
        1,
        "expected one record for {out}, got {about:#?}"
    );
    let r = about[0];
    assert_eq!(r["verdict"], "refused", "{r}");
    assert_eq!(r["kind"], "compile", "{r}");
    assert_eq!(r["source"], "shim", "{r}");
}

/// Asserts the compile of `out` ran: the file exists and the journal holds
/// an allowed compile record naming it (and the compiler's own children,
/// cc1plus/as, were journaled too: the journal reached them).
#[track_caller]
pub fn assert_allowed(s: &Scratch, out: &str) {
    let out_path = s.path(out).display().to_string();
    assert!(s.path(out).exists(), "{out} was not produced");
    let recs = records(&s.journal());
    let about: Vec<&Value> = recs.iter().filter(|r| argv_has(r, &out_path)).collect();
    assert!(!about.is_empty(), "no record for {out}: {recs:#?}");
    for r in &about {
        assert_eq!(r["verdict"], "allowed", "{r}");
        assert_eq!(r["reason"], "unlocked", "{r}");
    }
    let drivers = about
        .iter()
        .filter(|r| r["argv"][0].as_str().is_some_and(|a| a.ends_with("g++")))
        .count();
    assert_eq!(drivers, 1, "expected one g++ record for {out}: {about:#?}");
    assert!(
        !by_tool(&recs, "cc1plus").is_empty(),
        "g++'s own child cc1plus was not journaled: {recs:#?}"
    );
}
