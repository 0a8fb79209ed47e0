//! Environment variable names (the single place they are spelled; see
//! docs/CONTRACTS.md) and the one rule for reading a boolean.

/// Exactly `1` at process start locks the whole process down for good;
/// exported as `1` while `no_compilation()` is active.
pub const NO_COMPILATION: &str = "TORCH_PRECOMPILE_NO_COMPILATION";
/// Path of the JSON-lines journal every process in the tree appends to.
pub const JOURNAL: &str = "PRECOMPILE_JOURNAL";
/// `1`: version probes are refused under lockdown too.
pub const STRICT: &str = "PRECOMPILE_STRICT";
/// Extra compiler names, colon-separated.
pub const COMPILERS: &str = "PRECOMPILE_COMPILERS";
/// Names removed from the compiler list, colon-separated.
pub const ALLOW: &str = "PRECOMPILE_ALLOW";
/// A directory: every torch.compile call site of the tree's Python processes is
/// captured into it (`precompile run --capture DIR`). Read by the Python layer.
pub const CAPTURE_DIR: &str = "PRECOMPILE_CAPTURE_DIR";
/// A directory of captured torch.compile sites to serve (`precompile run --serve DIR`).
pub const SERVE_DIR: &str = "PRECOMPILE_SERVE_DIR";
/// A tracing filter for the shim's own log lines (never emitted on the exec path).
pub const LOG: &str = "PRECOMPILE_LOG";
/// `1`: the container entrypoint (scripts/entrypoint) locks down and runs the
/// command under `precompile run --lockdown --enforce`. Read by that script only.
pub const ENFORCE: &str = "PRECOMPILE_ENFORCE";
/// The global rank torchrun gives each worker; read once at start (by the
/// shim and the Python layer) into every journal record the process writes.
pub const RANK: &str = "RANK";
/// The loader's preload list; the shim re-injects itself first.
pub const LD_PRELOAD: &str = "LD_PRELOAD";
/// Where the shim prepends its boot directory in Python processes.
pub const PYTHONPATH: &str = "PYTHONPATH";

/// Variables the shim copies into every exec it lets through when they were
/// set at its start (the lockdown and journal variables follow live state).
pub const PROPAGATED_FROM_START: [&str; 3] = [STRICT, COMPILERS, ALLOW];

/// Only exactly `"1"` means on: `"true"`, `"yes"`, `" 1"` are off, so a
/// typo never silently turns a lockdown on or off in half the tree.
pub fn is_on(value: Option<&str>) -> bool {
    value == Some("1")
}

/// A rank as `RANK` spells it: a non-negative decimal integer, else none (a
/// journal record then carries no rank rather than a wrong one).
pub fn rank(value: Option<&str>) -> Option<i64> {
    let v = value?;
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exactly_one_is_on() {
        assert!(is_on(Some("1")));
        for off in [
            None,
            Some(""),
            Some("0"),
            Some("true"),
            Some(" 1"),
            Some("1 "),
            Some("01"),
        ] {
            assert!(!is_on(off), "{off:?}");
        }
    }

    #[test]
    fn a_rank_is_a_plain_non_negative_integer() {
        assert_eq!(rank(Some("0")), Some(0));
        assert_eq!(rank(Some("17")), Some(17));
        for bad in [
            None,
            Some(""),
            Some("-1"),
            Some("+1"),
            Some(" 1"),
            Some("1x"),
            Some("99999999999999999999"),
        ] {
            assert_eq!(rank(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn names_match_the_contract() {
        assert_eq!(NO_COMPILATION, "TORCH_PRECOMPILE_NO_COMPILATION");
        assert_eq!(JOURNAL, "PRECOMPILE_JOURNAL");
        assert_eq!(STRICT, "PRECOMPILE_STRICT");
        assert_eq!(COMPILERS, "PRECOMPILE_COMPILERS");
        assert_eq!(ALLOW, "PRECOMPILE_ALLOW");
        assert_eq!(LOG, "PRECOMPILE_LOG");
        assert_eq!(ENFORCE, "PRECOMPILE_ENFORCE");
        assert_eq!(RANK, "RANK");
    }
}
