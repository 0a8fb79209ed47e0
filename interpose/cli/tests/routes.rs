//! Every way we know to start a compiler from inside a locked-down tree,
//! each tried for real (g++, cc1plus, as on a tiny source) under
//! `precompile run --lockdown` (the shim alone) and under
//! `precompile run --lockdown --enforce` (the shim and the kernel filter).
//!
//! Each route states what the shim alone does: `Refused`, or `Escapes`, a
//! limit docs/limits.md lists (a renamed copy, a raw system
//! call, a static program, libc's exec reached through a `dlopen` handle
//! with a cleared environment). An escape is asserted too: if the shim
//! starts catching one, this test fails until the README says so. Under
//! `--enforce` every route must be refused: no output file, and a `refused`
//! journal record whose argv names the output.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The variables the tests control; never inherited from the test runner.
const OURS: &[&str] = &[
    "LD_PRELOAD",
    "TORCH_PRECOMPILE_NO_COMPILATION",
    "PRECOMPILE_JOURNAL",
    "PRECOMPILE_STRICT",
    "PRECOMPILE_COMPILERS",
    "PRECOMPILE_ALLOW",
    "PRECOMPILE_LOG",
    "PYTHONPATH",
    "RANK",
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Shim {
    Refused,
    Escapes,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    ShimOnly,
    Enforced,
}

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("precompile-routes")
}

fn run_cmd(c: &mut Command) -> std::process::Output {
    c.env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{c:?}: {e}"))
}

