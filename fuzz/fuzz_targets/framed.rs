#![no_main]
//! Input = [json_len: u16 LE][json bytes][entry bytes], framed as a version-1
//! envelope with a correct checksum: fuzzes everything behind the checksum.

use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let json_len = usize::from(u16::from_le_bytes([input[0], input[1]])).min(input.len() - 2);
    let (json, data) = input[2..].split_at(json_len);
    let mut bytes = artifact::MAGIC.to_vec();
    bytes.extend_from_slice(&artifact::FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(json.len() as u64).to_le_bytes());
    bytes.extend_from_slice(json);
    let sum = Sha256::digest(&bytes);
    bytes.extend_from_slice(&sum);
    bytes.extend_from_slice(data);

    let full = artifact::decode(&bytes);
    let head = artifact::read_header(&bytes);
    if let Ok(env) = full {
        assert_eq!(
            head.expect("decode accepted what read_header refused"),
            env.header
        );
        for e in &env.entries {
            artifact::validate_entry_name(&e.name).expect("decoded a bad entry name");
        }
        let again = artifact::encode(&env.header, &env.entries).expect("re-encode");
        assert_eq!(artifact::decode(&again).expect("re-decode"), env);
    } else if let Ok(h) = head {
        // read_header passed, decode failed: only an entry hash can be wrong.
        assert!(!h.entries.is_empty());
    }
});
