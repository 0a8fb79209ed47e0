//! The child's side, run between fork and exec (`CommandExt::pre_exec`):
//! no allocation, no locks. Everything is prepared before the fork; the
//! child only makes system calls: `PR_SET_NO_NEW_PRIVS` (what lets an
//! unprivileged process install a filter), the filter with a new listener,
//! and one `sendmsg` handing the listener to the supervisor over a
//! socketpair. Its own exec is then the first one the supervisor decides.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use libc::{c_int, c_uint, c_void, sock_filter, sock_fprog};

use super::filter;

/// Room for one `SCM_RIGHTS` control message carrying one descriptor
/// (`CMSG_SPACE(sizeof(int))` is 24 on 64-bit Linux), 8-byte aligned.
pub(super) const CMSG_WORDS: usize = 4;

pub struct Prepared {
    program: Box<[sock_filter; filter::LEN]>,
    sock: OwnedFd,
    cmsg_space: usize,
    cmsg_len: usize,
}

impl Prepared {
    /// `sock`: the child's end of the socketpair.
    pub fn new(sock: OwnedFd) -> Prepared {
        let int = std::mem::size_of::<c_int>() as c_uint;
        // SAFETY: CMSG_SPACE and CMSG_LEN are pure arithmetic on a length.
        let (space, len) = unsafe { (libc::CMSG_SPACE(int), libc::CMSG_LEN(int)) };
        Prepared {
            program: Box::new(filter::program()),
            sock,
            cmsg_space: space as usize,
            cmsg_len: len as usize,
        }
    }

    /// In the forked child: installs the filter and sends its listener.
    /// Async-signal-safe: system calls on prepared data only.
    pub fn install_in_child(&self) -> io::Result<()> {
        let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the set it is given.
        check(unsafe { libc::sigemptyset(set.as_mut_ptr()) })?;
        // SAFETY: the set was initialised just above; the supervisor blocked
        // the signals it forwards, and the command must not inherit that.
        let rc =
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, set.as_ptr(), std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        // SAFETY: prctl with integer arguments only. The supervisor made
        // itself non-dumpable and the fork inherited that; undone here, or
        // the supervisor (without CAP_SYS_PTRACE) could not read this
        // process's memory at its exec. The exec resets it anyway.
        check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) })?;
        // SAFETY: prctl with integer arguments only.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        let prog = sock_fprog {
            len: filter::LEN as u16,
            filter: self.program.as_ptr().cast_mut(),
        };
        // SAFETY: `prog` points at the prepared program, alive for this call;
        // the kernel copies it.
        let listener = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &prog as *const sock_fprog,
            )
        };
        if listener < 0 {
            return Err(io::Error::last_os_error());
        }
        let listener = listener as c_int;
        let sent = self.send(listener);
        // SAFETY: `listener` is ours, returned just above, and closed once.
        unsafe { libc::close(listener) };
        sent
    }

    fn send(&self, fd: c_int) -> io::Result<()> {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast::<c_void>(),
            iov_len: 1,
        };
        let mut control = [0u64; CMSG_WORDS];
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast::<c_void>();
        msg.msg_controllen = self.cmsg_space.min(std::mem::size_of_val(&control));
        // SAFETY: msg_control points at `control`, large enough for one header.
        let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        if cmsg.is_null() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: `cmsg` is the first header inside `control` (checked non-null);
        // CMSG_DATA points within the same buffer, room for one int.
        unsafe {
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = self.cmsg_len;
            libc::CMSG_DATA(cmsg).cast::<c_int>().write_unaligned(fd);
        }
        loop {
            // SAFETY: `msg` and everything it points at live across the call.
            let n = unsafe { libc::sendmsg(self.sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
            if n >= 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

fn check(rc: c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
