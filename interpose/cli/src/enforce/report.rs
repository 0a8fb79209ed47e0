//! What a refusal leaves behind: one stderr line worded like the shim's, and
//! one journal record in the shim's format (`source: "enforce"`).

use std::io::Write;
use std::path::Path;

use policy::{Kind, Verdict};

/// The command is cut past this many bytes (as the shim cuts it).
const COMMAND_MAX: usize = 600;

pub struct Refusal<'a> {
    pub tgid: i32,
    pub tid: i32,
    pub ppid: i32,
    pub rank: Option<i64>,
    pub exe: &'a [u8],
    pub argv: &'a [&'a [u8]],
    pub cwd: &'a [u8],
    pub kind: Kind,
    pub verdict: Verdict,
    /// (the name it ran under, the host compiler it is a copy of)
    pub copy_of: Option<&'a (Vec<u8>, String)>,
}

fn command(exe: &[u8], argv: &[&[u8]]) -> String {
    let mut s = Vec::new();
    for (i, arg) in argv.iter().enumerate() {
        if s.len() + arg.len() > COMMAND_MAX {
            s.extend_from_slice(b" ...");
            break;
        }
        if i > 0 {
            s.push(b' ');
        }
        s.extend_from_slice(arg);
    }
    if argv.is_empty() {
        s.extend_from_slice(exe);
    }
    String::from_utf8_lossy(&s).into_owned()
}

pub fn refused_line(r: &Refusal<'_>) -> String {
    let what = if r.kind == Kind::Probe {
        "compiler probe"
    } else {
        "compiler"
    };
    let copy = r.copy_of.map_or(String::new(), |(name, host)| {
        format!("; `{}` is a copy of {host}", String::from_utf8_lossy(name))
    });
    format!(
        "precompile: refused to run {what} `{}` (pid {}, enforced{copy}): {}; \
         capture it ahead of time or run outside the lockdown\n",
        command(r.exe, r.argv),
        r.tgid,
        r.verdict.reason.explain()
    )
}

/// The line when an exec is refused because it could not be checked.
pub fn unchecked_line(tgid: i32, exe: &[u8], why: &str) -> String {
    format!(
        "precompile: refused to run `{}` (pid {tgid}, enforced): {why}\n",
        String::from_utf8_lossy(exe)
    )
}

pub fn stderr(line: &str) {
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Appends the record with one `O_APPEND` write, as the shim does, so lines
/// from the tree and from here never interleave. A journal that cannot be
/// opened loses the record; the refusal stands either way.
pub fn journal(path: &Path, r: &Refusal<'_>) {
    let mut line = [0u8; policy::journal::LINE_BUDGET];
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let n = policy::journal::format_record(
        &mut line,
        policy::journal::Fields {
            time,
            pid: r.tgid.into(),
            ppid: r.ppid.into(),
            tid: r.tid.into(),
            rank: r.rank,
            exe: r.exe,
            argv: r.argv.iter().copied(),
            cwd: r.cwd,
            kind: r.kind,
            verdict: r.verdict,
            source: "enforce",
        },
    );
    if n == 0 {
        return;
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        let _ = f.write_all(&line[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::Reason;

    #[test]
    fn the_line_names_the_command_the_copy_and_the_reason() {
        let copy = (
            b"./notacompiler".to_vec(),
            "/usr/lib/gcc/x/12/cc1plus".to_owned(),
        );
        let argv: [&[u8]; 3] = [b"./notacompiler", b"-quiet", b"a.cc"];
        let r = Refusal {
            tgid: 7,
            tid: 8,
            ppid: 1,
            rank: None,
            exe: b"./notacompiler",
            argv: &argv,
            cwd: b"/tmp",
            kind: Kind::Compile,
            verdict: Verdict {
                allowed: false,
                reason: Reason::StartupLockdown,
            },
            copy_of: Some(&copy),
        };
        let line = refused_line(&r);
        assert!(line.starts_with(
            "precompile: refused to run compiler `./notacompiler -quiet a.cc` (pid 7, enforced; \
             `./notacompiler` is a copy of /usr/lib/gcc/x/12/cc1plus): TORCH_PRECOMPILE_NO_COMPILATION=1"
        ), "{line}");
        assert!(line.ends_with("outside the lockdown\n"));

        let dir = std::env::temp_dir().join(format!("precompile-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let j = dir.join("j.jsonl");
        journal(&j, &r);
        let text = std::fs::read_to_string(&j).unwrap();
        let rec = crate::journal::parse_line(text.trim_end()).unwrap();
        assert_eq!((rec.pid, rec.tid, rec.source.as_str()), (7, 8, "enforce"));
        assert_eq!(
            (rec.kind.as_str(), rec.verdict.as_str()),
            ("compile", "refused")
        );
        assert_eq!(rec.argv, ["./notacompiler", "-quiet", "a.cc"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
