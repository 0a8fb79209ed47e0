//! The shim's own log: `PRECOMPILE_LOG=<filter>` sends lines to stderr.
//!
//! The filter takes tracing's directive syntax: comma-separated `level` or
//! `target=level` (`debug`, `info,precompile=trace`, `off`), levels
//! off/error/warn/info/debug/trace, the longest matching target prefix
//! winning. Targets are module paths (`precompile`, `precompile::abi`, ...).
//! A line is `precompile[<pid>] DEBUG <target>: <message>`.
//!
//! Never used on the exec path (it allocates at install and formats into a
//! stack buffer): the constructor and the C ABI only. Without a filter a
//! log call costs one atomic load.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

use crate::buf::Writer;
use crate::sys;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Off = 0,
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

impl Level {
    fn parse(s: &[u8]) -> Option<Level> {
        let s = s.trim_ascii();
        let is = |name: &str| s.eq_ignore_ascii_case(name.as_bytes());
        [
            ("off", Level::Off),
            ("error", Level::Error),
            ("warn", Level::Warn),
            ("info", Level::Info),
            ("debug", Level::Debug),
            ("trace", Level::Trace),
        ]
        .into_iter()
        .find(|(name, _)| is(name))
        .map(|(_, l)| l)
    }

    fn name(self) -> &'static str {
        match self {
            Level::Off => "OFF",
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }
}

/// The parsed filter: a default level and per-target-prefix levels.
#[derive(Debug, PartialEq)]
pub struct Filter {
    default: Level,
    targets: Vec<(Box<[u8]>, Level)>,
}

impl Filter {
    /// The filter, or the directive that is not one.
    pub fn parse(spec: &[u8]) -> Result<Filter, &[u8]> {
        let mut f = Filter {
            default: Level::Off,
            targets: Vec::new(),
        };
        for directive in spec
            .split(|&b| b == b',')
            .map(<[u8]>::trim_ascii)
            .filter(|d| !d.is_empty())
        {
            match directive.iter().position(|&b| b == b'=') {
                Some(eq) => {
                    let (target, lvl) = directive.split_at(eq);
                    let lvl = Level::parse(lvl.get(1..).unwrap_or(b"")).ok_or(directive)?;
                    f.targets.push((target.trim_ascii().into(), lvl));
                }
                None => f.default = Level::parse(directive).ok_or(directive)?,
            }
        }
        // the longest matching prefix wins
        f.targets.sort_by_key(|(t, _)| core::cmp::Reverse(t.len()));
        Ok(f)
    }

    fn level_for(&self, target: &str) -> Level {
        self.targets
            .iter()
            .find(|(t, _)| target.as_bytes().starts_with(t))
            .map_or(self.default, |(_, l)| *l)
    }

    fn max(&self) -> Level {
        self.targets
            .iter()
            .map(|(_, l)| *l)
            .fold(self.default, core::cmp::max)
    }
}

/// The most verbose level any target logs at (Off: no filter installed).
static MAX: AtomicU8 = AtomicU8::new(Level::Off as u8);
/// The installed filter: a leaked Box, never freed.
static FILTER: AtomicPtr<Filter> = AtomicPtr::new(core::ptr::null_mut());

/// Installs the filter `spec`; an unparsable filter is reported once and
/// ignored. Only the first filter installed counts (as tracing's global
/// default).
pub fn install(spec: &[u8]) {
    match Filter::parse(spec) {
        Ok(filter) => {
            let max = filter.max();
            let p = Box::into_raw(Box::new(filter));
            if FILTER
                .compare_exchange(
                    core::ptr::null_mut(),
                    p,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                MAX.store(max as u8, Ordering::Release);
            } else {
                // SAFETY: `p` came from Box::into_raw above and was never shared.
                drop(unsafe { Box::from_raw(p) });
            }
        }
        Err(directive) => {
            let mut buf = [0u8; 512];
            let mut w = Writer::new(&mut buf);
            w.push(b"precompile: ignoring ")
                .push_str(policy::env::LOG)
                .push(b"=\"")
                .push(spec)
                .push(b"\": unknown level in `")
                .push(directive)
                .push(b"`");
            sys::write_stderr(w.finish_line(b"..."));
        }
    }
}

/// Whether a `level` line of `target` is written.
fn enabled(level: Level, target: &str) -> bool {
    if level as u8 > MAX.load(Ordering::Acquire) {
        return false;
    }
    // SAFETY: non-null values are a leaked Box installed once, never freed.
    let Some(filter) = (unsafe { FILTER.load(Ordering::Acquire).as_ref() }) else {
        return false;
    };
    level <= filter.level_for(target)
}

/// Writes one debug line of `target`, its message written by `message`.
pub fn debug(target: &str, message: impl FnOnce(&mut Writer<'_>)) {
    event(Level::Debug, target, message);
}

fn event(level: Level, target: &str, message: impl FnOnce(&mut Writer<'_>)) {
    if !enabled(level, target) {
        return;
    }
    let mut buf = [0u8; 2048];
    let mut w = Writer::new(&mut buf);
    w.push(b"precompile[").push_int(sys::getpid()).push(b"] ");
    w.push_str(level.name())
        .push(b" ")
        .push_str(target)
        .push(b": ");
    message(&mut w);
    sys::write_stderr(w.finish_line(b"..."));
}

/// `Some("…")` or `None`, as the log writes an optional value.
pub fn push_opt(w: &mut Writer<'_>, value: Option<&[u8]>) {
    match value {
        Some(v) => w.push(b"Some(\"").push(v).push(b"\")"),
        None => w.push(b"None"),
    };
}

/// The lock's name, as the log writes it.
pub fn lock_name(lock: policy::Lock) -> &'static str {
    match lock {
        policy::Lock::Open => "Open",
        policy::Lock::Startup => "Startup",
        policy::Lock::NoCompilation => "NoCompilation",
        policy::Lock::Serving => "Serving",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_levels_and_targets() {
        let f = Filter::parse(b"info,precompile::abi=trace, other = off").unwrap();
        assert_eq!(f.level_for("precompile"), Level::Info);
        assert_eq!(f.level_for("precompile::abi"), Level::Trace);
        assert_eq!(f.level_for("other::x"), Level::Off);
        assert_eq!(f.max(), Level::Trace);
        assert_eq!(
            Filter::parse(b"DEBUG").unwrap().level_for("x"),
            Level::Debug
        );
        assert_eq!(Filter::parse(b"").unwrap().max(), Level::Off);
        assert_eq!(Filter::parse(b"loud"), Err(&b"loud"[..]));
        assert_eq!(Filter::parse(b"info,x=loud"), Err(&b"x=loud"[..]));
    }
}