fn stdout_of(c: &mut Command) -> String {
    let out = run_cmd(c);
    assert!(out.status.success(), "{c:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Programs and paths shared by every route, built once per test binary.
struct Host {
    /// `precompile` with libprecompile.so beside it.
    precompile: PathBuf,
    spawner: PathBuf,
    spawner_static: PathBuf,
    python: PathBuf,
    cc1plus: String,
    loader: &'static str,
}

fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        let dir = tmp().join(format!("host-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let precompile = dir.join("precompile");
        std::fs::copy(env!("CARGO_BIN_EXE_precompile"), &precompile).unwrap();
        let deps = std::env::current_exe().unwrap();
        let lib = [
            deps.with_file_name("libprecompile.so"),
            deps.parent().unwrap().join("../libprecompile.so"),
        ]
        .into_iter()
        .find(|p| p.is_file())
        .expect("libprecompile.so (built as a dev-dependency)");
        std::fs::copy(lib, dir.join("libprecompile.so")).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/helpers/spawner.c");
        let build = |name: &str, extra: &[&str]| {
            let exe = dir.join(name);
            let out = run_cmd(
                Command::new("cc")
                    .args(["-O1", "-Wall", "-Werror", "-pthread"])
                    .args(extra)
                    .arg("-o")
                    .arg(&exe)
                    .arg(&src),
            );
            assert!(
                out.status.success(),
                "cc {name}: {out:?} (a static build needs libc.a: libc6-dev)"
            );
            exe
        };
        let python = stdout_of(Command::new("python3").args([
            "-c",
            "import sys; print(getattr(sys, '_base_executable', sys.executable))",
        ]));
        Host {
            precompile,
            spawner: build("spawner", &[]),
            spawner_static: build("spawner-static", &["-static"]),
            python: PathBuf::from(python),
            cc1plus: stdout_of(Command::new("g++").arg("-print-prog-name=cc1plus")),
            loader: ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
                .into_iter()
                .find(|p| Path::new(p).exists())
                .expect("a dynamic loader"),
        }
    })
}

/// One scratch directory: sources, renamed copies, scripts.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let h = host();
        let dir = tmp().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let s = Scratch { dir };
        std::fs::write(s.p("a.cc"), "int answer() { return 42; }\n").unwrap();
        std::fs::write(s.p("t.s"), ".text\n").unwrap();
        std::fs::copy(&h.cc1plus, s.p("notacompiler")).unwrap();
        std::fs::copy("/usr/bin/as", s.p("notanassembler")).unwrap();
        std::fs::copy(h.loader, s.p("myld")).unwrap();
        std::os::unix::fs::symlink(&h.cc1plus, s.p("innocent")).unwrap();
        // `#` starts a comment for the assembler: each script is its own input
        s.script("as.sh", "#!/usr/bin/as");
        s.script("nested.sh", &format!("#!{}", s.p("as.sh")));
        s.script("renamed.sh", &format!("#!{}", s.p("notanassembler")));
        s
    }

    fn p(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn script(&self, name: &str, first_line: &str) {
        std::fs::write(self.p(name), format!("{first_line}\n.text\n")).unwrap();
        std::fs::set_permissions(self.p(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn journal(&self) -> PathBuf {
        self.dir.join("journal.jsonl")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A route: its name, what the shim alone does, and the command (run under
/// `precompile run`) that tries to write `out`.
struct Route {
    name: &'static str,
    shim: Shim,
    argv: fn(&Scratch, &str) -> Vec<String>,
}

fn sh(cmd: String) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), cmd]
}

fn gxx(s: &Scratch, out: &str) -> String {
    format!("g++ -c {} -o {out}", s.p("a.cc"))
}

fn spawner(mode: &str, rest: &[&str]) -> Vec<String> {
    let mut v = vec![host().spawner.display().to_string(), mode.to_owned()];
    v.extend(rest.iter().map(|s| s.to_string()));
    v
}

fn python(code: String) -> Vec<String> {
    vec![host().python.display().to_string(), "-c".into(), code]
}

/// Python's argv list literal for `g++ -c a.cc -o out`.
fn py_gxx(s: &Scratch, out: &str) -> String {
    format!("['g++', '-c', '{}', '-o', '{out}']", s.p("a.cc"))
}

/// The same as C strings for ctypes, NULL-terminated, and an environment
/// holding only PATH: no LD_PRELOAD, so the compiler runs without the shim.
fn py_c_argv(args: &[&str]) -> String {
    let items: Vec<String> = args.iter().map(|a| format!("b'{a}'")).collect();
    format!(
        "A = ctypes.c_char_p * {n}; argv = A({}, None); \
         envp = (ctypes.c_char_p * 2)(b'PATH=/usr/bin:/bin', None)",
        items.join(", "),
        n = args.len() + 1
    )
}

const ROUTES: &[Route] = &[
    // ---- shells and ordinary tools
    Route {
        name: "sh-g++",
        shim: Shim::Refused,
        argv: |s, o| sh(gxx(s, o)),
    },
    Route {
        name: "sh-cc1plus",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("{} -quiet {} -o {o}", host().cc1plus, s.p("a.cc"))),
    },
    Route {
        name: "sh-as",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("as {} -o {o}", s.p("t.s"))),
    },
    Route {
        name: "sh-in-sh",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("sh -c 'sh -c \"{}\"'", gxx(s, o))),
    },
    Route {
        name: "xargs",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("echo {} | xargs g++ -c -o {o}", s.p("a.cc"))),
    },
    Route {
        name: "find-exec",
        shim: Shim::Refused,
        argv: |s, o| {
            sh(format!(
                "find {} -name a.cc -exec g++ -c {{}} -o {o} ';'",
                s.dir.display()
            ))
        },
    },
    // ---- loosening the environment
    Route {
        name: "env-i",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("env -i PATH=/usr/bin:/bin {}", gxx(s, o))),
    },
    Route {
        name: "env-u-preload",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("env -u LD_PRELOAD {}", gxx(s, o))),
    },
    Route {
        name: "unset-preload",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("unset LD_PRELOAD; {}", gxx(s, o))),
    },
    Route {
        name: "allow-loosened",
        shim: Shim::Refused,
        argv: |s, o| {
            sh(format!(
                "env PRECOMPILE_ALLOW=g++:cc1plus:as:ld:collect2 {}",
                gxx(s, o)
            ))
        },
    },
    Route {
        name: "lockdown-zeroed",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("TORCH_PRECOMPILE_NO_COMPILATION=0 {}", gxx(s, o))),
    },
    // ---- the program under another name or through the loader
    Route {
        name: "symlink",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("{} -quiet {} -o {o}", s.p("innocent"), s.p("a.cc"))),
    },
    Route {
        name: "renamed-cc1plus",
        shim: Shim::Escapes,
        argv: |s, o| {
            sh(format!(
                "{} -quiet {} -o {o}",
                s.p("notacompiler"),
                s.p("a.cc")
            ))
        },
    },
    Route {
        name: "renamed-as",
        shim: Shim::Escapes,
        argv: |s, o| sh(format!("{} {} -o {o}", s.p("notanassembler"), s.p("t.s"))),
    },
    Route {
        name: "loader-cc1plus",
        shim: Shim::Refused,
        argv: |s, o| {
            sh(format!(
                "{} {} -quiet {} -o {o}",
                host().loader,
                host().cc1plus,
                s.p("a.cc")
            ))
        },
    },
    Route {
        name: "loader-as",
        shim: Shim::Refused,
        argv: |s, o| {
            sh(format!(
                "{} /usr/bin/as {} -o {o}",
                host().loader,
                s.p("t.s")
            ))
        },
    },
    Route {
        name: "loader-renamed",
        shim: Shim::Escapes,
        argv: |s, o| {
            sh(format!(
                "{} {} -quiet {} -o {o}",
                host().loader,
                s.p("notacompiler"),
                s.p("a.cc")
            ))
        },
    },
    Route {
        name: "renamed-loader",
        shim: Shim::Escapes,
        argv: |s, o| sh(format!("{} /usr/bin/as {} -o {o}", s.p("myld"), s.p("t.s"))),
    },
    // ---- #! scripts
    Route {
        name: "shebang",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("{} -o {o}", s.p("as.sh"))),
    },
    Route {
        name: "shebang-nested",
        shim: Shim::Refused,
        argv: |s, o| sh(format!("{} -o {o}", s.p("nested.sh"))),
    },
    Route {
        name: "shebang-renamed",
        shim: Shim::Escapes,
        argv: |s, o| sh(format!("{} -o {o}", s.p("renamed.sh"))),
    },
    // ---- every exec entry of libc, from C
    Route {
        name: "execve",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("execve", "/usr/bin/g++", s, o),
    },
    Route {
        name: "execv",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("execv", "/usr/bin/g++", s, o),
    },
    Route {
        name: "execvp",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("execvp", "g++", s, o),
    },
    Route {
        name: "execvpe",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("execvpe", "g++", s, o),
    },
    Route {
        name: "execl",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("execl", "/usr/bin/g++", s, o),
    },
    Route {
        name: "execlp",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("execlp", "g++", s, o),
    },
    Route {
        name: "execle",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("execle", "/usr/bin/g++", s, o),
    },
    Route {
        name: "fexecve",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("fexecve", "/usr/bin/g++", s, o),
    },
    Route {
        name: "execveat",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("execveat", "/usr/bin/g++", s, o),
    },
    Route {
        name: "posix_spawn",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("posix_spawn", "/usr/bin/g++", s, o),
    },
    Route {
        name: "posix_spawnp",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("posix_spawnp", "g++", s, o),
    },
    Route {
        name: "system",
        shim: Shim::Refused,
        argv: |s, o| spawner("system", &[&gxx(s, o)]),
    },
    Route {
        name: "popen",
        shim: Shim::Refused,
        argv: |s, o| spawner("popen", &[&gxx(s, o)]),
    },
    Route {
        name: "fork-exec",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("fork-exec", "/usr/bin/g++", s, o),
    },
    Route {
        name: "vfork-exec",
        shim: Shim::Refused,
        argv: |s, o| exec_mode("vfork-exec", "/usr/bin/g++", s, o),
    },
    Route {
        name: "threads-fork",
        shim: Shim::Refused,
        argv: |s, o| {
            let src = s.p("a.cc");
            spawner(
                "threads-fork",
                &["2", "/usr/bin/g++", "g++", "-c", &src, "-o", o],
            )
        },
    },
    Route {
        name: "threads-spawn",
        shim: Shim::Refused,
        argv: |s, o| {
            let src = s.p("a.cc");
            spawner(
                "threads-spawn",
                &["2", "/usr/bin/g++", "g++", "-c", &src, "-o", o],
            )
        },
    },
    // ---- past libc's exported entries: what a preload cannot see
    Route {
        name: "syscall-execve",
        shim: Shim::Escapes,
        argv: |s, o| cc1plus_mode(&host().spawner, "syscall-execve", s, o),
    },
    Route {
        name: "syscall-execveat",
        shim: Shim::Escapes,
        argv: |s, o| cc1plus_mode(&host().spawner, "syscall-execveat", s, o),
    },
    Route {
        name: "static-execve",
        shim: Shim::Escapes,
        argv: |s, o| cc1plus_mode(&host().spawner_static, "execve", s, o),
    },
    Route {
        name: "static-fexecve",
        shim: Shim::Escapes,
        argv: |s, o| cc1plus_mode(&host().spawner_static, "fexecve", s, o),
    },
    Route {
        name: "static-execveat",
        shim: Shim::Escapes,
        argv: |s, o| cc1plus_mode(&host().spawner_static, "execveat", s, o),
    },
    Route {
        name: "static-posix_spawn",
        shim: Shim::Escapes,
        argv: |s, o| cc1plus_mode(&host().spawner_static, "posix_spawn", s, o),
    },
    // ---- Python
    Route {
        name: "py-subprocess",
        shim: Shim::Refused,
        argv: |s, o| {
            python(format!(
                "import subprocess; subprocess.run({})",
                py_gxx(s, o)
            ))
        },
    },
    Route {
        name: "py-os-execv",
        shim: Shim::Refused,
        argv: |s, o| {
            python(format!(
                "import os\nif os.fork() == 0:\n    os.execv('/usr/bin/g++', {})\nos.wait()",
                py_gxx(s, o)
            ))
        },
    },
    Route {
        name: "py-posix_spawn",
        shim: Shim::Refused,
        argv: |s, o| {
            python(format!(
                "import os; os.waitpid(os.posix_spawn('/usr/bin/g++', {}, {{}}), 0)",
                py_gxx(s, o)
            ))
        },
    },
    Route {
        name: "py-system",
        shim: Shim::Refused,
        argv: |s, o| python(format!("import os; os.system('{}')", gxx(s, o))),
    },
    Route {
        name: "py-ctypes-execve",
        shim: Shim::Escapes,
        argv: |s, o| {
            let src = s.p("a.cc");
            python(format!(
            "import ctypes, os\n{}\nif os.fork() == 0:\n    ctypes.CDLL('libc.so.6').execve(b'/usr/bin/g++', argv, envp)\n    os._exit(1)\nos.wait()",
            py_c_argv(&["g++", "-c", &src, "-o", o])
        ))
        },
    },
    Route {
        name: "py-ctypes-posix_spawn",
        shim: Shim::Escapes,
        argv: |s, o| {
            let src = s.p("a.cc");
            python(format!(
            "import ctypes, os\n{}\npid = ctypes.c_int()\nctypes.CDLL('libc.so.6').posix_spawn(ctypes.byref(pid), b'/usr/bin/g++', None, None, argv, envp)\nos.waitpid(pid.value, 0)",
            py_c_argv(&["g++", "-c", &src, "-o", o])
        ))
        },
    },
    Route {
        name: "py-ctypes-syscall",
        shim: Shim::Escapes,
        argv: |s, o| {
            let src = s.p("a.cc");
            let cc1plus = &host().cc1plus;
            python(format!(
            "import ctypes, os\n{}\nif os.fork() == 0:\n    ctypes.CDLL(None).syscall(ctypes.c_long(59), b'{cc1plus}', argv, envp)\n    os._exit(1)\nos.wait()",
            py_c_argv(&["cc1plus", "-quiet", &src, "-o", o])
        ))
        },
    },
    Route {
        name: "py-proc-self-fd",
        shim: Shim::Escapes,
        argv: |s, o| {
            python(format!(
                "import os\nfd = os.open('{}', os.O_RDONLY)\nif os.fork() == 0:\n    \
                 os.execv(f'/proc/self/fd/{{fd}}', ['cc1plus', '-quiet', '{}', '-o', '{o}'])\nos.wait()",
                s.p("notacompiler"),
                s.p("a.cc")
            ))
        },
    },
];

