//! JSON values written into a fixed buffer without allocating or panicking:
//! the pieces [`crate::journal::format_record`] is built from. Strings are
//! escaped per docs/CONTRACTS.md: UTF-8 kept, `"` and `\\` backslashed,
//! control characters and bytes that are not UTF-8 as `\u00XX` of the byte.

/// Ends a string that was cut.
pub(crate) const CUT_MARK: &[u8] = b"...[truncated]";

/// A cursor over a fixed buffer, or (with none) a counter, which is how
/// lengths are measured before committing to a layout.
pub(crate) struct Out<'b> {
    buf: Option<&'b mut [u8]>,
    pub(crate) pos: usize,
    pub(crate) overflow: bool,
}

impl<'b> Out<'b> {
    pub(crate) fn new(buf: &'b mut [u8]) -> Self {
        Out {
            buf: Some(buf),
            pos: 0,
            overflow: false,
        }
    }

    /// Writes all of `bytes` or, when they do not fit, nothing (and notes it).
    pub(crate) fn put(&mut self, bytes: &[u8]) {
        let end = self.pos.saturating_add(bytes.len());
        match &mut self.buf {
            None => self.pos = end,
            Some(buf) => match buf.get_mut(self.pos..end) {
                Some(dst) => {
                    dst.copy_from_slice(bytes);
                    self.pos = end;
                }
                None => self.overflow = true,
            },
        }
    }
}

pub(crate) fn measure(write: impl FnOnce(&mut Out)) -> usize {
    let mut counter = Out {
        buf: None,
        pos: 0,
        overflow: false,
    };
    write(&mut counter);
    counter.pos
}

/// A quoted JSON string of at most `cap` escaped content bytes; longer input
/// is cut at a character boundary and ends with `...[truncated]`.
pub(crate) fn put_string(out: &mut Out, s: &[u8], cap: usize) {
    out.put(b"\"");
    if escaped_len(s, cap) <= cap {
        for_each_unit(s, |unit| {
            out.put(unit.as_bytes(&mut [0; 6]));
            true
        });
    } else {
        let mut budget = cap.saturating_sub(CUT_MARK.len());
        for_each_unit(s, |unit| {
            let mut scratch = [0; 6];
            let bytes = unit.as_bytes(&mut scratch);
            if bytes.len() > budget {
                return false;
            }
            budget -= bytes.len();
            out.put(bytes);
            true
        });
        if cap >= CUT_MARK.len() {
            out.put(CUT_MARK);
        }
    }
    out.put(b"\"");
}

/// The escaped length of `s`, or some length past `stop` once it exceeds it
/// (a 2 MB argument is not walked to learn it will not fit in 4 KB).
pub(crate) fn escaped_len(s: &[u8], stop: usize) -> usize {
    let mut n = 0usize;
    for_each_unit(s, |unit| {
        n += unit.as_bytes(&mut [0; 6]).len();
        n <= stop
    });
    n
}

/// One indivisible piece of escaped output: cutting never splits these.
enum Unit<'s> {
    /// Valid UTF-8 passed through, one character.
    Raw(&'s [u8]),
    /// `\"` or `\\`.
    Backslashed(u8),
    /// A control character or a byte that is not UTF-8: `\u00XX` of the byte.
    Hex(u8),
}

impl Unit<'_> {
    fn as_bytes<'t>(&'t self, scratch: &'t mut [u8; 6]) -> &'t [u8] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        match self {
            Unit::Raw(bytes) => bytes,
            Unit::Backslashed(b) => {
                scratch[0] = b'\\';
                scratch[1] = *b;
                &scratch[..2]
            }
            Unit::Hex(b) => {
                *scratch = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ];
                &scratch[..]
            }
        }
    }
}

/// Walks `s` as escaped JSON units until `f` returns false.
fn for_each_unit(s: &[u8], mut f: impl FnMut(Unit) -> bool) {
    let mut rest = s;
    while !rest.is_empty() {
        let (valid, bad) = match core::str::from_utf8(rest) {
            Ok(all) => (all, 0),
            // An incomplete sequence at the end (`error_len` None) is bad bytes too.
            Err(e) => {
                let bad = e.error_len().unwrap_or(rest.len() - e.valid_up_to());
                (
                    core::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
                    bad,
                )
            }
        };
        for (i, ch) in valid.char_indices() {
            let unit = match ch {
                '"' | '\\' => Unit::Backslashed(ch as u8),
                c if (c as u32) < 0x20 => Unit::Hex(c as u8),
                _ => Unit::Raw(&valid.as_bytes()[i..i + ch.len_utf8()]),
            };
            if !f(unit) {
                return;
            }
        }
        let bad_bytes = &rest[valid.len()..valid.len() + bad];
        for &b in bad_bytes {
            if !f(Unit::Hex(b)) {
                return;
            }
        }
        rest = &rest[valid.len() + bad..];
    }
}

pub(crate) fn put_int(out: &mut Out, n: i64) {
    if n < 0 {
        out.put(b"-");
    }
    put_uint(out, n.unsigned_abs());
}

fn put_uint(out: &mut Out, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put(&digits[i..]);
}

/// `secs.micros` with exactly six decimals; not finite or negative is 0.
pub(crate) fn put_time(out: &mut Out, t: f64) {
    let t = if t.is_finite() && t > 0.0 { t } else { 0.0 };
    let mut secs = t as u64; // saturating cast
                             // Past u64 seconds the cast saturates and the difference means nothing.
    let frac = t - secs as f64;
    let frac = if (0.0..1.0).contains(&frac) {
        frac
    } else {
        0.0
    };
    let mut micros = (frac * 1e6 + 0.5) as u64;
    if micros >= 1_000_000 {
        secs = secs.saturating_add(1);
        micros -= 1_000_000;
    }
    put_uint(out, secs);
    out.put(b".");
    let mut frac = [b'0'; 6];
    for slot in frac.iter_mut().rev() {
        *slot = b'0' + (micros % 10) as u8;
        micros /= 10;
    }
    out.put(&frac);
}
