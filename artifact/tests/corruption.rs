//! Exhaustive damage to one small valid cache: every byte flipped every way that
//! matters, every truncation, every inserted byte. Each must be an error, never a
//! panic and never a different cache.

mod common;

use artifact::{decode, encode, read_header, Error};

fn sample() -> Vec<u8> {
    let entries = [
        common::entry("cpp_kernel", "k/a.so", b"\x7fELF....kernel"),
        common::entry("autotune", "t.json", b"{\"x\":1}"),
    ];
    encode(&common::header(), &entries).unwrap()
}

/// Where the entry bytes start: after magic, version, length, JSON, checksum.
fn data_start(bytes: &[u8]) -> usize {
    52 + u64::from_le_bytes(bytes[12..20].try_into().unwrap()) as usize
}

#[test]
fn every_single_bit_flip_and_byte_inversion_is_detected() {
    let good = sample();
    let header = read_header(&good).unwrap();
    let data_at = data_start(&good);
    let mut checked = 0;
    for i in 0..good.len() {
        for mask in [1u8, 2, 4, 8, 16, 32, 64, 128, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= mask;
            assert!(decode(&bad).is_err(), "flip {mask:#x} at {i} decoded");
            match read_header(&bad) {
                Err(_) => {}
                // read_header does not hash entry bytes; the header must be intact.
                Ok(h) => assert!(i >= data_at && h == header, "flip at {i} misread"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, good.len() * 9);
}

#[test]
fn flips_are_classified_by_region() {
    let good = sample();
    let data_at = data_start(&good);
    let kind = |i: usize| {
        let mut bad = good.clone();
        bad[i] ^= 0x01;
        decode(&bad).unwrap_err()
    };
    for i in 0..8 {
        assert!(matches!(kind(i), Error::NotAnEnvelope), "magic byte {i}");
    }
    for i in 8..12 {
        assert!(
            matches!(kind(i), Error::UnsupportedVersion { .. }),
            "version byte {i}"
        );
    }
    for i in 12..good.len() {
        assert!(
            matches!(kind(i), Error::Corrupt { .. }),
            "byte {i} (data at {data_at})"
        );
    }
}

#[test]
fn every_truncation_is_detected() {
    let good = sample();
    for n in 0..good.len() {
        assert!(decode(&good[..n]).is_err(), "truncated to {n} decoded");
        assert!(read_header(&good[..n]).is_err(), "truncated to {n} read");
    }
    decode(&good).unwrap();
}

#[test]
fn every_inserted_byte_is_detected() {
    let good = sample();
    for i in 0..=good.len() {
        let mut bad = good.clone();
        bad.insert(i, 0);
        assert!(decode(&bad).is_err(), "byte inserted at {i} decoded");
    }
}

#[test]
fn every_removed_byte_is_detected() {
    let good = sample();
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad.remove(i);
        assert!(decode(&bad).is_err(), "byte removed at {i} decoded");
    }
}
