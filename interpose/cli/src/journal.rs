//! `precompile journal PATH [--json]`: what a compile journal says — counts
//! by verdict, kind and tool, and the refused commands. A torn or garbage
//! line is counted and reported, never fatal.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::args::{is_help, usage};

const HELP: &str = "usage: precompile journal [--json] PATH

Summarizes the JSON-lines journal that PRECOMPILE_JOURNAL=PATH (or
`precompile run --journal PATH`) makes every process in the tree append to:
how many compiler runs were allowed and refused, by kind, by tool and (in a
torchrun job, whose workers' records carry their RANK) by rank, and each
refused command with the pid, parent pid and rank that tried it. A line that is not a record (torn, garbage) is counted
and listed by line number.

options:
  --json       print the summary as one JSON object
  -h, --help   this text
";

/// One line of the journal, as readers see it (policy::journal::format_record
/// writes it).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Record {
    pub time: f64,
    pub pid: i64,
    pub ppid: i64,
    pub tid: i64,
    /// The distributed rank (`RANK`) the process started with; absent in a
    /// process that has none (and in records written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    pub exe: String,
    pub argv: Vec<String>,
    pub cwd: String,
    pub kind: String,
    pub verdict: String,
    pub reason: String,
    pub source: String,
}

/// Reads one journal line.
pub fn parse_line(line: &str) -> Result<Record, serde_json::Error> {
    serde_json::from_str(line)
}

#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub records: usize,
    pub by_verdict: BTreeMap<String, usize>,
    pub by_kind: BTreeMap<String, usize>,
    /// tool → verdict → count
    pub by_tool: BTreeMap<String, BTreeMap<String, usize>>,
    /// rank (`None`: a record without one) → verdict → count
    pub by_rank: BTreeMap<Option<i64>, BTreeMap<String, usize>>,
    pub refused: Vec<Record>,
    /// 1-based numbers of the lines that are not records.
    pub unreadable: Vec<usize>,
}

/// The tool a record is about: the executable's file name, else argv[0]'s.
fn tool(r: &Record) -> String {
    let name = |s: &str| {
        Path::new(s)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    };
    name(&r.exe)
        .or_else(|| r.argv.first().and_then(|a| name(a)))
        .unwrap_or_else(|| "?".to_owned())
}

pub fn summarize(text: &[u8]) -> Summary {
    let mut s = Summary::default();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let record = std::str::from_utf8(line)
            .ok()
            .and_then(|l| parse_line(l).ok());
        let Some(r) = record else {
            s.unreadable.push(i + 1);
            continue;
        };
        s.records += 1;
        *s.by_verdict.entry(r.verdict.clone()).or_default() += 1;
        *s.by_kind.entry(r.kind.clone()).or_default() += 1;
        *s.by_tool
            .entry(tool(&r))
            .or_default()
            .entry(r.verdict.clone())
            .or_default() += 1;
        *s.by_rank
            .entry(r.rank)
            .or_default()
            .entry(r.verdict.clone())
            .or_default() += 1;
        if r.verdict == "refused" {
            s.refused.push(r);
        }
    }
    s
}

