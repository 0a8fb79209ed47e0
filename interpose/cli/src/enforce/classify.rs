//! What one exec runs, as the kernel will run it: the program file is
//! identified by its bytes when it is a copy of a host compiler, a `#!`
//! script by its interpreter (chain), the dynamic loader by the program it
//! loads. The rules themselves are `policy`'s, the shim's own.

use std::io::Read;
use std::path::Path;

use policy::classify::{is_loader, loader_program};
use policy::script::{shebang, HEAD};
use policy::{Kind, Rules};

use super::known::Known;
use super::target::{Program, Target};

/// The kernel follows this many interpreters (its recursion limit); the
/// loader counts as one level too. Deeper: refused rather than guessed.
const MAX_DEPTH: usize = 5;

pub struct Found {
    pub kind: Kind,
    /// Set when a program was recognised by its bytes under another name:
    /// (the name it ran under, the host program it is).
    pub copy_of: Option<(Vec<u8>, String)>,
}

/// An exec the supervisor could not look at: refused, with this reason.
pub type Unchecked = String;

pub fn classify(
    rules: &Rules,
    known: &mut Known,
    target: &Target,
    program: Program,
    exe: &[u8],
    argv: &[&[u8]],
    depth: usize,
) -> Result<Found, Unchecked> {
    let other = Found {
        kind: Kind::Other,
        copy_of: None,
    };
    let opened = match program {
        Program::Missing | Program::NotRegular => return Ok(other),
        Program::Unreadable => {
            return Err(format!(
                "cannot read `{}` to check what it is (make it readable)",
                String::from_utf8_lossy(exe)
            ))
        }
        Program::Readable(o) => o,
    };
    let ident = known.identify(&opened).map(Path::to_path_buf);
    let resolved = ident.as_deref().unwrap_or(&opened.real);
    let resolved_bytes = resolved.as_os_str().as_encoded_bytes();
    let kind = rules.classify(exe, Some(resolved_bytes), argv.iter().copied());
    if kind != Kind::Other {
        let copy_of = ident
            .filter(|p| p.file_name().map(|n| n.as_encoded_bytes()) != Some(basename(exe)))
            .map(|p| (exe.to_vec(), p.display().to_string()));
        return Ok(Found { kind, copy_of });
    }
    if depth >= MAX_DEPTH {
        return Ok(Found {
            kind: Kind::Compile,
            copy_of: None,
        });
    }
    if is_loader(exe) || is_loader(resolved_bytes) {
        // `ld.so [options] PROGRAM ARGS`: the loader opens PROGRAM by path
        let mut rest = argv.iter().skip(1).copied();
        let Some(prog) = loader_program(&mut rest) else {
            return Ok(other);
        };
        let line: Vec<&[u8]> = std::iter::once(prog).chain(rest).collect();
        let next = target
            .program(None, prog, false, false)
            .map_err(|e| cannot_open(prog, &e))?;
        return classify(rules, known, target, next, prog, &line, depth + 1);
    }
    let mut head = [0u8; HEAD];
    let n = read_head(&opened.file, &mut head);
    if let Some((interp, arg)) = shebang(&head[..n]) {
        // the kernel runs `interp [arg] SCRIPT ARGS...`, SCRIPT as exec'd
        let line: Vec<&[u8]> = std::iter::once(interp)
            .chain(arg)
            .chain(std::iter::once(exe))
            .chain(argv.iter().skip(1).copied())
            .collect();
        let next = target
            .program(None, interp, false, false)
            .map_err(|e| cannot_open(interp, &e))?;
        return classify(rules, known, target, next, interp, &line, depth + 1);
    }
    Ok(other)
}

fn cannot_open(path: &[u8], e: &std::io::Error) -> Unchecked {
    format!(
        "cannot open `{}` as the process would: {e}",
        String::from_utf8_lossy(path)
    )
}

fn basename(path: &[u8]) -> &[u8] {
    path.rsplit(|&b| b == b'/').next().unwrap_or(path)
}

fn read_head(mut file: &std::fs::File, head: &mut [u8]) -> usize {
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(m) => n += m,
        }
    }
    n
}
