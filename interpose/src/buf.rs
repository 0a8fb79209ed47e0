//! Formatting into a fixed, caller-provided buffer: no allocation, no panic.
//!
//! Two uses with different needs: a message (a stderr line) is cut when it
//! does not fit and says so; a path or an environment entry must never be
//! cut, so the caller checks [`Writer::overflowed`] and fails closed.

use core::ffi::CStr;

pub struct Writer<'a> {
    buf: &'a mut [u8],
    len: usize,
    overflowed: bool,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Writer<'a> {
        Writer {
            buf,
            len: 0,
            overflowed: false,
        }
    }

    /// Appends as much of `bytes` as fits; remembers when something did not.
    pub fn push(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            match self.buf.get_mut(self.len) {
                Some(slot) => {
                    *slot = b;
                    self.len = self.len.saturating_add(1);
                }
                None => {
                    self.overflowed = true;
                    break;
                }
            }
        }
        self
    }

    pub fn push_str(&mut self, s: &str) -> &mut Self {
        self.push(s.as_bytes())
    }

    /// A decimal integer (negative numbers with a leading `-`).
    pub fn push_int(&mut self, n: i64) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        let mut v = n.unsigned_abs();
        loop {
            i = i.saturating_sub(1);
            if let Some(d) = digits.get_mut(i) {
                // `v % 10` is below 10, so the cast cannot truncate.
                *d = b'0' + (v % 10) as u8;
            }
            v /= 10;
            if v == 0 || i == 0 {
                break;
            }
        }
        if n < 0 {
            self.push(b"-");
        }
        self.push(digits.get(i..).unwrap_or(b""))
    }

    /// True when some pushed byte did not fit.
    #[cfg(test)]
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(b"")
    }

    /// Cuts the content back to `len` bytes (no-op when already shorter).
    pub fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.len = len;
        }
    }

    /// Ends a message: when something was cut, overwrites the tail with
    /// `marker` (so the reader sees the cut) and always ends with `\n`.
    pub fn finish_line(&mut self, marker: &[u8]) -> &[u8] {
        let room = self.buf.len();
        let need = marker.len().saturating_add(1);
        if self.overflowed || self.len.saturating_add(1) > room {
            self.truncate(room.saturating_sub(need));
            self.overflowed = false;
            self.push(marker);
        }
        self.push(b"\n");
        self.as_bytes()
    }

    /// NUL-terminates the content and returns it as a C string; `None` when
    /// it overflowed (a path must never be cut) or contains a NUL byte.
    pub fn as_c_str(&mut self) -> Option<&CStr> {
        if self.overflowed {
            return None;
        }
        let end = self.len;
        self.push(b"\0");
        if self.overflowed {
            return None;
        }
        self.len = end;
        let with_nul = self.buf.get(..end.saturating_add(1))?;
        CStr::from_bytes_with_nul(with_nul).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_and_formats_integers() {
        let mut b = [0u8; 64];
        let mut w = Writer::new(&mut b);
        w.push(b"pid ")
            .push_int(123)
            .push_str(" ")
            .push_int(-7)
            .push_str(" ")
            .push_int(0);
        assert_eq!(w.as_bytes(), b"pid 123 -7 0");
        assert!(!w.overflowed());
        let mut b = [0u8; 32];
        let mut w = Writer::new(&mut b);
        w.push_int(i64::MIN);
        assert_eq!(w.as_bytes(), b"-9223372036854775808");
    }

    #[test]
    fn overflow_is_remembered_not_a_panic() {
        let mut b = [0u8; 4];
        let mut w = Writer::new(&mut b);
        w.push(b"abcdef");
        assert_eq!(w.as_bytes(), b"abcd");
        assert!(w.overflowed());
        assert!(w.as_c_str().is_none());
    }

    #[test]
    fn a_cut_line_ends_with_the_marker_and_a_newline() {
        let mut b = [0u8; 10];
        let mut w = Writer::new(&mut b);
        w.push(b"0123456789abcdef");
        assert_eq!(w.finish_line(b"..."), b"012345...\n");
        let mut b = [0u8; 10];
        let mut w = Writer::new(&mut b);
        w.push(b"short");
        assert_eq!(w.finish_line(b"..."), b"short\n");
        // exactly full: no room for the newline, so it is cut too
        let mut b = [0u8; 5];
        let mut w = Writer::new(&mut b);
        w.push(b"12345");
        assert_eq!(w.finish_line(b"~"), b"123~\n");
    }

    #[test]
    fn c_str_needs_room_for_the_nul() {
        let mut b = [0u8; 4];
        let mut w = Writer::new(&mut b);
        w.push(b"abc");
        assert_eq!(w.as_c_str().unwrap().to_bytes(), b"abc");
        let mut b = [0u8; 3];
        let mut w = Writer::new(&mut b);
        w.push(b"abc");
        assert!(w.as_c_str().is_none());
        let mut b = [0u8; 8];
        let mut w = Writer::new(&mut b);
        w.push(b"a\0b");
        assert!(w.as_c_str().is_none());
    }
}