fn exec_mode(mode: &str, program: &str, s: &Scratch, out: &str) -> Vec<String> {
    let src = s.p("a.cc");
    spawner(mode, &[program, "g++", "-c", &src, "-o", out])
}

/// `cc1plus` itself, started by `helper` in `mode`: what a raw system call
/// or a static program runs is past the shim, and cc1plus starts nothing
/// the shim it loads could refuse.
fn cc1plus_mode(helper: &Path, mode: &str, s: &Scratch, out: &str) -> Vec<String> {
    let src = s.p("a.cc");
    let h = host();
    let mut v = vec![
        helper.display().to_string(),
        mode.to_owned(),
        h.cc1plus.clone(),
    ];
    v.extend(["cc1plus", "-quiet", &src, "-o", out].map(String::from));
    v
}

fn records(journal: &Path) -> Vec<Value> {
    std::fs::read_to_string(journal)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("journal line {l:?}: {e}")))
        .collect()
}

fn names(r: &Value, needle: &str) -> bool {
    r["argv"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(needle)))
}

/// What one route did: whether its output appeared, and the journal's
/// verdicts naming it.
#[derive(Debug)]
struct Outcome {
    produced: bool,
    refused: usize,
    allowed: usize,
    /// Refusals journaled by the supervisor (`source: "enforce"`).
    by_kernel: usize,
    #[allow(dead_code)] // read in the failure message (Debug)
    stderr: String,
}

