//! The cache file format ("envelope"). This comment is the specification.
//!
//! ```text
//! offset   size        field
//! 0        8           MAGIC, b"PRECOMP\0"
//! 8        4           format_version, u32 little-endian (= FORMAT_VERSION)
//! 12       8           header_len H, u64 little-endian
//! 20       H           header: JSON object (UTF-8), see `Header`
//! 20+H     32          header checksum: sha256 of bytes [0, 20+H), i.e. magic,
//!                      version, length and JSON together
//! 52+H     sum(size)   entry bytes, concatenated in header.entries order, no padding
//! end                  nothing: the file ends exactly after the last entry
//! ```
//!
//! Why this order: the version sits right after the magic so that a reader meets a
//! future version (and reports [`Error::UnsupportedVersion`]) before it tries to
//! parse a header whose shape it does not know. The header comes first and is
//! checked on its own, so `inspect` can show it without hashing megabytes of
//! kernels, and the loader can compare `code_hash` before unpacking anything.
//!
//! Integrity, so that no single changed byte and no truncation reads back as a
//! valid cache: the magic, version and length are covered by the header checksum
//! too; each entry's bytes by its `sha256` in the header; the layout by exact
//! lengths (the entry sizes must add up to precisely what follows the checksum).
//! `header_len` is bounded by the input's length before anything is sliced or
//! allocated, so a hostile length cannot make the reader allocate.
//!
//! The checksum detects damage, not tampering: anyone who can write the file can
//! recompute it. Trust in a cache is trust in whoever wrote the file.

use crate::entry_name::validate_entry_names;
use crate::header::{
    check_code_hash, check_entry_sha256, check_kind, sha256_hex, Entry, EntryMeta, Envelope,
    FieldProblem, Header,
};
use crate::Error;
use sha2::{Digest, Sha256};

/// First 8 bytes of every cache.
pub const MAGIC: [u8; 8] = *b"PRECOMP\x00";

/// The envelope format version this build writes and reads.
///
/// Bump when a reader of the previous version would misread or wrongly accept a
/// new file: any change to the byte layout above, to a `Header`/`EntryMeta` field
/// (added, removed, renamed, retyped — unknown fields are refused), or to what an
/// entry's bytes mean to the loader. Do not bump for new keys in `Header::meta` or
/// new entry kinds an old loader can skip. Readers accept exactly one version; an
/// old cache after a bump is "foreign" and the loader falls back to JIT.
pub const FORMAT_VERSION: u32 = 1;

const VERSION_AT: usize = MAGIC.len(); // 8
const HEADER_LEN_AT: usize = VERSION_AT + 4; // 12
const HEADER_AT: usize = HEADER_LEN_AT + 8; // 20
const CHECKSUM_LEN: usize = 32;

/// Builds a cache from a header and entries.
///
/// `header.entries` is ignored and computed from `entries` (sizes and sha256s);
/// `header.format_version` is set to [`FORMAT_VERSION`]. Refuses what `decode`
/// would refuse: bad or clashing entry names, a `code_hash` or entry kind of the
/// wrong shape.
pub fn encode(header: &Header, entries: &[Entry]) -> Result<Vec<u8>, Error> {
    let as_bad_header = |p: FieldProblem| Error::BadHeader {
        field: p.field,
        why: p.why,
    };
    check_code_hash(&header.code_hash).map_err(as_bad_header)?;
    for e in entries {
        check_kind(&e.kind).map_err(as_bad_header)?;
    }
    validate_entry_names(entries.iter().map(|e| e.name.as_str()))?;

    let mut header = header.clone();
    header.format_version = FORMAT_VERSION;
    header.entries = entries
        .iter()
        .map(|e| EntryMeta {
            kind: e.kind.clone(),
            name: e.name.clone(),
            size: e.data.len() as u64,
            sha256: sha256_hex(&e.data),
        })
        .collect();
    let json = serde_json::to_vec(&header).map_err(|e| Error::BadHeader {
        field: "meta",
        why: format!("the header cannot be written as JSON: {e}"),
    })?;

    let data_len: usize = entries.iter().map(|e| e.data.len()).sum();
    let mut out = Vec::with_capacity(HEADER_AT + json.len() + CHECKSUM_LEN + data_len);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    let checksum = Sha256::digest(&out);
    out.extend_from_slice(&checksum);
    for e in entries {
        out.extend_from_slice(&e.data);
    }
    Ok(out)
}

/// Reads and checks the header: magic, version, lengths, checksum, JSON, entry
/// names, and that the entry sizes account for exactly the rest of `bytes`. Does
/// not hash the entry bytes (that is `decode`'s job), so it is cheap on a large
/// cache — what `inspect` and a first look by the loader need.
pub fn read_header(bytes: &[u8]) -> Result<Header, Error> {
    parse(bytes).map(|(header, _)| header)
}

