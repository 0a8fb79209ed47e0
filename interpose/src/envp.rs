//! The environment an exec hands its child: the caller's, plus what keeps the
//! child inside the lockdown (`LD_PRELOAD` with this library first, the
//! lockdown and journal variables, the startup settings), even when the
//! caller passed a scrubbed or empty environment.
//!
//! Built in a fixed buffer on the stack (a pointer array plus the bytes of
//! the one entry that must be composed, `LD_PRELOAD`); the caller's strings
//! are pointed to, never copied. When the caller's environment already says
//! all of it, it is passed through untouched. When a new one does not fit,
//! the exec is refused with `E2BIG` (fail closed).

use core::ffi::{c_char, c_int, CStr};

use crate::buf::Writer;
use crate::raw::{basename, value_of, CStrArray};

/// Most entries a rebuilt environment may hold (32 KiB of pointers).
pub const MAX_ENV: usize = 4096;
/// Room for the composed `LD_PRELOAD=…` entry.
pub const PRELOAD_BUF: usize = 8192;

const LD_PRELOAD: &[u8] = b"LD_PRELOAD";
/// The library's file name: any preload entry with it is a copy of us.
const SELF_NAME: &[u8] = b"libprecompile.so";
pub const LOCKED_ENTRY: &CStr = c"TORCH_PRECOMPILE_NO_COMPILATION=1";

/// What the child must carry.
pub struct Wanted<'a> {
    /// This library's absolute path; `None` (self unknown) skips the preload.
    pub preload: Option<&'a [u8]>,
    /// Whole `NAME=value` entries that must be present exactly once, as
    /// given (lockdown, journal, startup settings).
    pub forced: &'a [&'a CStr],
    /// Names that must be absent (a setting that would loosen the lockdown
    /// when it was not set where the lockdown started).
    pub stripped: &'a [&'a [u8]],
}

/// The variable name of a `NAME=value` entry.
fn name_of(entry: &[u8]) -> &[u8] {
    let end = entry.iter().position(|&b| b == b'=').unwrap_or(entry.len());
    entry.get(..end).unwrap_or(entry)
}

/// The `ld.so` separators: colons and spaces.
fn preload_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b':' || b == b' ')
        .filter(|s| !s.is_empty())
}

fn is_self(item: &[u8], me: &[u8]) -> bool {
    item == me || basename(item) == SELF_NAME
}

/// True when `env` already carries everything `wanted` asks for.
fn satisfied(env: CStrArray<'_>, wanted: &Wanted<'_>) -> bool {
    if let Some(me) = wanted.preload {
        let mut values = env.bytes().filter_map(|e| value_of(e, LD_PRELOAD));
        let Some(value) = values.next() else {
            return false;
        };
        if values.next().is_some() {
            return false;
        }
        let mut items = preload_items(value);
        if items.next() != Some(me) || items.any(|i| is_self(i, me)) {
            return false;
        }
    }
    if env.bytes().any(|e| wanted.stripped.contains(&name_of(e))) {
        return false;
    }
    wanted.forced.iter().all(|want| {
        let name = name_of(want.to_bytes());
        let mut same_name = env.bytes().filter(|e| name_of(e) == name);
        same_name.next() == Some(want.to_bytes()) && same_name.next().is_none()
    })
}

fn is_managed(entry: &[u8], wanted: &Wanted<'_>) -> bool {
    let name = name_of(entry);
    (wanted.preload.is_some() && name == LD_PRELOAD)
        || wanted.forced.iter().any(|w| name_of(w.to_bytes()) == name)
        || wanted.stripped.contains(&name)
}

/// The stack space a rebuilt environment lives in.
pub struct Space {
    ptrs: [*const c_char; MAX_ENV],
    preload: [u8; PRELOAD_BUF],
}

impl Space {
    pub fn new() -> Space {
        Space {
            ptrs: [core::ptr::null(); MAX_ENV],
            preload: [0; PRELOAD_BUF],
        }
    }
}

