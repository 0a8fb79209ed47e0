//! The one decision: given what an execution is and what lock holds, may it run?

use crate::classify::Kind;

/// Which lock holds for the deciding thread, strongest first (see
/// [`crate::lockdown::current`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    Open,
    /// `TORCH_PRECOMPILE_NO_COMPILATION=1` at process start.
    Startup,
    /// Inside `no_compilation()` (process-wide depth > 0).
    NoCompilation,
    /// This thread is inside `serving()`.
    Serving,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    NotACompiler,
    Unlocked,
    ProbeAllowed,
    StartupLockdown,
    NoCompilation,
    Serving,
    StrictProbe,
}

impl Reason {
    /// The journal's `reason` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NotACompiler => "not-a-compiler",
            Reason::Unlocked => "unlocked",
            Reason::ProbeAllowed => "probe-allowed",
            Reason::StartupLockdown => "startup-lockdown",
            Reason::NoCompilation => "no-compilation",
            Reason::Serving => "serving",
            Reason::StrictProbe => "strict-probe",
        }
    }

    /// A short phrase for a human reading the shim's stderr line.
    pub fn explain(self) -> &'static str {
        match self {
            Reason::NotACompiler => "not a compiler",
            Reason::Unlocked => "no lockdown is active",
            Reason::ProbeAllowed => "version probes build nothing and are allowed",
            Reason::StartupLockdown => "TORCH_PRECOMPILE_NO_COMPILATION=1 was set at process start",
            Reason::NoCompilation => "inside torch.compiler.precompile.no_compilation()",
            Reason::Serving => "this thread is serving (torch_precompile.serving())",
            Reason::StrictProbe => "PRECOMPILE_STRICT=1 refuses version probes under lockdown",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub reason: Reason,
}

impl Verdict {
    /// The journal's `verdict` field.
    pub fn as_str(self) -> &'static str {
        if self.allowed {
            "allowed"
        } else {
            "refused"
        }
    }
}

/// Pure and allocation-free: safe in a vfork child.
pub fn decide(kind: Kind, lock: Lock, strict: bool) -> Verdict {
    let allow = |reason| Verdict {
        allowed: true,
        reason,
    };
    let refuse = |reason| Verdict {
        allowed: false,
        reason,
    };
    let locked_reason = match lock {
        Lock::Open => None,
        Lock::Startup => Some(Reason::StartupLockdown),
        Lock::NoCompilation => Some(Reason::NoCompilation),
        Lock::Serving => Some(Reason::Serving),
    };
    match (kind, locked_reason) {
        (Kind::Other, _) => allow(Reason::NotACompiler),
        (Kind::Compile, None) => allow(Reason::Unlocked),
        (Kind::Probe, None) => allow(Reason::ProbeAllowed),
        (Kind::Compile, Some(reason)) => refuse(reason),
        (Kind::Probe, Some(_)) if strict => refuse(Reason::StrictProbe),
        (Kind::Probe, Some(_)) => allow(Reason::ProbeAllowed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKS: [(Lock, Reason); 3] = [
        (Lock::Startup, Reason::StartupLockdown),
        (Lock::NoCompilation, Reason::NoCompilation),
        (Lock::Serving, Reason::Serving),
    ];

    fn allowed(reason: Reason) -> Verdict {
        Verdict {
            allowed: true,
            reason,
        }
    }

    fn refused(reason: Reason) -> Verdict {
        Verdict {
            allowed: false,
            reason,
        }
    }

    #[test]
    fn other_is_always_allowed() {
        for lock in [
            Lock::Open,
            Lock::Startup,
            Lock::NoCompilation,
            Lock::Serving,
        ] {
            for strict in [false, true] {
                assert_eq!(
                    decide(Kind::Other, lock, strict),
                    allowed(Reason::NotACompiler)
                );
            }
        }
    }

    #[test]
    fn open_allows_everything() {
        for strict in [false, true] {
            assert_eq!(
                decide(Kind::Compile, Lock::Open, strict),
                allowed(Reason::Unlocked)
            );
            assert_eq!(
                decide(Kind::Probe, Lock::Open, strict),
                allowed(Reason::ProbeAllowed)
            );
        }
    }

    #[test]
    fn every_lock_refuses_compiles_with_its_own_reason() {
        for (lock, reason) in LOCKS {
            for strict in [false, true] {
                assert_eq!(decide(Kind::Compile, lock, strict), refused(reason));
            }
        }
    }

    #[test]
    fn probes_pass_locks_unless_strict() {
        for (lock, _) in LOCKS {
            assert_eq!(
                decide(Kind::Probe, lock, false),
                allowed(Reason::ProbeAllowed)
            );
            assert_eq!(
                decide(Kind::Probe, lock, true),
                refused(Reason::StrictProbe)
            );
        }
    }

    #[test]
    fn reason_and_verdict_strings_match_the_contract() {
        let all = [
            (Reason::NotACompiler, "not-a-compiler"),
            (Reason::Unlocked, "unlocked"),
            (Reason::ProbeAllowed, "probe-allowed"),
            (Reason::StartupLockdown, "startup-lockdown"),
            (Reason::NoCompilation, "no-compilation"),
            (Reason::Serving, "serving"),
            (Reason::StrictProbe, "strict-probe"),
        ];
        for (reason, name) in all {
            assert_eq!(reason.as_str(), name);
            assert!(!reason.explain().is_empty() && !reason.explain().contains('\n'));
        }
        assert_eq!(allowed(Reason::Unlocked).as_str(), "allowed");
        assert_eq!(refused(Reason::Serving).as_str(), "refused");
    }
}
