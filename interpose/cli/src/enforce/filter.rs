//! The seccomp filter: classic BPF, hand-written (a dozen instructions, no
//! libseccomp to install). Native `execve`/`execveat` go to the supervisor
//! (`SECCOMP_RET_USER_NOTIF`); the same calls through the x32 ABI or the
//! 32-bit `int 0x80` entry are refused outright (`EPERM`): the supervisor
//! would have to read their 32-bit argument layout, and no serving tree needs
//! them. Any other architecture value kills the process: it cannot occur on
//! an x86_64 kernel, so seeing one means the filter is wrong, not the caller.

use libc::{sock_filter, BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W};

/// `AUDIT_ARCH_*` (linux/audit.h; not in the libc crate).
pub const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// The x32 ABI's system call numbers carry this bit.
pub const X32_BIT: u32 = 0x4000_0000;

pub const NR_EXECVE: u32 = 59;
pub const NR_EXECVEAT: u32 = 322;
/// x32's own entries (its table reuses 59/322 for nothing) and the i386 ones.
const X32_EXECVE: u32 = 520;
const X32_EXECVEAT: u32 = 545;
const I386_EXECVE: u32 = 11;
const I386_EXECVEAT: u32 = 358;

/// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;

const fn load(offset: u32) -> sock_filter {
    sock_filter {
        code: (BPF_LD | BPF_W | BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k: offset,
    }
}

const fn ret(k: u32) -> sock_filter {
    sock_filter {
        code: (BPF_RET | BPF_K) as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// `if A == k goto at + 1 + jt else at + 1 + jf`, with targets given as
/// absolute instruction indices (`at` is this instruction's own).
const fn jeq(at: usize, k: u32, on_true: usize, on_false: usize) -> sock_filter {
    sock_filter {
        code: (BPF_JMP | BPF_JEQ | BPF_K) as u16,
        jt: (on_true - at - 1) as u8,
        jf: (on_false - at - 1) as u8,
        k,
    }
}

const OTHER_ARCH: usize = 10;
const ALLOW: usize = 14;
const KILL: usize = 15;
const DENY: usize = 16;
const NOTIFY: usize = 17;
pub const LEN: usize = 18;

/// The program. Fixed data: built once, before the fork.
pub fn program() -> [sock_filter; LEN] {
    let x32 = |nr: u32| X32_BIT | nr;
    [
        /* 0 */ load(OFF_ARCH),
        /* 1 */ jeq(1, AUDIT_ARCH_X86_64, 2, OTHER_ARCH),
        /* 2 */ load(OFF_NR),
        /* 3 */ jeq(3, NR_EXECVE, NOTIFY, 4),
        /* 4 */ jeq(4, NR_EXECVEAT, NOTIFY, 5),
        /* 5 */ jeq(5, x32(X32_EXECVE), DENY, 6),
        /* 6 */ jeq(6, x32(X32_EXECVEAT), DENY, 7),
        /* 7 */ jeq(7, x32(NR_EXECVE), DENY, 8),
        /* 8 */ jeq(8, x32(NR_EXECVEAT), DENY, 9),
        /* 9 */ ret(libc::SECCOMP_RET_ALLOW),
        /* 10 OTHER_ARCH */ jeq(10, AUDIT_ARCH_I386, 11, KILL),
        /* 11 */ load(OFF_NR),
        /* 12 */ jeq(12, I386_EXECVE, DENY, 13),
        /* 13 */ jeq(13, I386_EXECVEAT, DENY, ALLOW),
        /* 14 ALLOW */ ret(libc::SECCOMP_RET_ALLOW),
        /* 15 KILL */ ret(libc::SECCOMP_RET_KILL_PROCESS),
        /* 16 DENY */ ret(libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        /* 17 NOTIFY */ ret(libc::SECCOMP_RET_USER_NOTIF),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program the way the kernel does, for the three instruction
    /// shapes it uses; panics on anything else, so a new shape needs a test.
    fn run(prog: &[sock_filter], arch: u32, nr: u32) -> u32 {
        let (mut pc, mut a) = (0usize, 0u32);
        loop {
            let i = prog[pc];
            match u32::from(i.code) {
                c if c == BPF_LD | BPF_W | BPF_ABS => {
                    a = match i.k {
                        OFF_NR => nr,
                        OFF_ARCH => arch,
                        k => panic!("load of offset {k}"),
                    };
                    pc += 1;
                }
                c if c == BPF_JMP | BPF_JEQ | BPF_K => {
                    pc += 1 + usize::from(if a == i.k { i.jt } else { i.jf });
                }
                c if c == BPF_RET | BPF_K => return i.k,
                c => panic!("unexpected opcode {c:#x} at {pc}"),
            }
        }
    }

    const NOTIF: u32 = libc::SECCOMP_RET_USER_NOTIF;
    const ALLOWED: u32 = libc::SECCOMP_RET_ALLOW;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;

    #[test]
    fn native_execs_go_to_the_supervisor_and_the_rest_passes() {
        let p = program();
        assert_eq!(run(&p, AUDIT_ARCH_X86_64, NR_EXECVE), NOTIF);
        assert_eq!(run(&p, AUDIT_ARCH_X86_64, NR_EXECVEAT), NOTIF);
        for nr in [0, 1, 2, 56, 57, 58, 60, 321, 323, 435, 11, 358] {
            assert_eq!(run(&p, AUDIT_ARCH_X86_64, nr), ALLOWED, "nr {nr}");
        }
    }

    #[test]
    fn other_abis_cannot_exec() {
        let p = program();
        for nr in [X32_EXECVE, X32_EXECVEAT, NR_EXECVE, NR_EXECVEAT] {
            assert_eq!(run(&p, AUDIT_ARCH_X86_64, X32_BIT | nr), EPERM, "x32 {nr}");
        }
        assert_eq!(run(&p, AUDIT_ARCH_X86_64, X32_BIT | 1), ALLOWED);
        assert_eq!(run(&p, AUDIT_ARCH_I386, I386_EXECVE), EPERM);
        assert_eq!(run(&p, AUDIT_ARCH_I386, I386_EXECVEAT), EPERM);
        assert_eq!(run(&p, AUDIT_ARCH_I386, NR_EXECVE), ALLOWED);
        assert_eq!(
            run(&p, 0xC000_00B7, NR_EXECVE),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }

    #[test]
    fn every_jump_lands_inside_the_program() {
        for (at, i) in program().iter().enumerate() {
            if u32::from(i.code) == BPF_JMP | BPF_JEQ | BPF_K {
                assert!(at + 1 + usize::from(i.jt.max(i.jf)) < LEN, "{at}");
            }
        }
    }
}
