//! One test per rule of the format; exhaustive and random corruption lives in
//! `tests/corruption.rs` and `tests/properties.rs`.

use super::*;
use serde_json::json;

pub(crate) const SAMPLE_CODE: &[u8] = b"def f(x):\n    return x + 1\n";

pub(crate) fn sample_header() -> Header {
    let mut meta = serde_json::Map::new();
    meta.insert("cpu_isa".into(), json!("avx2"));
    meta.insert("host".into(), json!({"needs": ["same torch build"]}));
    Header {
        format_version: FORMAT_VERSION,
        backend: "inductor".into(),
        tracer: "dynamo".into(),
        code_hash: sha256_hex(SAMPLE_CODE),
        torch_build: "2.15.0+git1234567".into(),
        python_version: "3.11.7".into(),
        platform: "linux-x86_64".into(),
        created_by: "torch_precompile 0.1.0".into(),
        meta,
        entries: vec![],
    }
}

pub(crate) fn sample_entries() -> Vec<Entry> {
    vec![
        entry("cpp_kernel", "kernels/ab/cdef.so", b"\x7fELF fake kernel"),
        entry("autotune", "autotune.json", b"{\"mm\": \"triton\"}"),
        entry("empty", "e", b""),
    ]
}

fn entry(kind: &str, name: &str, data: &[u8]) -> Entry {
    Entry {
        kind: kind.into(),
        name: name.into(),
        data: data.to_vec(),
    }
}

/// Frames `json` as an envelope with a correct checksum, so that tests can reach
/// the checks behind it with headers `encode` would never write.
pub(crate) fn frame(version: u32, json: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(json);
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out.extend_from_slice(data);
    out
}

/// A valid encoded sample with its header JSON edited by `edit`, re-framed.
fn with_header_json(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let entries = sample_entries();
    let bytes = encode(&sample_header(), &entries).unwrap();
    let header = read_header(&bytes).unwrap();
    let mut value = serde_json::to_value(&header).unwrap();
    edit(&mut value);
    let data: Vec<u8> = entries.iter().flat_map(|e| e.data.clone()).collect();
    frame(FORMAT_VERSION, &serde_json::to_vec(&value).unwrap(), &data)
}

