//! `#!` lines, split as the kernel splits them, for the shim and the
//! enforced mode's supervisor alike. Pure and allocation-free: the shim
//! calls it on the exec path.

/// The kernel reads this much of a file for its `#!` line (BINPRM_BUF_SIZE).
pub const HEAD: usize = 256;

/// `(interpreter, optional argument)` of a file whose first bytes are
/// `head`: the interpreter up to the first blank, the rest of the line
/// (blanks trimmed) one argument. `None` when it is not a `#!` file.
pub fn shebang(head: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next().unwrap_or(line);
    let line = trim_blanks(line);
    let end = line.iter().position(is_blank).unwrap_or(line.len());
    let (interp, rest) = (line.get(..end)?, line.get(end..)?);
    if interp.is_empty() || interp.contains(&0) {
        return None;
    }
    let arg = trim_blanks(rest);
    Some((interp, (!arg.is_empty()).then_some(arg)))
}

fn is_blank(b: &u8) -> bool {
    *b == b' ' || *b == b'\t'
}

fn trim_blanks(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !is_blank(b)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !is_blank(b))
        .map_or(start, |e| e + 1);
    s.get(start..end.max(start)).unwrap_or(b"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_as_the_kernel_splits_them() {
        assert_eq!(
            shebang(b"#!/usr/bin/as\n.text"),
            Some((&b"/usr/bin/as"[..], None))
        );
        assert_eq!(
            shebang(b"#!  /usr/bin/as  --32 -x  \n"),
            Some((&b"/usr/bin/as"[..], Some(&b"--32 -x"[..])))
        );
        assert_eq!(shebang(b"#!/bin/sh"), Some((&b"/bin/sh"[..], None)));
        assert_eq!(
            shebang(b"#!\t/bin/sh\t-e\n"),
            Some((&b"/bin/sh"[..], Some(&b"-e"[..])))
        );
        assert_eq!(shebang(b"#! \n/bin/sh"), None);
        assert_eq!(shebang(b"#!/bin\0sh"), None);
        assert_eq!(shebang(b"\x7fELF"), None);
        assert_eq!(shebang(b""), None);
    }
}
