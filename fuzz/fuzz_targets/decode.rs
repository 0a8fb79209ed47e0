#![no_main]
//! Any byte string: decode() and read_header() must return, never panic, never
//! allocate beyond the input, and agree with each other.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let full = artifact::decode(data);
    let head = artifact::read_header(data);
    if let Ok(env) = full {
        // decode's checks are a superset of read_header's.
        assert_eq!(
            head.expect("decode accepted what read_header refused"),
            env.header
        );
        // What decodes re-encodes to something that decodes to the same thing.
        let again = artifact::encode(&env.header, &env.entries).expect("re-encode");
        assert_eq!(artifact::decode(&again).expect("re-decode"), env);
    }
});
