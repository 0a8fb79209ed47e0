//! The audited border between C pointers and typed Rust values.
//!
//! Every raw pointer the hooks receive becomes a typed value here, in one
//! function per shape: a C string ([`c_str`]) and a NULL-terminated array of C
//! strings, argv or envp ([`CStrArray::from_raw`]). Nothing here allocates,
//! locks or panics: it runs in the exec path, possibly in a vfork child.

use core::ffi::{c_char, CStr};
use core::marker::PhantomData;

/// A C `char *const *` (argv or envp): a NULL-terminated array of C strings.
#[derive(Clone, Copy)]
pub struct CStrArray<'a> {
    ptr: *const *const c_char,
    _borrow: PhantomData<&'a CStr>,
}

impl<'a> CStrArray<'a> {
    /// The audited conversion for argv/envp. A null `ptr` is an empty array
    /// (Linux's `execve` treats a null argv or envp the same way).
    ///
    /// # Safety
    ///
    /// `ptr` is null, or points to an array of pointers ending in a null
    /// pointer, each before it pointing to a NUL-terminated string; the array
    /// and the strings stay valid and unchanged for `'a`.
    pub unsafe fn from_raw(ptr: *const *const c_char) -> CStrArray<'a> {
        CStrArray {
            ptr,
            _borrow: PhantomData,
        }
    }

    /// An empty array (what a null pointer means).
    #[cfg(test)]
    pub fn empty() -> CStrArray<'a> {
        CStrArray {
            ptr: core::ptr::null(),
            _borrow: PhantomData,
        }
    }

    /// The pointer as the caller handed it (null stays null).
    pub fn as_ptr(self) -> *const *const c_char {
        self.ptr
    }

    pub fn iter(self) -> CStrIter<'a> {
        CStrIter {
            array: self,
            next: 0,
        }
    }

    /// Each entry's bytes, without the NUL: the shape `policy` classifies.
    pub fn bytes(self) -> impl Iterator<Item = &'a [u8]> + Clone {
        self.iter().map(CStr::to_bytes)
    }

    #[cfg(test)]
    pub fn len(self) -> usize {
        self.iter().count()
    }

    pub fn first(self) -> Option<&'a CStr> {
        self.iter().next()
    }
}

/// Iterates a [`CStrArray`] up to its terminating null pointer.
#[derive(Clone)]
pub struct CStrIter<'a> {
    array: CStrArray<'a>,
    next: usize,
}

impl<'a> Iterator for CStrIter<'a> {
    type Item = &'a CStr;

    fn next(&mut self) -> Option<&'a CStr> {
        if self.array.ptr.is_null() {
            return None;
        }
        // SAFETY: `from_raw`'s contract: the array is terminated by a null
        // pointer and `next` never moves past it (we stop at the null below),
        // so `ptr + next` is inside the array.
        let slot = unsafe { self.array.ptr.add(self.next) };
        // SAFETY: `slot` is inside the live array (see above).
        let entry = unsafe { *slot };
        // SAFETY: `from_raw`'s contract: every non-null entry is a valid C
        // string that outlives 'a; a null entry ends the array.
        let s = unsafe { c_str(entry) }?;
        self.next = self.next.saturating_add(1);
        Some(s)
    }
}

/// The audited conversion for one C string; `None` for a null pointer.
///
/// # Safety
///
/// `ptr` is null or points to a NUL-terminated string that stays valid and
/// unchanged for `'a`.
pub unsafe fn c_str<'a>(ptr: *const c_char) -> Option<&'a CStr> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null, and the caller guarantees NUL termination and lifetime.
    Some(unsafe { CStr::from_ptr(ptr) })
}

/// The process environment (`environ`), read without `std::env` (which takes
/// a lock) and without copying.
///
/// # Safety
///
/// No other thread may modify the environment while the returned array is
/// used (the same contract as `getenv`). In a vfork child or between fork
/// and exec only the calling thread exists.
pub unsafe fn environ<'a>() -> CStrArray<'a> {
    extern "C" {
        static environ: *const *const c_char;
    }
    // SAFETY: reading the libc global; the caller excludes concurrent writes.
    let ptr = unsafe { environ };
    // SAFETY: libc keeps `environ` a NULL-terminated array of C strings
    // (or null); the caller guarantees it is not changed while in use.
    unsafe { CStrArray::from_raw(ptr) }
}

