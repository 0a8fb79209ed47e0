use super::*;
use std::collections::BTreeSet;

fn listing(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn fail_at(step: Step) -> impl FnMut(Step, &Path) -> io::Result<()> {
    move |s, _| {
        if s == step {
            Err(io::Error::other(format!("injected failure at {s:?}")))
        } else {
            Ok(())
        }
    }
}

#[test]
fn creates_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.cache");
    write_atomic(&path, b"hello").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"hello");
    assert_eq!(listing(dir.path()), BTreeSet::from(["m.cache".to_string()]));
}

#[test]
fn replaces_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.py");
    fs::write(&path, b"old old old").unwrap();
    write_atomic(&path, b"new").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"new");
    assert_eq!(listing(dir.path()).len(), 1);
}

#[test]
fn bare_file_name_writes_in_the_current_directory_form() {
    // split() maps "name" to ("." , "name"); checked without changing the cwd.
    let (dir, name) = split(Path::new("m.cache")).unwrap();
    assert_eq!(dir, PathBuf::from("."));
    assert_eq!(name, "m.cache");
}

#[test]
fn failure_before_rename_leaves_old_file_and_no_temp() {
    for step in [Step::Create, Step::Write, Step::Sync, Step::Rename] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.cache");
        fs::write(&path, b"old").unwrap();
        let err = write_atomic_with(&path, b"new", &mut fail_at(step)).unwrap_err();
        assert!(err.to_string().contains("injected"), "{step:?}: {err}");
        assert_eq!(fs::read(&path).unwrap(), b"old", "{step:?}");
        assert_eq!(
            listing(dir.path()),
            BTreeSet::from(["m.cache".to_string()]),
            "{step:?}"
        );
    }
}

#[test]
fn failure_at_directory_fsync_reports_error_with_new_content_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.cache");
    fs::write(&path, b"old").unwrap();
    assert!(write_atomic_with(&path, b"new", &mut fail_at(Step::SyncDir)).is_err());
    assert_eq!(fs::read(&path).unwrap(), b"new");
    assert_eq!(listing(dir.path()).len(), 1);
}

#[test]
fn real_rename_failure_removes_the_temp_and_keeps_what_was_there() {
    // A non-empty directory at the target: the rename itself fails (EISDIR),
    // after the temp was written and fsynced. Works as root too, unlike a
    // read-only directory.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.cache");
    fs::create_dir(&path).unwrap();
    fs::write(path.join("keep"), b"x").unwrap();
    let err = write_atomic(&path, b"new").unwrap_err();
    assert!(
        err.to_string().contains("renaming the temp file over"),
        "{err}"
    );
    assert_eq!(listing(dir.path()), BTreeSet::from(["m.cache".to_string()]));
    assert_eq!(fs::read(path.join("keep")).unwrap(), b"x");
}

#[test]
fn missing_directory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/m.cache");
    let err = write_atomic(&path, b"x").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert!(err.to_string().contains("no/such/dir"), "{err}");
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn path_without_file_name_is_invalid_input() {
    for p in ["/", "..", "a/.."] {
        let err = write_atomic(Path::new(p), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{p}");
    }
}

#[test]
fn longest_file_name_still_gets_a_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n".repeat(255));
    write_atomic(&path, b"x").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"x");
    assert_eq!(listing(dir.path()).len(), 1);
}

#[test]
fn stale_temp_with_the_same_name_is_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.cache");
    // Plant the next few temp names this process would pick.
    let next = TEMP_COUNTER.load(Ordering::Relaxed);
    let pid = std::process::id();
    for n in next..next + 4 {
        fs::write(dir.path().join(format!(".m.cache.{pid}.{n}.tmp")), b"stale").unwrap();
    }
    write_atomic(&path, b"fresh").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"fresh");
    // Stale files are left alone (they may belong to someone), none overwritten.
    for entry in fs::read_dir(dir.path()).unwrap() {
        let p = entry.unwrap().path();
        if p != path {
            assert_eq!(fs::read(&p).unwrap(), b"stale", "{}", p.display());
        }
    }
}

