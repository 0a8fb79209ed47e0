//! The supervisor stands between a service manager and the command: the
//! signals that ask a process to stop are passed on to the command, which
//! decides, instead of killing the supervisor (which would fail the tree's
//! execs) or being lost.

use std::io;

const FORWARDED: [i32; 6] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

pub struct Blocked(libc::sigset_t);

/// Blocks the forwarded signals in this thread, before any other thread
/// starts (they inherit the mask), so only `forward`'s thread takes them.
pub fn block_forwarded() -> io::Result<Blocked> {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set.
    unsafe { libc::sigemptyset(set.as_mut_ptr()) };
    // SAFETY: initialised just above.
    let mut set = unsafe { set.assume_init() };
    for sig in FORWARDED {
        // SAFETY: a valid set and a valid signal number.
        unsafe { libc::sigaddset(&mut set, sig) };
    }
    // SAFETY: a valid set; the old mask is not wanted.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(Blocked(set))
}

/// A thread that waits for the blocked signals and sends each to `pid`.
pub fn forward(blocked: Blocked, pid: i32) -> io::Result<()> {
    std::thread::Builder::new()
        .name("precompile-signals".into())
        .spawn(move || loop {
            let mut sig = 0;
            // SAFETY: a valid set, and `sig` receives the signal number.
            if unsafe { libc::sigwait(&blocked.0, &mut sig) } == 0 {
                // SAFETY: kill with plain integers.
                unsafe { libc::kill(pid, sig) };
            }
        })
        .map(|_| ())
}
