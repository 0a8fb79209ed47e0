use super::*;
use crate::header::{Entry, Header};
use std::os::unix::fs::symlink;

fn envelope(entries: &[(&str, &[u8])]) -> Envelope {
    Envelope {
        header: crate::envelope::tests::sample_header(),
        entries: entries
            .iter()
            .map(|(name, data)| Entry {
                kind: "blob".into(),
                name: (*name).into(),
                data: data.to_vec(),
            })
            .collect(),
    }
}

fn escape_why(r: Result<Vec<PathBuf>, Error>) -> &'static str {
    match r {
        Err(Error::Escape { why, .. }) => why,
        other => panic!("expected Escape, got {other:?}"),
    }
}

fn is_empty_dir(p: &Path) -> bool {
    fs::read_dir(p).unwrap().next().is_none()
}

#[test]
fn writes_nested_entries_and_returns_their_paths_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let env = envelope(&[
        ("kernels/ab/c.so", b"so"),
        ("top.json", b"{}"),
        ("kernels/d", b""),
    ]);
    let out = dir.path().join("serving"); // created on demand
    let paths = extract_to(&env, &out).unwrap();
    assert_eq!(
        paths,
        vec![
            out.join("kernels/ab/c.so"),
            out.join("top.json"),
            out.join("kernels/d")
        ]
    );
    assert_eq!(fs::read(out.join("kernels/ab/c.so")).unwrap(), b"so");
    assert_eq!(fs::read(out.join("top.json")).unwrap(), b"{}");
    assert_eq!(fs::read(out.join("kernels/d")).unwrap(), b"");
}

#[test]
fn decoded_envelope_extracts() {
    let entries = crate::envelope::tests::sample_entries();
    let header: Header = crate::envelope::tests::sample_header();
    let env = crate::decode(&crate::encode(&header, &entries).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let paths = extract_to(&env, dir.path()).unwrap();
    for (p, e) in paths.iter().zip(&entries) {
        assert_eq!(fs::read(p).unwrap(), e.data);
    }
}

#[test]
fn replaces_an_existing_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a"), b"old").unwrap();
    extract_to(&envelope(&[("a", b"new")]), dir.path()).unwrap();
    assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"new");
}

#[test]
fn refuses_traversal_names_in_a_hand_built_envelope() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("inner");
    fs::create_dir(&dir).unwrap();
    for name in [
        "../escaped",
        "a/../../escaped",
        "/tmp/escaped-abs",
        "a\\..\\b",
    ] {
        let r = extract_to(&envelope(&[("ok", b"x"), (name, b"x")]), &dir);
        assert!(
            matches!(r, Err(Error::BadEntryName { .. })),
            "{name:?}: {r:?}"
        );
    }
    assert!(!root.path().join("escaped").exists());
    assert!(
        is_empty_dir(&dir),
        "nothing is written when a name is refused"
    );
}

#[test]
fn refuses_a_symlinked_directory_pointing_outside() {
    let root = tempfile::tempdir().unwrap();
    let (dir, outside) = (root.path().join("dir"), root.path().join("outside"));
    fs::create_dir(&dir).unwrap();
    fs::create_dir(&outside).unwrap();
    symlink(&outside, dir.join("kernels")).unwrap();
    let env = envelope(&[("first", b"x"), ("kernels/evil.so", b"x")]);
    let why = escape_why(extract_to(&env, &dir));
    assert!(why.contains("symbolic link"), "{why}");
    assert!(is_empty_dir(&outside));
    assert!(
        !dir.join("first").exists(),
        "refused before writing anything"
    );
}

#[test]
fn refuses_a_symlinked_directory_deeper_down() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("dir");
    fs::create_dir_all(dir.join("a/b")).unwrap();
    symlink("/", dir.join("a/b/c")).unwrap();
    let why = escape_why(extract_to(&envelope(&[("a/b/c/etc/x", b"x")]), &dir));
    assert!(why.contains("symbolic link"), "{why}");
}

#[test]
fn refuses_a_symlink_at_the_file_itself() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("dir");
    fs::create_dir(&dir).unwrap();
    let victim = root.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    symlink(&victim, dir.join("k.so")).unwrap();
    let why = escape_why(extract_to(&envelope(&[("k.so", b"x")]), &dir));
    assert!(why.contains("symbolic link"), "{why}");
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    assert!(fs::symlink_metadata(dir.join("k.so"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn refuses_a_file_where_a_directory_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a"), b"file").unwrap();
    let why = escape_why(extract_to(&envelope(&[("a/b", b"x")]), dir.path()));
    assert!(why.contains("not a directory"), "{why}");
}

#[test]
fn refuses_a_directory_where_the_file_goes() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("a")).unwrap();
    let why = escape_why(extract_to(&envelope(&[("a", b"x")]), dir.path()));
    assert!(why.contains("not a regular file"), "{why}");
}

#[test]
fn extraction_directory_itself_may_be_a_symlink() {
    // The caller chose `dir`; only what is under it is checked.
    let root = tempfile::tempdir().unwrap();
    let real = root.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = root.path().join("link");
    symlink(&real, &link).unwrap();
    extract_to(&envelope(&[("x/y", b"1")]), &link).unwrap();
    assert_eq!(fs::read(real.join("x/y")).unwrap(), b"1");
}