fn attempt(s: &Scratch, route: &Route, mode: Mode) -> Outcome {
    let out = s.p(&format!("{}-{mode:?}.out", route.name));
    let mut c = Command::new(&host().precompile);
    for v in OURS {
        c.env_remove(v);
    }
    c.arg("run").arg("--lockdown");
    if mode == Mode::Enforced {
        c.arg("--enforce");
    }
    c.arg("--journal").arg(s.journal()).arg("--");
    c.args((route.argv)(s, &out).into_iter().map(OsString::from));
    c.current_dir(&s.dir).stdin(Stdio::null());
    let ran = c.output().unwrap();
    let recs = records(&s.journal());
    let about: Vec<&Value> = recs.iter().filter(|r| names(r, &out)).collect();
    Outcome {
        produced: Path::new(&out).exists(),
        refused: about
            .iter()
            .filter(|r| r["verdict"] == "refused" && r["kind"] == "compile")
            .count(),
        allowed: about.iter().filter(|r| r["verdict"] == "allowed").count(),
        by_kernel: about
            .iter()
            .filter(|r| r["verdict"] == "refused" && r["source"] == "enforce")
            .count(),
        stderr: String::from_utf8_lossy(&ran.stderr).into_owned(),
    }
}

/// Tries `routes` in `mode`; returns a failure line per route that did not
/// do what it should.
fn check(routes: &[Route], mode: Mode) -> Vec<String> {
    let s = Scratch::new(&format!("{}-{mode:?}", routes[0].name));
    let mut bad = Vec::new();
    for route in routes {
        let o = attempt(&s, route, mode);
        let expect_escape = mode == Mode::ShimOnly && route.shim == Shim::Escapes;
        let ok = if expect_escape {
            o.produced && o.refused == 0
        } else {
            // what the shim lets through, the kernel filter must catch
            let caught_by_kernel = route.shim == Shim::Refused || o.by_kernel >= 1;
            !o.produced && o.refused >= 1 && o.allowed == 0 && caught_by_kernel
        };
        if !ok {
            bad.push(format!(
                "{} ({mode:?}, expected {}): {o:?}",
                route.name,
                if expect_escape {
                    "the documented escape"
                } else {
                    "refused"
                }
            ));
        }
    }
    bad
}

