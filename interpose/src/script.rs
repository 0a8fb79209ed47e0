//! `#!` scripts: the kernel runs the interpreter the first line names, with
//! `[interpreter, optional argument, script, script's arguments…]`, so a
//! script whose interpreter is a compiler (`#!/usr/bin/as`) is a compiler
//! run. Interpreters that are scripts themselves are followed as the kernel
//! follows them. Stack buffers and raw system calls only: exec path.

use core::ffi::CStr;

use policy::{Kind, Rules};

use crate::raw::CStrArray;
use crate::resolve::{resolve_symlinks, PATH_BUF};
use crate::sys;

use policy::script::HEAD;
/// How many interpreters deep the kernel follows (its recursion limit).
const MAX_DEPTH: usize = 4;
/// Arguments ahead of the script's own at the deepest level: an interpreter
/// and its optional argument per level, plus the script.
const MAX_PREFIX: usize = 2 * (MAX_DEPTH + 1);

/// What running `script` with `argv` runs when it is a `#!` script whose
/// interpreter chain reaches a compiler; `Kind::Other` otherwise. `first`:
/// the script's first bytes when the caller has read them already.
pub fn kind(rules: &Rules, script: &CStr, first: Option<&[u8]>, argv: CStrArray<'_>) -> Kind {
    follow(rules, script, first, &[], argv, 0)
}

/// `after`: what the kernel puts after `script` on the interpreter's command
/// line (the levels above); then `argv[1..]`.
fn follow(
    rules: &Rules,
    script: &CStr,
    first: Option<&[u8]>,
    after: &[&[u8]],
    argv: CStrArray<'_>,
    depth: usize,
) -> Kind {
    let (mut head, mut interp_buf) = ([0u8; HEAD], [0u8; HEAD + 1]);
    let Some((interp, arg)) = shebang(script, first, &mut head, &mut interp_buf) else {
        return Kind::Other;
    };
    let mut items: [&[u8]; MAX_PREFIX] = [b""; MAX_PREFIX];
    let mut n = 0usize;
    for item in arg
        .into_iter()
        .chain([script.to_bytes()])
        .chain(after.iter().copied())
    {
        let Some(slot) = items.get_mut(n) else {
            return Kind::Compile; // deeper than the kernel goes: refuse rather than guess
        };
        *slot = item;
        n += 1;
    }
    let prefix = items.get(..n).unwrap_or(&[]);
    let line = core::iter::once(interp.to_bytes())
        .chain(prefix.iter().copied())
        .chain(argv.bytes().skip(1));
    let mut out = [0u8; PATH_BUF];
    let resolved = resolve_symlinks(interp, &mut out);
    match rules.classify(interp.to_bytes(), resolved, line) {
        Kind::Other if depth < MAX_DEPTH => follow(rules, interp, None, prefix, argv, depth + 1),
        kind => kind,
    }
}

/// `(interpreter, optional argument)` of the file's `#!` line
/// (`policy::script::shebang`), the interpreter copied out NUL-terminated.
/// The file's first bytes are `first` when given, else read from `path`.
fn shebang<'b>(
    path: &CStr,
    first: Option<&[u8]>,
    head: &'b mut [u8; HEAD],
    interp_buf: &'b mut [u8; HEAD + 1],
) -> Option<(&'b CStr, Option<&'b [u8]>)> {
    let n = match first {
        Some(bytes) => {
            let n = bytes.len().min(HEAD);
            head.get_mut(..n)?.copy_from_slice(bytes.get(..n)?);
            n
        }
        None => sys::read_head(path, &mut head[..])?,
    };
    let head: &'b [u8] = head;
    let (interp, arg) = policy::script::shebang(head.get(..n)?)?;
    interp_buf.get_mut(..interp.len())?.copy_from_slice(interp);
    *interp_buf.get_mut(interp.len())? = 0;
    let interp = CStr::from_bytes_with_nul(interp_buf.get(..=interp.len())?).ok()?;
    Some((interp, arg))
}
