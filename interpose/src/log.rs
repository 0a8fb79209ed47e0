//! The shim's own log: `PRECOMPILE_LOG=<filter>` sends lines to stderr.
//!
//! A deliberately small `tracing` subscriber instead of tracing-subscriber:
//! the shim is loaded into every process of the tree, and every page of code
//! it carries is paid for at each exec. The filter takes tracing's directive
//! syntax: comma-separated `level` or `target=level` (`debug`,
//! `info,precompile=trace`, `off`), levels off/error/warn/info/debug/trace.
//!
//! Never used on the exec path (it allocates and locks stderr): the
//! constructor and the C ABI only.

use std::fmt::Write as _;
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span;
use tracing::{Event, Metadata, Subscriber};

/// The parsed filter: a default level and per-target-prefix levels.
#[derive(Debug, PartialEq)]
pub struct Filter {
    default: LevelFilter,
    targets: Vec<(String, LevelFilter)>,
}

fn level(s: &str) -> Option<LevelFilter> {
    match s.trim().to_ascii_lowercase().as_str() {
        "off" => Some(LevelFilter::OFF),
        "error" => Some(LevelFilter::ERROR),
        "warn" => Some(LevelFilter::WARN),
        "info" => Some(LevelFilter::INFO),
        "debug" => Some(LevelFilter::DEBUG),
        "trace" => Some(LevelFilter::TRACE),
        _ => None,
    }
}

impl Filter {
    pub fn parse(spec: &str) -> Result<Filter, String> {
        let mut f = Filter {
            default: LevelFilter::OFF,
            targets: Vec::new(),
        };
        for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match directive.split_once('=') {
                Some((target, lvl)) => {
                    let lvl =
                        level(lvl).ok_or_else(|| format!("unknown level in `{directive}`"))?;
                    f.targets.push((target.trim().to_owned(), lvl));
                }
                None => {
                    f.default =
                        level(directive).ok_or_else(|| format!("unknown level `{directive}`"))?
                }
            }
        }
        // the longest matching prefix wins
        f.targets.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
        Ok(f)
    }

    fn level_for(&self, target: &str) -> LevelFilter {
        self.targets
            .iter()
            .find(|(t, _)| target.starts_with(t.as_str()))
            .map_or(self.default, |(_, l)| *l)
    }

    fn max(&self) -> LevelFilter {
        self.targets
            .iter()
            .map(|(_, l)| *l)
            .fold(self.default, std::cmp::max)
    }
}

struct StderrLog {
    filter: Filter,
}

struct Line<'a>(&'a mut String);

impl Visit for Line<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

impl Subscriber for StderrLog {
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= self.filter.level_for(meta.target())
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.filter.max())
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let mut line = format!(
            "precompile[{}] {} {}:",
            std::process::id(),
            meta.level(),
            meta.target()
        );
        event.record(&mut Line(&mut line));
        line.push('\n');
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

/// Installs the subscriber for `spec`; an unparsable filter is reported
/// once and ignored. Without a subscriber tracing's level check is one
/// atomic load (its global maximum level starts at OFF).
pub fn install(spec: &str) {
    match Filter::parse(spec) {
        Ok(filter) => {
            let _ = tracing::subscriber::set_global_default(StderrLog { filter });
        }
        Err(e) => eprintln!("precompile: ignoring {}={spec:?}: {e}", policy::env::LOG),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_levels_and_targets() {
        let f = Filter::parse("info,precompile::abi=trace, other = off").unwrap();
        assert_eq!(f.level_for("precompile"), LevelFilter::INFO);
        assert_eq!(f.level_for("precompile::abi"), LevelFilter::TRACE);
        assert_eq!(f.level_for("other::x"), LevelFilter::OFF);
        assert_eq!(f.max(), LevelFilter::TRACE);
        assert_eq!(
            Filter::parse("DEBUG").unwrap().level_for("x"),
            LevelFilter::DEBUG
        );
        assert_eq!(Filter::parse("").unwrap().max(), LevelFilter::OFF);
        assert!(Filter::parse("loud").is_err());
        assert!(Filter::parse("x=loud").is_err());
    }
}