/// The value of `name` in `env` (the first `NAME=` entry), as bytes.
pub fn lookup<'a>(env: CStrArray<'a>, name: &[u8]) -> Option<&'a [u8]> {
    env.bytes().find_map(|entry| value_of(entry, name))
}

/// `Some(value)` when `entry` is `name=value`.
pub fn value_of<'a>(entry: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let rest = entry.strip_prefix(name)?;
    rest.strip_prefix(b"=")
}

/// The last path component (after the final `/`).
pub fn basename(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => path.get(i.saturating_add(1)..).unwrap_or(b""),
        None => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// Fake C data: owned strings plus the NULL-terminated pointer array.
    struct Fake {
        _strings: Vec<CString>,
        ptrs: Vec<*const c_char>,
    }

    fn fake(items: &[&str]) -> Fake {
        let strings: Vec<CString> = items.iter().map(|s| CString::new(*s).unwrap()).collect();
        let mut ptrs: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        Fake {
            _strings: strings,
            ptrs,
        }
    }

    #[test]
    fn iterates_until_the_null_terminator() {
        let f = fake(&["g++", "-c", "a.c"]);
        // SAFETY: `f` owns a NULL-terminated array of C strings alive for the test.
        let a = unsafe { CStrArray::from_raw(f.ptrs.as_ptr()) };
        let got: Vec<&[u8]> = a.bytes().collect();
        assert_eq!(got, vec![&b"g++"[..], b"-c", b"a.c"]);
        assert_eq!(a.len(), 3);
        assert_eq!(a.first().unwrap().to_bytes(), b"g++");
    }

    #[test]
    fn a_null_array_is_empty() {
        // SAFETY: null is explicitly allowed.
        let a = unsafe { CStrArray::from_raw(std::ptr::null()) };
        assert_eq!(a.len(), 0);
        assert!(a.first().is_none());
        assert_eq!(CStrArray::empty().len(), 0);
    }

    #[test]
    fn an_array_of_only_the_terminator_is_empty() {
        let f = fake(&[]);
        // SAFETY: a one-element array holding the terminator.
        let a = unsafe { CStrArray::from_raw(f.ptrs.as_ptr()) };
        assert_eq!(a.len(), 0);
    }

    #[test]
    fn iterator_clones_restart_independently() {
        let f = fake(&["a", "b"]);
        // SAFETY: as above.
        let a = unsafe { CStrArray::from_raw(f.ptrs.as_ptr()) };
        let mut it = a.bytes();
        assert_eq!(it.next(), Some(&b"a"[..]));
        let rest: Vec<_> = it.clone().collect();
        assert_eq!(rest, vec![&b"b"[..]]);
        assert_eq!(it.next(), Some(&b"b"[..]));
    }

    #[test]
    fn lookup_finds_the_first_exact_name() {
        let f = fake(&["PATHX=no", "PATH=/bin:/usr/bin", "PATH=/second"]);
        // SAFETY: as above.
        let a = unsafe { CStrArray::from_raw(f.ptrs.as_ptr()) };
        assert_eq!(lookup(a, b"PATH"), Some(&b"/bin:/usr/bin"[..]));
        assert_eq!(lookup(a, b"HOME"), None);
        assert_eq!(value_of(b"A=", b"A"), Some(&b""[..]));
        assert_eq!(value_of(b"A", b"A"), None);
    }

    #[test]
    fn c_str_of_null_is_none() {
        // SAFETY: null is explicitly allowed.
        assert!(unsafe { c_str(std::ptr::null()) }.is_none());
        let s = CString::new("x").unwrap();
        // SAFETY: `s` is a live C string.
        assert_eq!(unsafe { c_str(s.as_ptr()) }.unwrap().to_bytes(), b"x");
    }

    #[test]
    fn basename_takes_the_last_component() {
        assert_eq!(basename(b"/usr/bin/g++"), b"g++");
        assert_eq!(basename(b"g++"), b"g++");
        assert_eq!(basename(b"/usr/bin/"), b"");
    }
}
