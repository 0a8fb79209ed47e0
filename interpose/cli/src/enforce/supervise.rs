//! The supervisor loop: one notification at a time, each read from the
//! calling thread, checked still valid, classified and answered. Any failure
//! to look at an exec refuses it (fails closed); nothing here lets an exec
//! through that it did not classify.

use std::path::PathBuf;

use policy::{Lock, Rules};

use super::classify::{classify, Found, Unchecked};
use super::filter::{AUDIT_ARCH_X86_64, NR_EXECVE, NR_EXECVEAT};
use super::known::Known;
use super::listener::{Listener, Notification};
use super::report::{self, Refusal};
use super::target::{Program, Target, PATH_MAX};

pub struct Settings {
    pub rules: Rules,
    pub journal: Option<PathBuf>,
}

/// Answers every exec of the tree until the listener fails (it does not
/// while this process lives; the command's end is seen by `wait`, not here).
pub fn serve(listener: &Listener, settings: &Settings, known: &mut Known) -> std::io::Result<()> {
    loop {
        let Some(n) = listener.receive()? else {
            continue;
        };
        let errno = decide(listener, settings, known, &n);
        listener.answer(n.id, errno)?;
    }
}

/// `None`: let it run; `Some(errno)`: fail the exec with it.
fn decide(
    listener: &Listener,
    settings: &Settings,
    known: &mut Known,
    n: &Notification,
) -> Option<i32> {
    match examine(listener, settings, known, n) {
        Ok(None) => None,
        Ok(Some(())) => Some(libc::EPERM),
        Err((exe, why)) => {
            if listener.still_valid(n.id) {
                let pid = Target::open(n.tid).map_or(n.tid, |t| t.ids().0);
                report::stderr(&report::unchecked_line(pid, &exe, &why));
            }
            Some(libc::EPERM)
        }
    }
}

/// `Ok(None)`: allowed; `Ok(Some(()))`: refused and reported;
/// `Err`: could not be checked (exe, why).
fn examine(
    listener: &Listener,
    settings: &Settings,
    known: &mut Known,
    n: &Notification,
) -> Result<Option<()>, (Vec<u8>, Unchecked)> {
    let fail = |exe: &[u8], why: String| (exe.to_vec(), why);
    let nr = n.nr as u32;
    if n.arch != AUDIT_ARCH_X86_64 || (nr != NR_EXECVE && nr != NR_EXECVEAT) {
        return Err(fail(b"?", format!("unexpected system call {nr}")));
    }
    let target =
        Target::open(n.tid).map_err(|e| fail(b"?", format!("cannot read the process: {e}")))?;
    // execve(path, argv, envp) / execveat(dirfd, path, argv, envp, flags)
    let (dirfd, path_at, argv_at, flags) = if nr == NR_EXECVE {
        (None, n.args[0], n.args[1], 0)
    } else {
        let fd = n.args[0] as i32;
        let dirfd = (fd != libc::AT_FDCWD).then_some(fd);
        (dirfd, n.args[1], n.args[2], n.args[4] as i32)
    };
    let path = target
        .c_string(path_at, PATH_MAX)
        .map_err(|e| fail(b"?", format!("cannot read the path: {e}")))?;
    let argv = target
        .argv(argv_at)
        .map_err(|e| fail(&path, format!("cannot read the arguments: {e}")))?;
    // What was read came from this very exec only if it is still pending.
    if !listener.still_valid(n.id) {
        return Err(fail(&path, "the process is gone".into()));
    }
    let empty_path = flags & libc::AT_EMPTY_PATH != 0;
    let nofollow = flags & libc::AT_SYMLINK_NOFOLLOW != 0;
    let program = target
        .program(dirfd, &path, empty_path, nofollow)
        .map_err(|e| fail(&path, format!("cannot open it as the process would: {e}")))?;
    let exe: Vec<u8> = match (&program, path.is_empty()) {
        (Program::Readable(o), true) => o.real.as_os_str().as_encoded_bytes().to_vec(),
        _ => path.clone(),
    };
    let checked_file = file_id(&program);
    let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    let Found { kind, copy_of } =
        classify(&settings.rules, known, &target, program, &exe, &args, 0)
            .map_err(|why| fail(&exe, why))?;
    let verdict = policy::decide(kind, Lock::Startup, settings.rules.strict());
    if verdict.allowed {
        // The kernel reads the path and argv again once answered: narrow
        // that window (README, Limits) to these few reads by checking that
        // what it will read is still what was classified.
        let again = target.c_string(path_at, PATH_MAX).ok();
        let unchanged = again.as_deref() == Some(path.as_slice())
            && target.argv(argv_at).is_ok_and(|a| a == argv)
            && target
                .program(dirfd, &path, empty_path, nofollow)
                .is_ok_and(|p| file_id(&p) == checked_file)
            && listener.still_valid(n.id);
        if !unchanged {
            return Err(fail(
                &exe,
                "its path, arguments or file changed while it was checked".into(),
            ));
        }
        // allowed probes are journaled by the shim where it runs
        return Ok(None);
    }
    let cwd = target.cwd();
    let (tgid, ppid) = target.ids();
    let r = Refusal {
        tgid,
        tid: target.tid,
        ppid,
        rank: target.rank(),
        exe: &exe,
        argv: &args,
        cwd: &cwd,
        kind,
        verdict,
        copy_of: copy_of.as_ref(),
    };
    if let Some(j) = &settings.journal {
        report::journal(j, &r);
    }
    report::stderr(&report::refused_line(&r));
    Ok(Some(()))
}

/// The file a program resolved to, by identity; `None` when there was none
/// the supervisor could open.
fn file_id(p: &Program) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    match p {
        Program::Readable(o) => Some((o.meta.dev(), o.meta.ino())),
        _ => None,
    }
}