/// Reads and checks a whole cache. Nothing is returned unless everything holds:
/// all of `read_header`'s checks, and every entry's bytes against its sha256.
pub fn decode(bytes: &[u8]) -> Result<Envelope, Error> {
    let (header, data_at) = parse(bytes)?;
    // parse() proved that the sizes add up to exactly bytes.len() - data_at, so
    // the slicing below stays in bounds.
    let mut at = data_at;
    let mut spans = Vec::with_capacity(header.entries.len());
    for meta in &header.entries {
        let end = at + meta.size as usize;
        let data = &bytes[at..end];
        if sha256_hex(data) != meta.sha256 {
            return Err(Error::corrupt(format!(
                "the bytes of entry {:?} do not match its sha256",
                meta.name
            )));
        }
        spans.push((at, end));
        at = end;
    }
    // Copy only once everything is verified.
    let entries = header
        .entries
        .iter()
        .zip(spans)
        .map(|(meta, (start, end))| Entry {
            kind: meta.kind.clone(),
            name: meta.name.clone(),
            data: bytes[start..end].to_vec(),
        })
        .collect::<Vec<_>>();
    crate::manifest::check_paths(&entries)?;
    Ok(Envelope { header, entries })
}

/// The checked header and the offset where entry bytes start.
fn parse(bytes: &[u8]) -> Result<(Header, usize), Error> {
    if bytes.len() < MAGIC.len() {
        // A prefix of our magic (an empty file included) is a cut-off cache of ours.
        return if MAGIC.starts_with(bytes) {
            Err(Error::corrupt(format!(
                "truncated: {} bytes, shorter than the 8-byte magic",
                bytes.len()
            )))
        } else {
            Err(Error::NotAnEnvelope)
        };
    }
    if bytes[..VERSION_AT] != MAGIC {
        return Err(Error::NotAnEnvelope);
    }
    let version = u32::from_le_bytes(field(bytes, VERSION_AT, "the format version")?);
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let header_len = u64::from_le_bytes(field(bytes, HEADER_LEN_AT, "the header length")?);

    // Bound header_len by what is actually there before using it for anything.
    // (Found by the fuzzer: `n <= room.saturating_sub(32)` let a zero length
    // through when fewer than 32 checksum bytes were left.)
    let room = bytes.len() - HEADER_AT;
    let json_len = match usize::try_from(header_len) {
        Ok(n) if room >= CHECKSUM_LEN && n <= room - CHECKSUM_LEN => n,
        _ => {
            return Err(Error::corrupt(format!(
                "truncated or bad header length: the header claims {header_len} bytes \
                 plus a 32-byte checksum, but only {room} bytes follow the length field"
            )))
        }
    };
    let checksum_at = HEADER_AT + json_len;
    let data_at = checksum_at + CHECKSUM_LEN;
    if Sha256::digest(&bytes[..checksum_at])[..] != bytes[checksum_at..data_at] {
        return Err(Error::corrupt("the header checksum does not match"));
    }

    let header: Header = serde_json::from_slice(&bytes[HEADER_AT..checksum_at])
        .map_err(|e| Error::corrupt(format!("the header is not valid header JSON: {e}")))?;
    if header.format_version != version {
        return Err(Error::corrupt(format!(
            "the header says format version {} but the file is version {version}",
            header.format_version
        )));
    }
    check_header(&header)
        .map_err(|p| Error::corrupt(format!("header field `{}`: {}", p.field, p.why)))?;
    validate_entry_names(header.entries.iter().map(|e| e.name.as_str()))?;

    let data_len = (bytes.len() - data_at) as u64;
    let mut need: u64 = 0;
    for e in &header.entries {
        need = need
            .checked_add(e.size)
            .ok_or_else(|| Error::corrupt("the entry sizes add up to more than 2^64 bytes"))?;
    }
    if need > data_len {
        return Err(Error::corrupt(format!(
            "truncated: the entries need {need} bytes but only {data_len} follow the header"
        )));
    }
    if need < data_len {
        return Err(Error::corrupt(format!(
            "{} unexpected bytes after the last entry",
            data_len - need
        )));
    }
    Ok((header, data_at))
}

fn check_header(header: &Header) -> Result<(), FieldProblem> {
    check_code_hash(&header.code_hash)?;
    for e in &header.entries {
        check_kind(&e.kind)?;
        check_entry_sha256(&e.name, &e.sha256)?;
    }
    Ok(())
}

/// The fixed-size field at `at`, or a truncation error naming it.
fn field<const N: usize>(bytes: &[u8], at: usize, what: &str) -> Result<[u8; N], Error> {
    bytes
        .get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| {
            Error::corrupt(format!(
                "truncated: {} bytes, the file ends inside {what}",
                bytes.len()
            ))
        })
}

#[cfg(test)]
pub(crate) mod tests;