fn group(first: &str, last: &str) -> &'static [Route] {
    let i = ROUTES.iter().position(|r| r.name == first).unwrap();
    let j = ROUTES.iter().position(|r| r.name == last).unwrap();
    &ROUTES[i..=j]
}

#[track_caller]
fn assert_all(routes: &[Route], mode: Mode) {
    let bad = check(routes, mode);
    assert!(
        bad.is_empty(),
        "{} of {} routes:\n{}",
        bad.len(),
        routes.len(),
        bad.join("\n")
    );
}

// Groups, so the test harness runs them side by side.

#[test]
fn shell_and_environment_routes_shim_only() {
    assert_all(group("sh-g++", "lockdown-zeroed"), Mode::ShimOnly);
}

#[test]
fn shell_and_environment_routes_enforced() {
    assert_all(group("sh-g++", "lockdown-zeroed"), Mode::Enforced);
}

#[test]
fn renamed_loader_and_script_routes_shim_only() {
    assert_all(group("symlink", "shebang-renamed"), Mode::ShimOnly);
}

#[test]
fn renamed_loader_and_script_routes_enforced() {
    assert_all(group("symlink", "shebang-renamed"), Mode::Enforced);
}

#[test]
fn libc_exec_entries_shim_only() {
    assert_all(group("execve", "threads-spawn"), Mode::ShimOnly);
}

