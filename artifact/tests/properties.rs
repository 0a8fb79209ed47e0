//! Property tests over arbitrary caches: round trip, and that no single changed
//! byte and no truncation decodes.

mod common;

use artifact::{decode, encode, read_header, validate_entry_names, Entry, Header};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    let component = "[a-zA-Z0-9_.é名-]{1,12}".prop_filter("not . or ..", |c| c != "." && c != "..");
    prop::collection::vec(component, 1..4).prop_map(|cs| cs.join("/"))
}

/// Entries with names that form a valid set (duplicates and file/dir clashes dropped).
fn entries() -> impl Strategy<Value = Vec<Entry>> {
    let one = (
        "[a-z_]{1,10}",
        name(),
        prop::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(kind, name, data)| Entry { kind, name, data });
    prop::collection::vec(one, 0..6).prop_map(|candidates| {
        let mut kept: Vec<Entry> = Vec::new();
        for e in candidates {
            let names = kept
                .iter()
                .map(|k| k.name.as_str())
                .chain([e.name.as_str()]);
            if validate_entry_names(names).is_ok() {
                kept.push(e);
            }
        }
        kept
    })
}

fn header() -> impl Strategy<Value = Header> {
    let meta_value = prop_oneof![
        any::<String>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<bool>().prop_map(serde_json::Value::from),
    ];
    (
        any::<String>(),
        any::<String>(),
        any::<[u8; 8]>(),
        any::<String>(),
        prop::collection::btree_map(any::<String>(), meta_value, 0..4),
    )
        .prop_map(|(backend, tracer, code, torch_build, meta)| Header {
            backend,
            tracer,
            code_hash: artifact::sha256_hex(&code),
            torch_build,
            meta: meta.into_iter().collect(),
            ..common::header()
        })
}

fn envelope() -> impl Strategy<Value = (Header, Vec<Entry>, Vec<u8>)> {
    (header(), entries()).prop_map(|(h, e)| {
        let bytes = encode(&h, &e).unwrap();
        (h, e, bytes)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encode_then_decode_round_trips((h, entries, bytes) in envelope()) {
        let env = decode(&bytes).unwrap();
        prop_assert_eq!(&env.entries, &entries);
        prop_assert_eq!(&env.header, &common::expected_header(&h, &entries));
        prop_assert_eq!(read_header(&bytes).unwrap(), env.header);
    }

    #[test]
    fn any_single_changed_byte_is_an_error(
        (_h, _e, bytes) in envelope(),
        at in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let i = at.index(bytes.len());
        let mut bad = bytes.clone();
        bad[i] ^= mask;
        prop_assert!(decode(&bad).is_err(), "changed byte {} decoded", i);
        if let Ok(h) = read_header(&bad) {
            // Only entry bytes are outside read_header's checks.
            prop_assert_eq!(h, read_header(&bytes).unwrap());
        }
    }

    #[test]
    fn any_truncation_is_an_error(
        (_h, _e, bytes) in envelope(),
        at in any::<prop::sample::Index>(),
    ) {
        let n = at.index(bytes.len()); // 0 ..= len-1
        prop_assert!(decode(&bytes[..n]).is_err());
        prop_assert!(read_header(&bytes[..n]).is_err());
    }

    #[test]
    fn any_appended_bytes_are_an_error(
        (_h, _e, bytes) in envelope(),
        extra in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let mut bad = bytes.clone();
        bad.extend_from_slice(&extra);
        prop_assert!(decode(&bad).is_err());
        prop_assert!(read_header(&bad).is_err());
    }
}

/// `MAGIC`, version 1 and `header_len`, framed with a correct checksum over `json`.
fn framed(header_len: u64, json: &[u8], data: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    let mut out = artifact::MAGIC.to_vec();
    out.extend_from_slice(&artifact::FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(json);
    let sum = sha2::Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out.extend_from_slice(data);
    out
}

// Fuzz-style: the same checks as fuzz/fuzz_targets/*, run by `cargo test` so they
// guard every change, not only fuzzing sessions.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode(&bytes);
        let _ = read_header(&bytes);
    }

    #[test]
    fn arbitrary_tail_after_a_valid_prefix_never_panics(
        header_len in prop_oneof![0u64..80, any::<u64>()],
        tail in prop::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut bytes = artifact::MAGIC.to_vec();
        bytes.extend_from_slice(&artifact::FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&header_len.to_le_bytes());
        bytes.extend_from_slice(&tail);
        prop_assert!(decode(&bytes).is_err());
        prop_assert!(read_header(&bytes).is_err());
    }

    #[test]
    fn hostile_header_behind_a_valid_checksum_is_checked(
        names in prop::collection::vec("[a-z./\\\\\0]{0,8}", 0..4),
        sizes in prop::collection::vec(prop_oneof![0u64..4, any::<u64>()], 4),
        data in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let mut h = common::header();
        h.entries = names
            .iter()
            .zip(&sizes)
            .map(|(n, s)| artifact::EntryMeta {
                kind: "k".into(),
                name: n.clone(),
                size: *s,
                sha256: artifact::sha256_hex(b""),
            })
            .collect();
        let json = serde_json::to_vec(&h).unwrap();
        let bytes = framed(json.len() as u64, &json, &data);
        if let Ok(env) = decode(&bytes) {
            // Only possible when every name is valid and every entry is empty.
            for e in &env.entries {
                artifact::validate_entry_name(&e.name).unwrap();
                prop_assert!(e.data.is_empty());
            }
            prop_assert!(data.is_empty());
        }
    }
}
