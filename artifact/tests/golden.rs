//! A version-1 cache written by an independent implementation of the spec
//! (`fixtures/make_v1_sample.py`). If this fails after a change, the layout
//! changed: bump FORMAT_VERSION and add a new fixture rather than editing this one.

mod common;

use artifact::{decode, encode, read_header, sha256_hex, Header, FORMAT_VERSION};

const FIXTURE: &[u8] = include_bytes!("fixtures/v1-sample.cache");

fn inputs() -> (Header, Vec<artifact::Entry>) {
    let mut meta = serde_json::Map::new();
    meta.insert("cpu_isa".into(), serde_json::json!("avx2"));
    meta.insert(
        "host".into(),
        serde_json::json!({"needs": ["same torch build"]}),
    );
    let header = Header {
        format_version: FORMAT_VERSION,
        backend: "inductor".into(),
        tracer: "dynamo".into(),
        code_hash: sha256_hex(common::CODE),
        torch_build: "2.15.0+git0123abc".into(),
        python_version: "3.11.7".into(),
        platform: "linux-x86_64".into(),
        created_by: "torch_precompile 0.1.0".into(),
        meta,
        entries: vec![],
    };
    let entries = vec![
        common::entry(
            "cpp_kernel",
            "kernels/ab/cdef.so",
            b"\x7fELF\x02\x01\x01fake kernel bytes",
        ),
        common::entry("autotune", "autotune.json", b"{\"mm\":\"extern_mm\"}"),
        common::entry("empty", "e", b""),
    ];
    (header, entries)
}

#[test]
fn v1_fixture_decodes_to_its_inputs() {
    let (header, entries) = inputs();
    let env = decode(FIXTURE).unwrap();
    assert_eq!(env.entries, entries);
    assert_eq!(env.header, common::expected_header(&header, &entries));
    assert_eq!(read_header(FIXTURE).unwrap(), env.header);
    env.header.check_code(common::CODE).unwrap();
}

#[test]
fn encode_reproduces_the_v1_fixture_byte_for_byte() {
    let (header, entries) = inputs();
    assert_eq!(encode(&header, &entries).unwrap(), FIXTURE);
}
