//! The journal record's formatter: one JSON line written into a caller's
//! buffer without allocating (the shim, possibly in a vfork child).
//! Truncation and escaping follow docs/CONTRACTS.md. Readers parse it with
//! serde (the CLI's `precompile journal`), outside this std-free crate.

use crate::classify::Kind;
use crate::jsonbuf::{escaped_len, measure, put_int, put_string, put_time, Out};
use crate::verdict::Verdict;

/// A record never exceeds this many bytes, newline included, so one
/// `O_APPEND` write of it stays atomic and readable.
pub const LINE_BUDGET: usize = 4096;

/// Below this a buffer cannot hold a record with its truncation markers;
/// [`format_record`] then writes nothing and returns 0.
pub const MIN_BUFFER: usize = 512;

/// Longest `exe` or `cwd` kept (escaped bytes); paths past this are cut.
const PATH_CAP: usize = 1024;
/// Longest single argument kept (escaped bytes), so one huge `-D` does not
/// push the `-o out` that follows it off the line.
const ARG_CAP: usize = 1024;
const SOURCE_CAP: usize = 32;
/// An argument is cut rather than dropped only when this much of it fits.
const MIN_CUT: usize = 32;

/// Room kept free for `, "...[N more args truncated]"` (N up to 20 digits).
const MORE_ARGS_RESERVE: usize = 2 + 1 + 4 + 20 + 22 + 1;

/// What goes into a record: raw bytes as the shim holds them.
pub struct Fields<'a, I> {
    /// Seconds since the epoch, written with 6 decimals.
    pub time: f64,
    pub pid: i64,
    pub ppid: i64,
    pub tid: i64,
    /// `RANK` as the process started with it (torchrun's global rank of a
    /// worker and of everything it starts); `None` writes no `rank` key.
    pub rank: Option<i64>,
    pub exe: &'a [u8],
    /// The arguments including `argv[0]`.
    pub argv: I,
    pub cwd: &'a [u8],
    pub kind: Kind,
    pub verdict: Verdict,
    /// `"shim"` or `"python"`.
    pub source: &'a str,
}

/// Formats one JSON line (ending in `'\n'`) into `buf`; returns the bytes
/// written. Never allocates or panics, never writes past `buf.len()` or
/// [`LINE_BUDGET`], and the line always parses as a journal record (docs/CONTRACTS.md). A buffer
/// smaller than [`MIN_BUFFER`] gets nothing (returns 0).
pub fn format_record<'a, I: Iterator<Item = &'a [u8]>>(buf: &mut [u8], f: Fields<'a, I>) -> usize {
    let limit = buf.len().min(LINE_BUDGET);
    if limit < MIN_BUFFER {
        return 0;
    }
    let tail = Tail {
        kind: f.kind,
        verdict: f.verdict,
        source: f.source,
    };
    let mut out = Out::new(&mut buf[..limit]);
    out.put(b"{\"time\": ");
    put_time(&mut out, f.time);
    out.put(b", \"pid\": ");
    put_int(&mut out, f.pid);
    out.put(b", \"ppid\": ");
    put_int(&mut out, f.ppid);
    out.put(b", \"tid\": ");
    put_int(&mut out, f.tid);
    if let Some(rank) = f.rank {
        out.put(b", \"rank\": ");
        put_int(&mut out, rank);
    }

    // Paths get a share of what the fixed parts leave; argv gets the rest.
    let fixed_tail = measure(|o| tail.put(o, b"", 0));
    let path_cap = PATH_CAP.min(limit.saturating_sub(out.pos + fixed_tail) / 4);
    let tail_len = measure(|o| tail.put(o, f.cwd, path_cap));

    out.put(b", \"exe\": ");
    put_string(&mut out, f.exe, path_cap);
    out.put(b", \"argv\": [");
    put_argv(&mut out, f.argv, limit.saturating_sub(1 + tail_len));
    out.put(b"]");
    tail.put(&mut out, f.cwd, path_cap);
    // MIN_BUFFER leaves room for every part; should a part still not fit,
    // no line beats a line that is not JSON.
    if out.overflow {
        0
    } else {
        out.pos
    }
}

/// Everything after the argv.
struct Tail<'a> {
    kind: Kind,
    verdict: Verdict,
    source: &'a str,
}

impl Tail<'_> {
    /// `, "cwd": ..., "kind": ..., "verdict": ..., "reason": ..., "source": ...}\n`
    fn put(&self, out: &mut Out, cwd: &[u8], cwd_cap: usize) {
        out.put(b", \"cwd\": ");
        put_string(out, cwd, cwd_cap);
        out.put(b", \"kind\": \"");
        out.put(self.kind.as_str().as_bytes());
        out.put(b"\", \"verdict\": \"");
        out.put(self.verdict.as_str().as_bytes());
        out.put(b"\", \"reason\": \"");
        out.put(self.verdict.reason.as_str().as_bytes());
        out.put(b"\", \"source\": ");
        put_string(out, self.source.as_bytes(), SOURCE_CAP);
        out.put(b"}\n");
    }
}

/// The argv elements, keeping the line within `end` (the position where `]`
/// goes): each argument whole if it fits, cut if part of it does, then a
/// final `"...[N more args truncated]"` for those left out.
fn put_argv<'a>(out: &mut Out, mut argv: impl Iterator<Item = &'a [u8]>, end: usize) {
    let mut first = true;
    let mut left_out: u64 = 0;
    for arg in argv.by_ref() {
        let sep = if first { 0 } else { 2 };
        // Room for this element's content, keeping the "more args" reserve.
        let room = end.saturating_sub(out.pos + sep + 2 + MORE_ARGS_RESERVE);
        let full = escaped_len(arg, room.max(ARG_CAP));
        if full > room.min(ARG_CAP) && room < MIN_CUT {
            left_out = 1;
            break;
        }
        if !first {
            out.put(b", ");
        }
        first = false;
        put_string(out, arg, room.min(ARG_CAP));
        if full > room && room <= ARG_CAP {
            break; // cut for lack of room, not by ARG_CAP: the line is full
        }
    }
    left_out += argv.fold(0u64, |n, _| n.saturating_add(1));
    if left_out > 0 {
        if !first {
            out.put(b", ");
        }
        out.put(b"\"...[");
        put_int(out, i64::try_from(left_out).unwrap_or(i64::MAX));
        out.put(b" more args truncated]\"");
    }
}