#[test]
fn concurrent_writers_leave_one_complete_version_and_no_temps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.cache");
    let contents: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 64 * 1024]).collect();
    std::thread::scope(|s| {
        for c in &contents {
            let path = &path;
            s.spawn(move || {
                for _ in 0..5 {
                    write_atomic(path, c).unwrap();
                }
            });
        }
    });
    let got = fs::read(&path).unwrap();
    assert!(contents.contains(&got));
    assert_eq!(listing(dir.path()).len(), 1);
}

#[test]
fn pair_writes_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let (code, cache) = (dir.path().join("m.py"), dir.path().join("m.cache"));
    fs::write(&code, b"old code").unwrap();
    write_pair_atomic(&code, b"new code", &cache, b"new cache").unwrap();
    assert_eq!(fs::read(&code).unwrap(), b"new code");
    assert_eq!(fs::read(&cache).unwrap(), b"new cache");
    assert_eq!(listing(dir.path()).len(), 2);
}

#[test]
fn pair_in_different_directories() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let (code, cache) = (a.path().join("m.py"), b.path().join("m.cache"));
    write_pair_atomic(&code, b"c", &cache, b"k").unwrap();
    assert_eq!(fs::read(&code).unwrap(), b"c");
    assert_eq!(fs::read(&cache).unwrap(), b"k");
}

#[test]
fn pair_failure_before_any_rename_leaves_both_old_files() {
    let dir = tempfile::tempdir().unwrap();
    let (code, cache) = (dir.path().join("m.py"), dir.path().join("m.cache"));
    // Fail each step of each file, up to and including the first rename (cache).
    let steps = [Step::Create, Step::Write, Step::Sync];
    let mut cases: Vec<(Step, PathBuf)> = Vec::new();
    for s in steps {
        cases.push((s, code.clone()));
        cases.push((s, cache.clone()));
    }
    cases.push((Step::Rename, cache.clone()));
    for (step, target) in cases {
        fs::write(&code, b"old code").unwrap();
        fs::write(&cache, b"old cache").unwrap();
        let mut fail = |s: Step, p: &Path| {
            if s == step && p == target {
                Err(io::Error::other("injected"))
            } else {
                Ok(())
            }
        };
        let r = write_pair_atomic_with(&code, b"new code", &cache, b"new cache", &mut fail);
        assert!(r.is_err(), "{step:?} {}", target.display());
        assert_eq!(fs::read(&code).unwrap(), b"old code", "{step:?}");
        assert_eq!(fs::read(&cache).unwrap(), b"old cache", "{step:?}");
        assert_eq!(
            listing(dir.path()).len(),
            2,
            "{step:?} {}",
            target.display()
        );
    }
}

#[test]
fn pair_failure_between_renames_puts_the_old_cache_back_and_leaves_no_temp() {
    // The cache is renamed first; the code's failed rename undoes it.
    let dir = tempfile::tempdir().unwrap();
    let (code, cache) = (dir.path().join("m.py"), dir.path().join("m.cache"));
    fs::write(&code, b"old code").unwrap();
    fs::write(&cache, b"old cache").unwrap();
    let code_target = code.clone();
    let mut fail = |s: Step, p: &Path| {
        if s == Step::Rename && p == code_target {
            Err(io::Error::other("injected"))
        } else {
            Ok(())
        }
    };
    assert!(write_pair_atomic_with(&code, b"new code", &cache, b"new cache", &mut fail).is_err());
    assert_eq!(fs::read(&cache).unwrap(), b"old cache");
    assert_eq!(fs::read(&code).unwrap(), b"old code");
    assert_eq!(listing(dir.path()).len(), 2);
}

