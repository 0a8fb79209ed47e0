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
/// A tracing filter for the shim's own log lines (never emitted on the exec path).
pub const LOG: &str = "PRECOMPILE_LOG";
/// `1`: the container entrypoint (scripts/entrypoint) locks down and runs the
/// command under `precompile run --lockdown --enforce`. Read by that script only.
pub const ENFORCE: &str = "PRECOMPILE_ENFORCE";
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
    fn names_match_the_contract() {
        assert_eq!(NO_COMPILATION, "TORCH_PRECOMPILE_NO_COMPILATION");
        assert_eq!(JOURNAL, "PRECOMPILE_JOURNAL");
        assert_eq!(STRICT, "PRECOMPILE_STRICT");
        assert_eq!(COMPILERS, "PRECOMPILE_COMPILERS");
        assert_eq!(ALLOW, "PRECOMPILE_ALLOW");
        assert_eq!(LOG, "PRECOMPILE_LOG");
        assert_eq!(ENFORCE, "PRECOMPILE_ENFORCE");
    }
}