/// Builds the child's environment in `space`; `Err(E2BIG)` when it does not
/// fit (the caller refuses the exec).
pub fn build(
    env: CStrArray<'_>,
    wanted: &Wanted<'_>,
    space: &mut Space,
) -> Result<*const *const c_char, c_int> {
    let Space { ptrs, preload } = space;
    let mut n = 0usize;
    let mut push = |p: *const c_char| -> Result<(), c_int> {
        let slot = ptrs.get_mut(n).ok_or(libc::E2BIG)?;
        *slot = p;
        n = n.saturating_add(1);
        Ok(())
    };
    for entry in env.iter() {
        if !is_managed(entry.to_bytes(), wanted) {
            push(entry.as_ptr())?;
        }
    }
    if let Some(me) = wanted.preload {
        let mut w = Writer::new(&mut preload[..]);
        w.push(LD_PRELOAD).push(b"=").push(me);
        for value in env.bytes().filter_map(|e| value_of(e, LD_PRELOAD)) {
            for item in preload_items(value).filter(|i| !is_self(i, me)) {
                w.push(b":").push(item);
            }
        }
        let entry = w.as_c_str().ok_or(libc::E2BIG)?;
        push(entry.as_ptr())?;
    }
    for want in wanted.forced {
        push(want.as_ptr())?;
    }
    push(core::ptr::null())?;
    Ok(ptrs.as_ptr())
}