#[test]
fn a_failed_first_write_of_the_code_leaves_no_cache_behind() {
    // No pair existed: the code's path is a non-empty directory, so its rename fails.
    let dir = tempfile::tempdir().unwrap();
    let (code, cache) = (dir.path().join("m.py"), dir.path().join("m.cache"));
    fs::create_dir(&code).unwrap();
    fs::write(code.join("keep"), b"x").unwrap();
    assert!(write_pair_atomic(&code, b"new code", &cache, b"new cache").is_err());
    assert!(!cache.exists());
    assert_eq!(listing(dir.path()), BTreeSet::from(["m.py".to_string()]));
}

#[test]
fn a_successful_pair_write_leaves_no_kept_link() {
    let dir = tempfile::tempdir().unwrap();
    let (code, cache) = (dir.path().join("m.py"), dir.path().join("m.cache"));
    fs::write(&code, b"old code").unwrap();
    fs::write(&cache, b"old cache").unwrap();
    write_pair_atomic(&code, b"new code", &cache, b"new cache").unwrap();
    assert_eq!(fs::read(&cache).unwrap(), b"new cache");
    assert_eq!(listing(dir.path()).len(), 2);
}

#[test]
fn pair_refuses_the_same_path_twice() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.bin");
    let same = dir.path().join(".").join("m.bin");
    let err = write_pair_atomic(&p, b"a", &same, b"b").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(!p.exists());
}

#[test]
fn a_directory_in_the_way_is_refused_before_any_rename() {
    // With an old pair present, whichever name a directory takes.
    for in_the_way in ["m.py", "m.cache"] {
        let dir = tempfile::tempdir().unwrap();
        let (code, cache) = (dir.path().join("m.py"), dir.path().join("m.cache"));
        let other = if in_the_way == "m.py" { &cache } else { &code };
        fs::write(other, b"old").unwrap();
        fs::create_dir(dir.path().join(in_the_way)).unwrap();
        let mut renames = 0;
        let mut count = |s: Step, _: &Path| {
            renames += usize::from(s == Step::Rename);
            Ok(())
        };
        let err = write_pair_atomic_with(&code, b"new code", &cache, b"new cache", &mut count)
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("is a directory, not a file") && text.ends_with("Nothing was replaced."),
            "{text}"
        );
        assert_eq!(renames, 0);
        assert_eq!(fs::read(other).unwrap(), b"old");
        assert_eq!(listing(dir.path()).len(), 2, "{:?}", listing(dir.path()));
    }
}

#[test]
fn each_failure_says_what_was_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (code, cache) = (dir.path().join("m.py"), dir.path().join("m.cache"));
    fs::write(&code, b"old code").unwrap();
    fs::write(&cache, b"old cache").unwrap();
    let message = |step: Step, target: &Path| {
        let target = target.to_path_buf();
        let mut fail = move |s: Step, p: &Path| {
            if s == step && (p == target || step == Step::PutBack) {
                Err(io::Error::other("injected"))
            } else {
                Ok(())
            }
        };
        write_pair_atomic_with(&code, b"new code", &cache, b"new cache", &mut fail)
            .unwrap_err()
            .to_string()
    };
    assert!(message(Step::Write, &cache).ends_with("Nothing was replaced."));
    assert!(message(Step::Rename, &code).ends_with("Nothing was replaced."));
    assert_eq!(fs::read(&cache).unwrap(), b"old cache");
    // the code's rename fails and the old cache cannot be put back
    let mut both = |s: Step, p: &Path| match s {
        Step::Rename if p == code.as_path() => Err(io::Error::other("injected")),
        Step::PutBack => Err(io::Error::other("injected")),
        _ => Ok(()),
    };
    let text = write_pair_atomic_with(&code, b"new code", &cache, b"new cache", &mut both)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("The new cache is in place beside the old python_code"),
        "{text}"
    );
    assert_eq!(fs::read(&cache).unwrap(), b"new cache");
    assert_eq!(fs::read(&code).unwrap(), b"old code");
    assert!(message(Step::SyncDir, &cache).contains("Both files are in place"));
}
