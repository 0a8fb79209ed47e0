//! The Python boot: in a Python process the shim puts `<libdir>/boot` first
//! on PYTHONPATH; its sitecustomize boots torch_precompile (without
//! importing torch) and then chains to the sitecustomize it shadows.
//!
//! The installed layout is rebuilt in a scratch directory: a copy of the
//! library with `boot/sitecustomize.py` beside it, a stand-in
//! `torch_precompile._boot`, and a user's own sitecustomize.

mod common;

use std::path::{Path, PathBuf};

use common::{lib, python, Scratch, Shim};

struct Layout {
    s: Scratch,
    lib: PathBuf,
    boot: PathBuf,
}

fn layout(name: &str, boot_py: Option<&str>) -> Layout {
    let s = Scratch::new(name);
    let libdir = s.path("lib/precompile");
    let boot = libdir.join("boot");
    std::fs::create_dir_all(&boot).unwrap();
    let copy = libdir.join("libprecompile.so");
    std::fs::copy(lib(), &copy).unwrap();
    let site = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("boot")
        .join("sitecustomize.py");
    std::fs::copy(site, boot.join("sitecustomize.py")).unwrap();
    if let Some(code) = boot_py {
        let pkg = s.path("pkgs/torch_precompile");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("__init__.py"), "").unwrap();
        std::fs::write(pkg.join("_boot.py"), code).unwrap();
    }
    let user = s.path("user");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("sitecustomize.py"),
        "print('user sitecustomize', flush=True)\n",
    )
    .unwrap();
    let boot = std::fs::canonicalize(boot).unwrap();
    Layout { s, lib: copy, boot }
}

impl Layout {
    fn shim(&self) -> Shim {
        let mut shim = Shim::open(&self.s.journal());
        shim.preload = false;
        let pythonpath = format!(
            "{}:{}",
            self.s.path("pkgs").display(),
            self.s.path("user").display()
        );
        shim.with("LD_PRELOAD", &self.lib)
            .with("PYTHONPATH", pythonpath)
    }
}

const BOOTS: &str = "def boot():\n    print('booted', flush=True)\n";

const SHOW: &str = "import sys, sitecustomize\n\
                    print('path1', sys.path[1])\n\
                    print('torch imported', 'torch' in sys.modules)\n\
                    print('module', sitecustomize.__file__)\n\
                    print('chained', sitecustomize._chained.__file__ if sitecustomize._chained else None)\n";

#[test]
fn python_boots_the_package_then_chains_to_the_users_sitecustomize() {
    let l = layout("boot-chain", Some(BOOTS));
    let ran = l.shim().run(python(), &["-c", SHOW]);
    ran.expect_code(0);
    assert!(ran.stderr.is_empty(), "{ran:#?}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines[0], "booted", "{ran:#?}");
    assert_eq!(lines[1], "user sitecustomize", "{ran:#?}");
    // sys.path[0] is the script directory ('' for -c); PYTHONPATH comes next
    ran.expect_line(&format!("path1 {}", l.boot.display()));
    ran.expect_line("torch imported False");
    ran.expect_line(&format!(
        "module {}",
        l.boot.join("sitecustomize.py").display()
    ));
    ran.expect_line(&format!(
        "chained {}",
        l.s.path("user/sitecustomize.py").display()
    ));
}

#[test]
fn without_the_package_python_starts_quietly_and_still_chains() {
    let l = layout("boot-no-package", None);
    let ran = l.shim().run(python(), &["-c", "print('main ran')"]);
    ran.expect_code(0);
    assert!(ran.stderr.is_empty(), "{ran:#?}");
    assert_eq!(ran.stdout, "user sitecustomize\nmain ran\n");
}

#[test]
fn an_import_error_inside_the_package_is_not_swallowed() {
    let l = layout(
        "boot-broken",
        Some("import precompile_missing_dependency\ndef boot():\n    pass\n"),
    );
    let ran = l.shim().run(python(), &["-c", "print('main ran')"]);
    ran.expect_code(0); // site reports sitecustomize errors and goes on
    assert!(
        ran.stderr.contains("precompile_missing_dependency"),
        "{ran:#?}"
    );
    ran.expect_line("user sitecustomize")
        .expect_line("main ran");
}

#[test]
fn the_boot_directory_is_added_once_across_python_generations() {
    let l = layout("boot-generations", Some(BOOTS));
    let code = "import os, subprocess, sys\n\
                print('child', subprocess.run([sys.executable, '-c', \
                'import os; print(os.environ[\"PYTHONPATH\"])'], capture_output=True, text=True).stdout.splitlines()[-1])\n";
    let ran = l.shim().run(python(), &["-c", code]);
    ran.expect_code(0);
    let child = ran
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("child "))
        .expect("child line");
    let boot = l.boot.display().to_string();
    assert_eq!(
        child.split(':').filter(|e| *e == boot).count(),
        1,
        "{child}"
    );
    assert!(child.starts_with(&boot), "{child}");
}

#[test]
fn a_non_python_process_gets_no_boot_directory() {
    let l = layout("boot-non-python", Some(BOOTS));
    let mut shim = l.shim();
    shim.env.retain(|(k, _)| k != "PYTHONPATH");
    let ran = shim.run("/usr/bin/env", &[] as &[&str]);
    ran.expect_code(0);
    assert!(!ran.stdout.contains("PYTHONPATH"), "{ran:#?}");
}

/// The shim tells a Python process by the file that runs (what
/// /proc/self/exe names, symlinks followed), not by the name it was started
/// under: a `#!` script runs its interpreter, and a symlink's name is not the
/// program's.
#[test]
fn python_is_known_by_the_program_that_runs_not_the_name_it_was_started_by() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let l = layout("boot-names", Some(BOOTS));
    let bin = l.s.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let show = "import sys\nprint('path1', sys.path[1])\n";
    // a script whose interpreter is Python, started by its own path
    let script = bin.join("tool");
    std::fs::write(&script, format!("#!{}\n{show}", python().display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Python reached through a symlink that is not named python
    let alias = bin.join("interp");
    symlink(python(), &alias).unwrap();
    for (program, args) in [(&script, vec![]), (&alias, vec!["-c", show])] {
        let ran = l.shim().run(program, &args);
        ran.expect_code(0);
        ran.expect_line("booted")
            .expect_line(&format!("path1 {}", l.boot.display()));
    }
    // and a program named python* that is not Python gets nothing
    let fake = bin.join("python3-env");
    symlink("/usr/bin/env", &fake).unwrap();
    let mut shim = l.shim();
    shim.env.retain(|(k, _)| k != "PYTHONPATH");
    let ran = shim.run(&fake, &[] as &[&str]);
    ran.expect_code(0);
    assert!(!ran.stdout.contains("PYTHONPATH"), "{ran:#?}");
}