#[test]
fn libc_exec_entries_enforced() {
    assert_all(group("execve", "threads-spawn"), Mode::Enforced);
}

#[test]
fn raw_and_static_routes_shim_only() {
    assert_all(
        group("syscall-execve", "static-posix_spawn"),
        Mode::ShimOnly,
    );
}

#[test]
fn raw_and_static_routes_enforced() {
    assert_all(
        group("syscall-execve", "static-posix_spawn"),
        Mode::Enforced,
    );
}

#[test]
fn python_routes_shim_only() {
    assert_all(group("py-subprocess", "py-proc-self-fd"), Mode::ShimOnly);
}

#[test]
fn python_routes_enforced() {
    assert_all(group("py-subprocess", "py-proc-self-fd"), Mode::Enforced);
}

#[test]
fn the_suite_covers_every_route_once() {
    let mut names: Vec<&str> = ROUTES.iter().map(|r| r.name).collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n, "a route name is repeated");
    let grouped = [
        group("sh-g++", "lockdown-zeroed"),
        group("symlink", "shebang-renamed"),
        group("execve", "threads-spawn"),
        group("syscall-execve", "static-posix_spawn"),
        group("py-subprocess", "py-proc-self-fd"),
    ]
    .iter()
    .map(|g| g.len())
    .sum::<usize>();
    assert_eq!(grouped, n, "a route is outside every group");
}

// ---- the enforced mode's own behaviour

fn precompile(s: &Scratch, args: &[&str]) -> Command {
    let mut c = Command::new(&host().precompile);
    for v in OURS {
        c.env_remove(v);
    }
    c.arg("run")
        .args(args)
        .current_dir(&s.dir)
        .stdin(Stdio::null());
    c
}

