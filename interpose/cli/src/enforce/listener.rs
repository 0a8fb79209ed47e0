//! The supervisor's side of the kernel interface: receiving the listener
//! from the child, and the three notification ioctls.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use libc::{c_int, c_void};

use super::child::CMSG_WORDS;

/// Receives the descriptor the child sends; `None` when the child closed
/// its end without sending one (it failed before, and says so to spawn()).
pub fn receive(sock: &OwnedFd) -> io::Result<Option<OwnedFd>> {
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
    msg.msg_controllen = std::mem::size_of_val(&control);
    let n = loop {
        // SAFETY: `msg` points at live buffers for the duration of the call.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    };
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR reads its control fields.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if cmsg.is_null() {
        return Ok(None);
    }
    // SAFETY: a non-null header inside `control`, written by the kernel.
    let (level, kind) = unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type) };
    if level != libc::SOL_SOCKET || kind != libc::SCM_RIGHTS {
        return Ok(None);
    }
    // SAFETY: an SCM_RIGHTS message holds at least one int after its header.
    let fd: RawFd = unsafe { libc::CMSG_DATA(cmsg).cast::<c_int>().read_unaligned() };
    // SAFETY: the kernel installed `fd` in this process for us alone.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// One exec waiting for an answer.
pub struct Notification {
    pub id: u64,
    /// The calling thread, in our pid namespace.
    pub tid: i32,
    pub nr: i32,
    pub arch: u32,
    pub args: [u64; 6],
}

pub struct Listener {
    fd: OwnedFd,
}

impl Listener {
    pub fn new(fd: OwnedFd) -> Listener {
        Listener { fd }
    }

    /// The next notification. `Ok(None)` when a target vanished between
    /// the kernel queueing it and us receiving it (ENOENT): ask again.
    pub fn receive(&self) -> io::Result<Option<Notification>> {
        // SAFETY: seccomp_notif is plain data; the kernel wants it zeroed.
        let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl writes one seccomp_notif into `n`.
        let rc =
            unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EINTR) | Some(libc::ENOENT) => Ok(None),
                _ => Err(err),
            };
        }
        Ok(Some(Notification {
            id: n.id,
            tid: n.pid as i32,
            nr: n.data.nr,
            arch: n.data.arch,
            args: n.data.args,
        }))
    }

    /// Whether `id` still names a live, unanswered exec: true means the
    /// memory read since came from that very thread (it could not have
    /// exited and its pid been reused in between).
    pub fn still_valid(&self, id: u64) -> bool {
        let mut id = id;
        // SAFETY: the ioctl reads one u64.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &mut id,
            )
        };
        rc == 0
    }

    /// Lets the exec go ahead (`None`) or fails it with `errno`. A target
    /// that is gone by now (ENOENT) needs no answer.
    pub fn answer(&self, id: u64, errno: Option<c_int>) -> io::Result<()> {
        let resp = libc::seccomp_notif_resp {
            id,
            val: 0,
            error: errno.map_or(0, |e| -e),
            flags: if errno.is_none() {
                libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
            } else {
                0
            },
        };
        let mut resp = resp;
        // SAFETY: the ioctl reads one seccomp_notif_resp.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &mut resp,
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::ENOENT) {
                return Err(err);
            }
        }
        Ok(())
    }
}