fn corrupt_what(result: Result<Envelope, Error>) -> String {
    match result {
        Err(Error::Corrupt { what }) => what,
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn round_trip_returns_the_same_header_and_entries() {
    let entries = sample_entries();
    let bytes = encode(&sample_header(), &entries).unwrap();
    let env = decode(&bytes).unwrap();
    assert_eq!(env.entries, entries);
    let mut expected = sample_header();
    expected.entries = entries
        .iter()
        .map(|e| EntryMeta {
            kind: e.kind.clone(),
            name: e.name.clone(),
            size: e.data.len() as u64,
            sha256: sha256_hex(&e.data),
        })
        .collect();
    assert_eq!(env.header, expected);
    assert_eq!(read_header(&bytes).unwrap(), expected);
    assert_eq!(
        env.entry("autotune.json").unwrap().data,
        b"{\"mm\": \"triton\"}"
    );
    assert!(env.entry("missing").is_none());
}

#[test]
fn round_trip_with_no_entries() {
    let bytes = encode(&sample_header(), &[]).unwrap();
    let env = decode(&bytes).unwrap();
    assert!(env.entries.is_empty() && env.header.entries.is_empty());
}

#[test]
fn layout_matches_the_specification() {
    let entries = sample_entries();
    let bytes = encode(&sample_header(), &entries).unwrap();
    assert_eq!(bytes[..8], *b"PRECOMP\0");
    assert_eq!(bytes[8..12], 1u32.to_le_bytes());
    let h = u64::from_le_bytes(bytes[12..20].try_into().unwrap()) as usize;
    let json: serde_json::Value = serde_json::from_slice(&bytes[20..20 + h]).unwrap();
    assert_eq!(json["backend"], "inductor");
    assert_eq!(bytes[20 + h..52 + h], Sha256::digest(&bytes[..20 + h])[..]);
    let data: Vec<u8> = entries.iter().flat_map(|e| e.data.clone()).collect();
    assert_eq!(bytes[52 + h..], data[..]);
}

#[test]
fn encode_is_deterministic() {
    let a = encode(&sample_header(), &sample_entries()).unwrap();
    let b = encode(&sample_header(), &sample_entries()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn encode_ignores_given_entry_table_and_version() {
    let mut header = sample_header();
    header.format_version = 99;
    header.entries = vec![EntryMeta {
        kind: "bogus".into(),
        name: "../x".into(),
        size: 5,
        sha256: "nope".into(),
    }];
    let bytes = encode(&header, &sample_entries()).unwrap();
    let env = decode(&bytes).unwrap();
    assert_eq!(env.header.format_version, FORMAT_VERSION);
    assert_eq!(env.header.entries.len(), 3);
}

#[test]
fn wrong_magic_is_not_an_envelope_and_foreign() {
    let mut bytes = encode(&sample_header(), &[]).unwrap();
    bytes[0] = b'X';
    let err = decode(&bytes).unwrap_err();
    assert!(matches!(err, Error::NotAnEnvelope), "{err:?}");
    assert!(err.is_foreign());
    assert!(err
        .to_string()
        .starts_with("not a precompile cache (wrong magic bytes)"));
    assert!(matches!(
        decode(b"#!/usr/bin/env python\n"),
        Err(Error::NotAnEnvelope)
    ));
    assert!(matches!(read_header(b"ELF"), Err(Error::NotAnEnvelope)));
}

#[test]
fn short_prefix_of_magic_is_a_truncated_cache() {
    for n in 0..MAGIC.len() {
        let what = corrupt_what(decode(&MAGIC[..n]));
        assert!(what.contains("truncated"), "{n}: {what}");
    }
}

#[test]
fn other_version_is_unsupported_and_foreign() {
    for version in [0, 2, u32::MAX] {
        // Only the magic and version: a future layout is recognized before its
        // header is looked at.
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&version.to_le_bytes());
        let err = decode(&bytes).unwrap_err();
        assert!(
            matches!(err, Error::UnsupportedVersion { found, supported: 1 } if found == version),
            "{err:?}"
        );
        assert!(err.is_foreign());
        assert!(err.to_string().contains("not supported"));
    }
}

#[test]
fn corrupt_and_bad_names_are_not_foreign() {
    assert!(!Error::corrupt("x").is_foreign());
    let name_err = validate_entry_names(["../x"]).unwrap_err();
    assert!(!name_err.is_foreign());
}

#[test]
fn truncation_inside_fixed_fields_is_corrupt() {
    let bytes = encode(&sample_header(), &[]).unwrap();
    for n in [9, 11, 12, 19] {
        let what = corrupt_what(decode(&bytes[..n]));
        assert!(what.contains("truncated"), "{n}: {what}");
    }
}

#[test]
fn header_length_beyond_the_input_is_refused_without_allocating() {
    let mut bytes = encode(&sample_header(), &[]).unwrap();
    for len in [u64::MAX, 1 << 63, (bytes.len() as u64) - 20 - 31] {
        bytes[12..20].copy_from_slice(&len.to_le_bytes());
        let what = corrupt_what(decode(&bytes));
        assert!(what.contains("header length"), "{len}: {what}");
    }
}

#[test]
fn checksum_cut_short_is_truncation_even_with_an_empty_header() {
    // Regression, found by cargo-fuzz: header_len 0 and fewer than 32 bytes left.
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    for extra in 0..CHECKSUM_LEN {
        let mut cut = bytes.clone();
        cut.extend(std::iter::repeat_n(0u8, extra));
        assert!(
            corrupt_what(decode(&cut)).contains("header length"),
            "{extra}"
        );
    }
    // With all 32 bytes present the length is fine and the checksum is what fails.
    let mut whole = bytes.clone();
    whole.extend([0u8; 32]);
    assert!(corrupt_what(decode(&whole)).contains("checksum"));
}

#[test]
fn header_checksum_mismatch_is_corrupt() {
    let mut bytes = encode(&sample_header(), &[]).unwrap();
    let h = u64::from_le_bytes(bytes[12..20].try_into().unwrap()) as usize;
    bytes[20 + h] ^= 1;
    assert!(corrupt_what(decode(&bytes)).contains("checksum"));
    // A changed header byte (here: "inductor" -> "inductos") breaks it as well.
    let mut bytes = encode(&sample_header(), &[]).unwrap();
    let at = bytes.windows(8).position(|w| w == b"inductor").unwrap();
    bytes[at + 7] = b's';
    assert!(corrupt_what(decode(&bytes)).contains("checksum"));
}

#[test]
fn header_that_is_not_json_is_corrupt() {
    let bytes = frame(FORMAT_VERSION, b"{not json", b"");
    assert!(corrupt_what(decode(&bytes)).contains("not valid header JSON"));
    let bytes = frame(FORMAT_VERSION, b"\xff\xfe", b"");
    assert!(corrupt_what(decode(&bytes)).contains("not valid header JSON"));
}

#[test]
fn header_with_missing_or_unknown_field_is_corrupt() {
    let bytes = with_header_json(|v| {
        v.as_object_mut().unwrap().remove("tracer");
    });
    assert!(corrupt_what(decode(&bytes)).contains("tracer"));
    let bytes = with_header_json(|v| {
        v["surprise"] = json!(1);
    });
    assert!(corrupt_what(decode(&bytes)).contains("surprise"));
    let bytes = with_header_json(|v| {
        v["entries"][0]["extra"] = json!(true);
    });
    assert!(corrupt_what(decode(&bytes)).contains("extra"));
}

#[test]
fn header_version_disagreeing_with_binary_version_is_corrupt() {
    let bytes = with_header_json(|v| v["format_version"] = json!(2));
    assert!(corrupt_what(decode(&bytes)).contains("format version 2"));
}

#[test]
fn malformed_code_hash_in_header_is_corrupt() {
    let bytes = with_header_json(|v| v["code_hash"] = json!("abc"));
    assert!(corrupt_what(decode(&bytes)).contains("code_hash"));
}

#[test]
fn malformed_entry_sha256_or_kind_in_header_is_corrupt() {
    let bytes = with_header_json(|v| v["entries"][1]["sha256"] = json!("ABC"));
    assert!(corrupt_what(decode(&bytes)).contains("sha256"));
    let bytes = with_header_json(|v| v["entries"][0]["kind"] = json!("a b"));
    assert!(corrupt_what(decode(&bytes)).contains("kind"));
}

#[test]
fn hostile_entry_name_in_header_is_refused_by_decode_and_read_header() {
    for name in ["../../etc/passwd", "/abs", "a/./b", "x\\y", "autotune.json"] {
        // The last one duplicates the sample's second entry name.
        let bytes = with_header_json(|v| v["entries"][0]["name"] = json!(name));
        for result in [decode(&bytes).map(|_| ()), read_header(&bytes).map(|_| ())] {
            let err = result.unwrap_err();
            assert!(
                matches!(err, Error::BadEntryName { .. }),
                "{name:?}: {err:?}"
            );
        }
    }
}

#[test]
fn entry_bytes_not_matching_sha256_are_corrupt() {
    let entries = sample_entries();
    let mut bytes = encode(&sample_header(), &entries).unwrap();
    let last = bytes.len() - 1; // inside "autotune.json" (the last entry is empty)
    bytes[last] ^= 0x80;
    let what = corrupt_what(decode(&bytes));
    assert!(
        what.contains("autotune.json") && what.contains("sha256"),
        "{what}"
    );
    // read_header does not hash entry bytes: inspect still shows the header.
    assert_eq!(read_header(&bytes).unwrap().entries.len(), 3);
}

#[test]
fn entry_sizes_larger_than_the_data_are_truncation() {
    let bytes = encode(&sample_header(), &sample_entries()).unwrap();
    let what = corrupt_what(decode(&bytes[..bytes.len() - 1]));
    assert!(what.contains("truncated"), "{what}");
    assert!(read_header(&bytes[..bytes.len() - 1]).is_err());
}

#[test]
fn trailing_bytes_are_corrupt() {
    let mut bytes = encode(&sample_header(), &sample_entries()).unwrap();
    bytes.push(0);
    let what = corrupt_what(decode(&bytes));
    assert!(
        what.contains("1 unexpected bytes after the last entry"),
        "{what}"
    );
}

#[test]
fn entry_sizes_overflowing_u64_are_corrupt() {
    let bytes = with_header_json(|v| {
        v["entries"][0]["size"] = json!(u64::MAX);
        v["entries"][1]["size"] = json!(u64::MAX);
    });
    assert!(corrupt_what(decode(&bytes)).contains("2^64"));
}

#[test]
fn encode_refuses_bad_names() {
    let mut entries = sample_entries();
    entries[0].name = "../escape".into();
    assert!(matches!(
        encode(&sample_header(), &entries),
        Err(Error::BadEntryName { .. })
    ));
    let mut entries = sample_entries();
    entries[1].name = entries[0].name.clone();
    assert!(matches!(
        encode(&sample_header(), &entries),
        Err(Error::BadEntryName { why, .. }) if why.contains("twice")
    ));
}

#[test]
fn encode_refuses_malformed_code_hash_and_kind() {
    let mut header = sample_header();
    header.code_hash = "not a hash".into();
    let err = encode(&header, &[]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::BadHeader {
                field: "code_hash",
                ..
            }
        ),
        "{err:?}"
    );
    let mut entries = sample_entries();
    entries[0].kind = String::new();
    let err = encode(&sample_header(), &entries).unwrap_err();
    assert!(
        matches!(err, Error::BadHeader { field: "kind", .. }),
        "{err:?}"
    );
}

#[test]
fn a_kernel_manifest_names_only_entries_of_its_own_cache() {
    let with = |path: &str| {
        let manifest =
            json!({"cpp": [{"content": "ab", "binding": "ctypes", "key": "k", "entry": path}]});
        let mut entries = sample_entries();
        entries.push(entry(
            "kernel_manifest",
            "kernels.json",
            manifest.to_string().as_bytes(),
        ));
        // encode does not read entry contents; decode is where a cache from elsewhere is judged
        decode(&encode(&sample_header(), &entries).unwrap())
    };
    assert!(with("kernels/ab/cdef.so").is_ok());
    for outside in [
        "../../usr/lib/evil.so",
        "/usr/lib/evil.so",
        "kernels/../../evil.so",
    ] {
        let err = with(outside).unwrap_err().to_string();
        assert!(err.contains("evil.so"), "{outside}: {err}");
    }
    let err = with("kernels/ab/other.so").unwrap_err().to_string();
    assert!(err.contains("not an entry of this cache"), "{err}");
    let err = with("kernels.json").unwrap_err().to_string();
    assert!(err.contains("not an entry of this cache"), "{err}");
}