#[test]
fn enforced_runs_ordinary_programs_and_keeps_the_exit_status() {
    let s = Scratch::new("enforce-ordinary");
    let journal = s.journal().display().to_string();
    let py = host().python.display().to_string();
    let script = format!(
        "echo ok; {py} -c 'import subprocess; subprocess.run([\"true\"], check=True); print(\"py-ok\")'; \
         g++ --version >/dev/null && echo probe-ok; exit 7"
    );
    let out = precompile(
        &s,
        &["--lockdown", "--enforce", "--journal", &journal, "--"],
    )
    .args(["/bin/sh", "-c", &script])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    for line in ["ok", "py-ok", "probe-ok"] {
        assert!(stdout.lines().any(|l| l == line), "{line}: {out:?}");
    }
    assert!(
        records(&s.journal())
            .iter()
            .all(|r| r["verdict"] == "allowed"),
        "{:?}",
        records(&s.journal())
    );
}

#[test]
fn strict_refuses_probes_the_shim_cannot_see() {
    let s = Scratch::new("enforce-strict");
    let journal = s.journal().display().to_string();
    let out = precompile(
        &s,
        &[
            "--lockdown",
            "--enforce",
            "--strict",
            "--journal",
            &journal,
            "--",
        ],
    )
    .arg(&host().spawner)
    .args(["syscall-execve", "/usr/bin/g++", "g++", "--version"])
    .env("RANK", "5") // a torchrun worker's: the supervisor reads it off the process
    .output()
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "errno=1",
        "{out:?}"
    );
    let recs = records(&s.journal());
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["kind"], "probe");
    assert_eq!(recs[0]["reason"], "strict-probe");
    assert_eq!(recs[0]["source"], "enforce");
    assert_eq!(recs[0]["rank"], 5, "{recs:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("precompile: refused to run compiler probe `g++ --version`"),
        "{stderr}"
    );
}

