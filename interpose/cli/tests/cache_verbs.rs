//! `precompile inspect` and `precompile verify` on real cache files: a good pair,
//! a flipped byte, a mismatched python_code, a foreign file.

use std::path::PathBuf;
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cache-verbs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_pair(dir: &PathBuf) -> (PathBuf, PathBuf) {
    write_pair_as(dir, "m", "eager")
}

/// A pair whose python_code says BACKEND = 'eager' and whose header says `backend`.
fn write_pair_as(dir: &PathBuf, stem: &str, backend: &str) -> (PathBuf, PathBuf) {
    let code = b"BACKEND = 'eager'\nTRACER = 'make_fx'\n".to_vec();
    let mut meta = serde_json::Map::new();
    meta.insert(
        "host_requirements".into(),
        "C++ kernels: this torch build, avx2 CPU (avx2)".into(),
    );
    let header = artifact::Header {
        format_version: artifact::FORMAT_VERSION,
        backend: backend.into(),
        tracer: "make_fx".into(),
        code_hash: artifact::sha256_hex(&code),
        torch_build: "2.15.0".into(),
        python_version: "3.11.7".into(),
        platform: "linux-x86_64".into(),
        created_by: "test".into(),
        meta,
        entries: vec![],
    };
    let entries = [artifact::Entry {
        kind: "cpp_kernel".into(),
        name: "cpp/k.so".into(),
        data: vec![7; 300],
    }];
    let cache = artifact::encode(&header, &entries).unwrap();
    let (c, k) = (
        dir.join(format!("{stem}.py")),
        dir.join(format!("{stem}.cache")),
    );
    std::fs::write(&c, code).unwrap();
    std::fs::write(&k, cache).unwrap();
    (c, k)
}

fn precompile(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_precompile"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn inspect_shows_the_header_and_host_requirements() {
    let d = scratch("inspect");
    let (code, cache) = write_pair(&d);
    let out = precompile(&[
        "inspect".as_ref(),
        cache.as_os_str(),
        "--code".as_ref(),
        code.as_os_str(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for want in [
        "backend          eager",
        "tracer           make_fx",
        "host needs       C++ kernels: this torch build, avx2 CPU",
        "cpp_kernel",
        "cpp/k.so",
        "matches",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn verify_accepts_a_pair_and_rejects_damage_and_mismatches() {
    let d = scratch("verify");
    let (code, cache) = write_pair(&d);
    let ok = precompile(&[
        "verify".as_ref(),
        cache.as_os_str(),
        "--code".as_ref(),
        code.as_os_str(),
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let said = String::from_utf8_lossy(&ok.stdout);
    assert!(said.starts_with("ok: "), "{said}");
    assert!(said.contains("needs torch build 2.15.0"), "{said}");

    // the code hash matches, but the header's backend is not python_code's
    let (code2, cache2) = write_pair_as(&d, "crafted", "inductor");
    let crafted = precompile(&[
        "verify".as_ref(),
        cache2.as_os_str(),
        "--code".as_ref(),
        code2.as_os_str(),
    ]);
    assert_eq!(crafted.status.code(), Some(1));
    let why = String::from_utf8_lossy(&crafted.stderr);
    assert!(
        why.contains("the cache says backend \"inductor\", python_code says \"eager\""),
        "{why}"
    );

    let mut bytes = std::fs::read(&cache).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let flipped = d.join("flipped.cache");
    std::fs::write(&flipped, &bytes).unwrap();
    let bad = precompile(&["verify".as_ref(), flipped.as_os_str()]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("corrupt"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    let other = d.join("other.py");
    std::fs::write(&other, b"print('not it')\n").unwrap();
    let mismatch = precompile(&[
        "verify".as_ref(),
        cache.as_os_str(),
        "--code".as_ref(),
        other.as_os_str(),
    ]);
    assert_eq!(mismatch.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&mismatch.stderr).contains("are not a pair"));

    let foreign = d.join("foreign.cache");
    std::fs::write(&foreign, b"\x89PNG\r\n\x1a\nxxxxxxxxxxxxxxxxxxxxxxxxx").unwrap();
    let f = precompile(&["verify".as_ref(), foreign.as_os_str()]);
    assert_eq!(f.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&f.stderr).contains("not a precompile cache"));

    let usage = precompile(&["verify".as_ref()]);
    assert_eq!(usage.status.code(), Some(2));
}