/// Runs `f` with the environment the child must get: `env` itself when it
/// already carries everything, else a rebuilt one on this stack frame.
pub fn with_env<R>(
    env: CStrArray<'_>,
    wanted: &Wanted<'_>,
    f: impl FnOnce(*const *const c_char) -> R,
) -> Result<R, c_int> {
    if satisfied(env, wanted) {
        return Ok(f(env.as_ptr()));
    }
    let mut space = Space::new();
    let envp = build(env, wanted, &mut space)?;
    Ok(f(envp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

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

    fn array(f: &Fake) -> CStrArray<'_> {
        // SAFETY: `f` owns a NULL-terminated array of C strings.
        unsafe { CStrArray::from_raw(f.ptrs.as_ptr()) }
    }

    /// The environment `with_env` hands over, as strings.
    fn child_env(env: &[&str], wanted: &Wanted<'_>) -> (bool, Vec<String>) {
        let f = fake(env);
        let a = array(&f);
        with_env(a, wanted, |p| {
            // SAFETY: `p` is `a` itself or an array built from it, alive here.
            let out = unsafe { CStrArray::from_raw(p) };
            (
                p == a.as_ptr(),
                out.iter().map(|s| s.to_str().unwrap().to_owned()).collect(),
            )
        })
        .unwrap()
    }

    const ME: &[u8] = b"/opt/pc/libprecompile.so";

    #[test]
    fn an_empty_environment_gets_the_preload_and_the_forced_entries() {
        let journal = c"PRECOMPILE_JOURNAL=/tmp/j";
        let forced = [LOCKED_ENTRY, journal];
        let w = Wanted {
            preload: Some(ME),
            forced: &forced,
            stripped: &[],
        };
        let (same, env) = child_env(&[], &w);
        assert!(!same);
        assert_eq!(
            env,
            vec![
                "LD_PRELOAD=/opt/pc/libprecompile.so",
                "TORCH_PRECOMPILE_NO_COMPILATION=1",
                "PRECOMPILE_JOURNAL=/tmp/j"
            ]
        );
    }

    #[test]
    fn a_null_environment_is_treated_as_empty() {
        let w = Wanted {
            preload: Some(ME),
            forced: &[],
            stripped: &[],
        };
        let a = CStrArray::empty();
        let got = with_env(a, &w, |p| {
            // SAFETY: built by `build`, alive inside the closure.
            let out = unsafe { CStrArray::from_raw(p) };
            out.iter()
                .map(|s| s.to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .unwrap();
        assert_eq!(got, vec!["LD_PRELOAD=/opt/pc/libprecompile.so"]);
    }

    #[test]
    fn other_preloads_are_kept_after_ours_without_duplicates() {
        let w = Wanted {
            preload: Some(ME),
            forced: &[],
            stripped: &[],
        };
        let (_, env) = child_env(
            &[
                "A=1",
                "LD_PRELOAD=libfoo.so /x/libprecompile.so:/opt/pc/libprecompile.so:libbar.so",
                "B=2",
            ],
            &w,
        );
        assert_eq!(
            env,
            vec![
                "A=1",
                "B=2",
                "LD_PRELOAD=/opt/pc/libprecompile.so:libfoo.so:libbar.so"
            ]
        );
    }

    #[test]
    fn a_complete_environment_passes_through_untouched() {
        let forced = [LOCKED_ENTRY];
        let w = Wanted {
            preload: Some(ME),
            forced: &forced,
            stripped: &[],
        };
        let env = [
            "PATH=/bin",
            "LD_PRELOAD=/opt/pc/libprecompile.so:libfoo.so",
            "TORCH_PRECOMPILE_NO_COMPILATION=1",
        ];
        let (same, got) = child_env(&env, &w);
        assert!(same);
        assert_eq!(got, env);
    }

    #[test]
    fn a_wrong_or_duplicated_value_is_replaced() {
        let forced = [LOCKED_ENTRY];
        let w = Wanted {
            preload: Some(ME),
            forced: &forced,
            stripped: &[],
        };
        let (same, got) = child_env(
            &[
                "TORCH_PRECOMPILE_NO_COMPILATION=0",
                "LD_PRELOAD=/opt/pc/libprecompile.so",
                "TORCH_PRECOMPILE_NO_COMPILATION=1",
            ],
            &w,
        );
        assert!(!same);
        assert_eq!(
            got,
            vec![
                "LD_PRELOAD=/opt/pc/libprecompile.so",
                "TORCH_PRECOMPILE_NO_COMPILATION=1"
            ]
        );
        // our library present but not first
        let (same, got) = child_env(&["LD_PRELOAD=libfoo.so:/opt/pc/libprecompile.so"], &w);
        assert!(!same);
        assert_eq!(got[0], "LD_PRELOAD=/opt/pc/libprecompile.so:libfoo.so");
    }

    #[test]
    fn unmanaged_variables_are_left_alone() {
        // not locked: a caller's own TORCH_PRECOMPILE_NO_COMPILATION stays
        let w = Wanted {
            preload: Some(ME),
            forced: &[],
            stripped: &[],
        };
        let (_, got) = child_env(&["TORCH_PRECOMPILE_NO_COMPILATION=1"], &w);
        assert_eq!(
            got,
            vec![
                "TORCH_PRECOMPILE_NO_COMPILATION=1",
                "LD_PRELOAD=/opt/pc/libprecompile.so"
            ]
        );
        // nothing wanted at all: untouched, even when null
        let w = Wanted {
            preload: None,
            forced: &[],
            stripped: &[],
        };
        let (same, _) = child_env(&["X=1"], &w);
        assert!(same);
    }

    #[test]
    fn too_many_entries_fail_closed_with_e2big() {
        let many: Vec<String> = (0..MAX_ENV).map(|i| format!("V{i}=x")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let f = fake(&refs);
        let w = Wanted {
            preload: Some(ME),
            forced: &[],
            stripped: &[],
        };
        assert_eq!(with_env(array(&f), &w, |_| ()), Err(libc::E2BIG));
    }

    #[test]
    fn an_oversized_preload_fails_closed_with_e2big() {
        let long = format!("LD_PRELOAD={}", "x".repeat(PRELOAD_BUF));
        let f = fake(&[&long]);
        let w = Wanted {
            preload: Some(ME),
            forced: &[],
            stripped: &[],
        };
        assert_eq!(with_env(array(&f), &w, |_| ()), Err(libc::E2BIG));
    }
}
