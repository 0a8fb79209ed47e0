//! `precompile run --lockdown --enforce`: the lockdown enforced by the
//! kernel for what no preload sees (raw system calls, static programs,
//! renamed compilers, a cleared `LD_PRELOAD`).
//!
//! The command is started with a seccomp filter that sends every
//! `execve`/`execveat` of its whole tree to this process
//! (`SECCOMP_RET_USER_NOTIF`); a supervisor thread here reads each one from
//! the caller, classifies it with `policy`'s rules, and answers `EPERM` or
//! lets it continue. Unlike plain `run`, this process stays: it is the
//! command's parent, forwards the usual termination signals to it, and exits
//! with its status. Should it die, every later exec in the tree fails
//! (ENOSYS): the filter fails closed.
//!
//! Modules: `filter` (the BPF program), `child` (between fork and exec),
//! `listener` (the notification ioctls), `target` (reading the caller),
//! `known` (the host's compilers by content), `classify`, `report`,
//! `supervise` (the loop), `signals`.

mod child;
mod classify;
mod filter;
mod known;
mod listener;
mod report;
mod signals;
mod supervise;
mod target;

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode};
use std::sync::mpsc;

use anyhow::{bail, Context};

pub use supervise::Settings;

const ACTIONS_AVAIL: &str = "/proc/sys/kernel/seccomp/actions_avail";

/// Fails unless this kernel and architecture can enforce.
pub fn check_available() -> anyhow::Result<()> {
    if !cfg!(target_arch = "x86_64") {
        bail!(
            "--enforce is implemented for x86_64 only (this is {}); run without --enforce \
             (the shim alone) on this machine",
            std::env::consts::ARCH
        );
    }
    let actions = std::fs::read_to_string(ACTIONS_AVAIL).with_context(|| {
        format!(
            "--enforce needs seccomp, and {ACTIONS_AVAIL} cannot be read (a kernel without \
             CONFIG_SECCOMP_FILTER, or /proc not mounted); run without --enforce"
        )
    })?;
    check_actions(&actions)
}

/// The kernel's list of seccomp actions must hold `user_notif`.
fn check_actions(actions: &str) -> anyhow::Result<()> {
    if !actions.split_whitespace().any(|a| a == "user_notif") {
        bail!(
            "--enforce needs seccomp user notification (Linux 5.5 or later), and this kernel \
             offers only `{}` in {ACTIONS_AVAIL}; run without --enforce",
            actions.trim()
        );
    }
    Ok(())
}

/// What the supervisor thread tells the main thread once it has the
/// listener (or learnt that the child could not install the filter).
enum Ready {
    Supervising,
    NoListener,
}

/// Runs `cmd` under the filter and supervises it; returns its exit status,
/// or (inner `Err`) why the command itself could not be started.
pub fn run(mut cmd: Command, settings: Settings) -> anyhow::Result<io::Result<ExitCode>> {
    check_available()?;
    // The tree runs as our user: without this it could ptrace this process
    // or take the listener from it (pidfd_getfd) and answer for itself.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    // Orphans of the tree are reparented to this process, not init, so it
    // stays their ancestor: Yama's ptrace_scope=1 lets only an ancestor read
    // a process's memory, and an exec that cannot be read is refused.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let (ours, theirs) = UnixStream::pair().context("--enforce: cannot create a socketpair")?;
    let prepared = child::Prepared::new(OwnedFd::from(theirs));
    let forwarded = signals::block_forwarded()?;

    let path_var = cmd
        .get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v.map(|v| v.to_owned()))
        .or_else(|| std::env::var_os("PATH"));
    let (ready_tx, ready_rx) = mpsc::channel();
    let ours = OwnedFd::from(ours);
    std::thread::Builder::new()
        .name("precompile-enforce".into())
        .spawn(move || {
            let mut known = known::Known::scan(&settings.rules, path_var.as_deref());
            let fd = match listener::receive(&ours) {
                Ok(Some(fd)) => fd,
                Ok(None) | Err(_) => {
                    let _ = ready_tx.send(Ready::NoListener);
                    return;
                }
            };
            let _ = ready_tx.send(Ready::Supervising);
            let listener = listener::Listener::new(fd);
            if let Err(e) = supervise::serve(&listener, &settings, &mut known) {
                report::stderr(&format!(
                    "precompile: the enforced lockdown's supervisor stopped ({e}); \
                     every exec in the tree now fails\n"
                ));
            }
        })
        .context("--enforce: cannot start the supervisor thread")?;

    // SAFETY: the closure only makes system calls on data prepared above
    // (Prepared::install_in_child): async-signal-safe after fork.
    unsafe {
        cmd.pre_exec(move || prepared.install_in_child());
    }
    let spawned = cmd.spawn();
    drop(cmd); // closes our copy of the child's end: a failed child is seen as EOF
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            if let Ok(Ready::NoListener) = ready_rx.recv() {
                if e.raw_os_error() == Some(libc::EBUSY) {
                    bail!(
                        "--enforce: this process already runs under a seccomp filter with a \
                         supervisor (an enforced lockdown, or a container runtime's), and the \
                         kernel allows one per process ({e}); the outer one already sees every \
                         exec, so run without --enforce here"
                    );
                }
                bail!(
                    "--enforce: the command could not install the seccomp filter ({e}); \
                     this kernel must allow unprivileged seccomp user notification \
                     ({ACTIONS_AVAIL} lists user_notif); run without --enforce"
                );
            }
            return Ok(Err(e));
        }
    };
    signals::forward(forwarded, child.id() as i32)?;
    let status = child.wait().context("waiting for the command")?;
    Ok(Ok(match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code as u8),
        (None, Some(sig)) => ExitCode::from(128u8.wrapping_add(sig as u8)),
        _ => ExitCode::FAILURE,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_user_notification_is_a_clear_error() {
        assert!(
            check_actions("kill_process kill_thread trap errno user_notif trace log allow\n")
                .is_ok()
        );
        let e = check_actions("kill_process kill_thread trap errno trace log allow\n").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("seccomp user notification"), "{msg}");
        assert!(msg.contains("run without --enforce"), "{msg}");
        assert!(check_actions("user_notify").is_err());
    }
}