#[test]
fn enforce_without_lockdown_is_a_usage_error() {
    let s = Scratch::new("enforce-usage");
    let out = precompile(&s, &["--enforce", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--enforce"),
        "{out:?}"
    );
}

#[test]
fn the_supervisor_passes_sigterm_to_the_command() {
    use std::io::{BufRead, BufReader};
    let s = Scratch::new("enforce-signal");
    let mut child = precompile(&s, &["--lockdown", "--enforce", "--"])
        .args([
            "/bin/sh",
            "-c",
            "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    // to the supervisor, as a service manager would
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(lines.next().unwrap().unwrap(), "got-term");
    assert_eq!(child.wait().unwrap().code(), Some(3));
}

#[test]
fn the_entrypoint_enforces_with_precompile_enforce() {
    let s = Scratch::new("enforce-entrypoint");
    let entrypoint = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/entrypoint");
    let out_path = s.p("entry.out");
    let src = s.p("a.cc");
    let bin_dir = host().precompile.parent().unwrap().display().to_string();
    let mut c = Command::new("/bin/sh");
    for v in OURS {
        c.env_remove(v);
    }
    let out = c
        .arg(&entrypoint)
        .arg(&host().spawner)
        .args([
            "syscall-execve",
            &host().cc1plus,
            "cc1plus",
            "-quiet",
            &src,
            "-o",
            &out_path,
        ])
        .env("PRECOMPILE_ENFORCE", "1")
        .env("PRECOMPILE_JOURNAL", s.journal())
        .env("PATH", format!("{bin_dir}:/usr/bin:/bin"))
        .current_dir(&s.dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!Path::new(&out_path).exists(), "{out:?}");
    let recs = records(&s.journal());
    assert!(
        recs.iter()
            .any(|r| names(r, &out_path) && r["verdict"] == "refused" && r["source"] == "enforce"),
        "{recs:?} {out:?}"
    );
    // without the precompile command the entrypoint says what is missing: a copy
    // outside the checkout, whose ../.venv/bin holds none either
    let lone = s.p("lone/scripts/entrypoint");
    std::fs::create_dir_all(Path::new(&lone).parent().unwrap()).unwrap();
    std::fs::copy(&entrypoint, &lone).unwrap();
    let mut c = Command::new("/bin/sh");
    let out = c
        .arg(&lone)
        .arg("true")
        .env("PRECOMPILE_ENFORCE", "1")
        .env("PATH", "/usr/bin:/bin")
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("PRECOMPILE_ENFORCE=1 needs the precompile command"),
        "{out:?}"
    );
}

#[test]
fn enforced_needs_no_privileges() {
    let s = Scratch::new("enforce-unprivileged");
    // an unprivileged user must write its journal here
    std::fs::set_permissions(&s.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let root = stdout_of(Command::new("id").arg("-u")) == "0";
    let mut c = if root {
        // as nobody, without capabilities: no CAP_SYS_ADMIN for the filter,
        // no CAP_SYS_PTRACE for reading the tree's memory
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&host().precompile);
        c
    } else {
        Command::new(&host().precompile)
    };
    for v in OURS {
        c.env_remove(v);
    }
    let out_path = s.p("unprivileged.out");
    let journal = s.journal().display().to_string();
    let script = format!(
        "{} -quiet {} -o {out_path}; echo ran",
        s.p("notacompiler"),
        s.p("a.cc")
    );
    let out = c
        .args([
            "run",
            "--lockdown",
            "--enforce",
            "--journal",
            &journal,
            "--",
        ])
        .args(["/bin/sh", "-c", &script])
        .current_dir(&s.dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == "ran"),
        "{out:?}"
    );
    assert!(!Path::new(&out_path).exists(), "{out:?}");
    let recs = records(&s.journal());
    assert!(
        recs.iter()
            .any(|r| names(r, &out_path) && r["verdict"] == "refused" && r["source"] == "enforce"),
        "{recs:?} {out:?}"
    );
}

#[test]
fn the_32_bit_exec_entry_escapes_the_shim_and_is_refused_by_the_filter() {
    let s = Scratch::new("enforce-int80");
    let src = s.p("a.cc");
    let run = |mode: Mode, out: &str| {
        let mut args = vec!["--lockdown"];
        if mode == Mode::Enforced {
            args.push("--enforce");
        }
        args.push("--");
        let ran = precompile(&s, &args)
            .arg(&host().spawner)
            .args([
                "int80-execve",
                &host().cc1plus,
                "cc1plus",
                "-quiet",
                &src,
                "-o",
                out,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&ran.stdout).trim().to_owned()
    };
    let shim_out = s.p("int80-shim.out");
    let said = run(Mode::ShimOnly, &shim_out);
    if said == format!("errno={}", 38) {
        eprintln!("skipped: this kernel has no 32-bit system call entry (ENOSYS)");
        return;
    }
    assert!(Path::new(&shim_out).exists(), "the shim alone: {said}");
    let enforced_out = s.p("int80-enforced.out");
    // refused by the filter itself (no supervisor, so no journal record)
    assert_eq!(run(Mode::Enforced, &enforced_out), "errno=1");
    assert!(!Path::new(&enforced_out).exists());
}

#[test]
fn enforced_commands_that_cannot_start_exit_as_a_shell_would() {
    let s = Scratch::new("enforce-cannot-start");
    let out = precompile(&s, &["--lockdown", "--enforce", "--", "/nonexistent/cmd"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    // the command itself a compiler: refused at its own exec
    let out_path = s.p("direct.out");
    let src = s.p("a.cc");
    let out = precompile(&s, &["--lockdown", "--enforce", "--"])
        .args([
            s.p("notacompiler").as_str(),
            "-quiet",
            &src,
            "-o",
            &out_path,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{out:?}");
    assert!(!Path::new(&out_path).exists());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is a copy of"), "{stderr}");
}

#[test]
fn enforce_inside_an_enforced_tree_fails_at_start_and_says_why() {
    let s = Scratch::new("enforce-nested");
    let inner = host().precompile.display().to_string();
    let out = precompile(&s, &["--lockdown", "--enforce", "--"])
        .args([
            inner.as_str(),
            "run",
            "--lockdown",
            "--enforce",
            "--",
            "/bin/echo",
            "inner",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).is_empty(),
        "ran anyway: {out:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("already runs under a seccomp filter")
            && stderr.contains("run without --enforce"),
        "{stderr}"
    );
}