fn counts(m: &BTreeMap<String, usize>) -> String {
    if m.is_empty() {
        return "none".to_owned();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn render_text(path: &Path, s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "journal {}: {} record{}, {} unreadable line{}",
        path.display(),
        s.records,
        if s.records == 1 { "" } else { "s" },
        s.unreadable.len(),
        if s.unreadable.len() == 1 { "" } else { "s" }
    );
    let _ = writeln!(out, "  by verdict: {}", counts(&s.by_verdict));
    let _ = writeln!(out, "  by kind:    {}", counts(&s.by_kind));
    if !s.by_tool.is_empty() {
        let _ = writeln!(out, "  by tool:");
        for (tool, verdicts) in &s.by_tool {
            let _ = writeln!(out, "    {tool:<16}{}", counts(verdicts));
        }
    }
    // Only a job with ranks gets the section: one line of "no rank" says
    // nothing a by-verdict count did not.
    if s.by_rank.keys().any(Option::is_some) {
        let _ = writeln!(out, "  by rank:");
        for (rank, verdicts) in &s.by_rank {
            let _ = writeln!(out, "    {:<16}{}", rank_name(*rank), counts(verdicts));
        }
    }
    if !s.refused.is_empty() {
        let _ = writeln!(out, "  refused:");
        for r in &s.refused {
            let rank = r.rank.map_or(String::new(), |n| format!(" rank {n}"));
            let _ = writeln!(
                out,
                "    pid {} ppid {}{rank}: {} ({}, {})",
                r.pid,
                r.ppid,
                r.argv.join(" "),
                r.kind,
                r.reason
            );
        }
    }
    if !s.unreadable.is_empty() {
        let lines: Vec<String> = s.unreadable.iter().map(usize::to_string).collect();
        let _ = writeln!(out, "  unreadable lines: {}", lines.join(", "));
    }
    out
}

fn rank_name(rank: Option<i64>) -> String {
    rank.map_or("no rank".to_owned(), |n| format!("rank {n}"))
}

pub fn render_json(path: &Path, s: &Summary) -> serde_json::Value {
    json!({
        "path": path.display().to_string(),
        "records": s.records,
        "by_verdict": s.by_verdict,
        "by_kind": s.by_kind,
        "by_tool": s.by_tool,
        // JSON keys are strings: the rank's digits, or "none"
        "by_rank": s
            .by_rank
            .iter()
            .map(|(rank, v)| (rank.map_or("none".to_owned(), |n| n.to_string()), v))
            .collect::<BTreeMap<_, _>>(),
        "refused": s.refused,
        "unreadable_lines": s.unreadable,
    })
}

pub fn main(args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let mut as_json = false;
    let mut path: Option<PathBuf> = None;
    for a in args {
        if is_help(&a) {
            print!("{HELP}");
            return Ok(ExitCode::SUCCESS);
        } else if a == "--json" {
            as_json = true;
        } else if path.is_none() {
            path = Some(PathBuf::from(a));
        } else {
            return Err(usage(format!(
                "journal: unexpected argument `{}`",
                a.to_string_lossy()
            )));
        }
    }
    let path = path
        .ok_or_else(|| usage("journal: missing PATH (usage: precompile journal [--json] PATH)"))?;
    let text =
        std::fs::read(&path).with_context(|| format!("cannot read journal {}", path.display()))?;
    let summary = summarize(&text);
    if as_json {
        println!("{}", render_json(&path, &summary));
    } else {
        print!("{}", render_text(&path, &summary));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOWED: &str = r#"{"time": 1.5, "pid": 10, "ppid": 1, "tid": 10, "exe": "/usr/bin/g++", "argv": ["g++", "-c", "a.c"], "cwd": "/tmp", "kind": "compile", "verdict": "allowed", "reason": "unlocked", "source": "shim"}"#;
    const REFUSED: &str = r#"{"time": 2.5, "pid": 11, "ppid": 1, "tid": 11, "exe": "/usr/bin/g++", "argv": ["g++", "-c", "b.c"], "cwd": "/tmp", "kind": "compile", "verdict": "refused", "reason": "startup-lockdown", "source": "shim"}"#;
    const PROBE: &str = r#"{"time": 3.5, "pid": 12, "ppid": 1, "tid": 12, "exe": "", "argv": ["/opt/nvcc", "--version"], "cwd": "/tmp", "kind": "probe", "verdict": "allowed", "reason": "probe-allowed", "source": "python"}"#;

    #[test]
    fn counts_by_verdict_kind_and_tool() {
        let text = format!("{ALLOWED}\n{REFUSED}\n{PROBE}\n");
        let s = summarize(text.as_bytes());
        assert_eq!(s.records, 3);
        assert_eq!(s.by_verdict["allowed"], 2);
        assert_eq!(s.by_verdict["refused"], 1);
        assert_eq!(s.by_kind["compile"], 2);
        assert_eq!(s.by_tool["g++"]["refused"], 1);
        assert_eq!(s.by_tool["nvcc"]["allowed"], 1);
        assert_eq!(s.refused.len(), 1);
        assert_eq!(s.refused[0].argv, vec!["g++", "-c", "b.c"]);
        assert!(s.unreadable.is_empty());
        let text = render_text(Path::new("j"), &s);
        assert!(
            text.contains("pid 11 ppid 1: g++ -c b.c (compile, startup-lockdown)"),
            "{text}"
        );
        assert!(!text.contains("by rank"), "{text}");
    }

    #[test]
    fn records_of_ranks_are_counted_and_named_by_rank() {
        let r0 = REFUSED.replace("\"tid\": 11,", "\"tid\": 11, \"rank\": 0,");
        let r1 = REFUSED
            .replace("\"pid\": 11", "\"pid\": 21")
            .replace("\"tid\": 11,", "\"tid\": 21, \"rank\": 1,");
        let text = format!("{ALLOWED}\n{r0}\n{r1}\n");
        let s = summarize(text.as_bytes());
        assert_eq!(s.by_rank[&Some(0)]["refused"], 1);
        assert_eq!(s.by_rank[&Some(1)]["refused"], 1);
        assert_eq!(s.by_rank[&None]["allowed"], 1);
        let out = render_text(Path::new("j"), &s);
        assert!(out.contains("    no rank         allowed 1\n"), "{out}");
        assert!(out.contains("    rank 1          refused 1\n"), "{out}");
        assert!(
            out.contains("pid 21 ppid 1 rank 1: g++ -c b.c (compile, startup-lockdown)"),
            "{out}"
        );
        let j = render_json(Path::new("j"), &s);
        assert_eq!(j["by_rank"]["0"]["refused"], 1);
        assert_eq!(j["by_rank"]["none"]["allowed"], 1);
        assert_eq!(j["refused"][1]["rank"], 1);
    }

    #[test]
    fn torn_and_garbage_lines_are_counted_not_fatal() {
        let torn = &ALLOWED[..40];
        let text = format!("{ALLOWED}\n{torn}\n\n\u{1}garbage\n{REFUSED}");
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(b"\n\xff\xfe\n");
        let s = summarize(&bytes);
        assert_eq!(s.records, 2);
        assert_eq!(s.unreadable, vec![2, 4, 6]);
        let j = render_json(Path::new("j"), &s);
        assert_eq!(j["unreadable_lines"], json!([2, 4, 6]));
        assert_eq!(j["refused"][0]["pid"], 11);
    }

    #[test]
    fn an_empty_journal_is_an_empty_summary() {
        let s = summarize(b"");
        assert_eq!(s, Summary::default());
        assert!(render_text(Path::new("j"), &s).contains("0 records, 0 unreadable lines"));
    }
}
