//! Shared builders for the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use artifact::{sha256_hex, Entry, Header, FORMAT_VERSION};

pub const CODE: &[u8] = b"def f(x):\n    return x * 2\n";

pub fn header() -> Header {
    let mut meta = serde_json::Map::new();
    meta.insert("cpu_isa".into(), serde_json::json!("avx512"));
    Header {
        format_version: FORMAT_VERSION,
        backend: "eager".into(),
        tracer: "make_fx".into(),
        code_hash: sha256_hex(CODE),
        torch_build: "2.15.0".into(),
        python_version: "3.11.7".into(),
        platform: "linux-x86_64".into(),
        created_by: "torch_precompile 0.1.0".into(),
        meta,
        entries: vec![],
    }
}

pub fn entry(kind: &str, name: &str, data: &[u8]) -> Entry {
    Entry {
        kind: kind.into(),
        name: name.into(),
        data: data.to_vec(),
    }
}

/// The header `decode` returns for `header()` encoded with `entries`.
pub fn expected_header(base: &Header, entries: &[Entry]) -> Header {
    let mut h = base.clone();
    h.format_version = FORMAT_VERSION;
    h.entries = entries
        .iter()
        .map(|e| artifact::EntryMeta {
            kind: e.kind.clone(),
            name: e.name.clone(),
            size: e.data.len() as u64,
            sha256: sha256_hex(&e.data),
        })
        .collect();
    h
}
