//! The journal line format: round trips, truncation, escaping, buffer bounds.

use policy::journal::{format_record, Fields, LINE_BUDGET, MIN_BUFFER};
use policy::{Kind, Reason, Verdict};
use serde::{Deserialize, Serialize};

/// One line of the journal, as readers see it (the CLI's `precompile journal`
/// has the same type).
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
fn parse_line(line: &str) -> Result<Record, serde_json::Error> {
    serde_json::from_str(line)
}

const ALLOWED: Verdict = Verdict {
    allowed: true,
    reason: Reason::Unlocked,
};

fn fields<'a>(
    exe: &'a [u8],
    argv: &'a [Vec<u8>],
    cwd: &'a [u8],
) -> Fields<'a, impl Iterator<Item = &'a [u8]> + 'a> {
    Fields {
        time: 1733150000.123456,
        pid: 12,
        ppid: 1,
        tid: 12,
        rank: None,
        exe,
        argv: argv.iter().map(Vec::as_slice),
        cwd,
        kind: Kind::Compile,
        verdict: ALLOWED,
        source: "shim",
    }
}

fn args(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Formats into `size` bytes and checks the invariants every line must keep.
fn line<'a>(size: usize, f: Fields<'a, impl Iterator<Item = &'a [u8]>>) -> String {
    let mut buf = vec![0xAAu8; size + 16];
    let n = format_record(&mut buf[..size], f);
    assert!(n <= size && n <= LINE_BUDGET, "wrote {n} into {size}");
    assert!(
        buf[size..].iter().all(|&b| b == 0xAA),
        "wrote past the buffer"
    );
    let text = std::str::from_utf8(&buf[..n])
        .expect("line is UTF-8")
        .to_owned();
    if size >= MIN_BUFFER {
        assert!(
            text.ends_with('\n') && text.matches('\n').count() == 1,
            "{text:?}"
        );
        parse_line(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    } else {
        assert_eq!(n, 0);
    }
    text
}

fn leak(argv: Vec<Vec<u8>>) -> &'static [Vec<u8>] {
    Box::leak(argv.into_boxed_slice())
}

/// What a string becomes in the journal: UTF-8 kept, other bytes as U+00XX.
fn expected(bytes: &[u8]) -> String {
    let mut s = String::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(ok) => {
                s.push_str(ok);
                break;
            }
            Err(e) => {
                s.push_str(std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap());
                let bad = e.error_len().unwrap_or(rest.len() - e.valid_up_to());
                for &b in &rest[e.valid_up_to()..e.valid_up_to() + bad] {
                    s.push(char::from(b));
                }
                rest = &rest[e.valid_up_to() + bad..];
            }
        }
    }
    s
}

#[test]
fn ordinary_record_matches_the_contract_example() {
    let argv = leak(args(&["g++", "-c", "a.c", "-o", "a.o"]));
    let text = line(LINE_BUDGET, fields(b"/usr/bin/g++", argv, b"/tmp"));
    assert_eq!(
        text,
        "{\"time\": 1733150000.123456, \"pid\": 12, \"ppid\": 1, \"tid\": 12, \"exe\": \"/usr/bin/g++\", \
         \"argv\": [\"g++\", \"-c\", \"a.c\", \"-o\", \"a.o\"], \"cwd\": \"/tmp\", \"kind\": \"compile\", \
         \"verdict\": \"allowed\", \"reason\": \"unlocked\", \"source\": \"shim\"}\n"
    );
    let record = parse_line(&text).unwrap();
    assert_eq!(
        record,
        Record {
            time: 1733150000.123456,
            pid: 12,
            ppid: 1,
            tid: 12,
            rank: None,
            exe: "/usr/bin/g++".into(),
            argv: vec![
                "g++".into(),
                "-c".into(),
                "a.c".into(),
                "-o".into(),
                "a.o".into()
            ],
            cwd: "/tmp".into(),
            kind: "compile".into(),
            verdict: "allowed".into(),
            reason: "unlocked".into(),
            source: "shim".into(),
        }
    );
}

#[test]
fn every_kind_verdict_and_reason_is_written_as_named() {
    let argv = leak(args(&["ptxas", "--version"]));
    for (kind, verdict) in [
        (
            Kind::Probe,
            Verdict {
                allowed: true,
                reason: Reason::ProbeAllowed,
            },
        ),
        (
            Kind::Probe,
            Verdict {
                allowed: false,
                reason: Reason::StrictProbe,
            },
        ),
        (
            Kind::Compile,
            Verdict {
                allowed: false,
                reason: Reason::StartupLockdown,
            },
        ),
        (
            Kind::Compile,
            Verdict {
                allowed: false,
                reason: Reason::NoCompilation,
            },
        ),
        (
            Kind::Compile,
            Verdict {
                allowed: false,
                reason: Reason::Serving,
            },
        ),
    ] {
        let f = Fields {
            kind,
            verdict,
            source: "python",
            ..fields(b"ptxas", argv, b"/")
        };
        let record = parse_line(&line(LINE_BUDGET, f)).unwrap();
        assert_eq!(record.kind, kind.as_str());
        assert_eq!(record.verdict, verdict.as_str());
        assert_eq!(record.reason, verdict.reason.as_str());
        assert_eq!(record.source, "python");
    }
}

#[test]
fn ten_thousand_args_end_with_a_count_of_those_left_out() {
    let argv = leak(
        (0..10_000)
            .map(|i| format!("-DARG{i}=1").into_bytes())
            .collect(),
    );
    let record = parse_line(&line(LINE_BUDGET, fields(b"/usr/bin/gcc", argv, b"/tmp"))).unwrap();
    let (marker, kept) = record.argv.split_last().unwrap();
    assert!(kept.len() > 100, "kept only {}", kept.len());
    for (i, arg) in kept.iter().enumerate() {
        assert_eq!(arg, &format!("-DARG{i}=1"));
    }
    assert_eq!(
        marker,
        &format!("...[{} more args truncated]", 10_000 - kept.len())
    );
    assert_eq!(record.cwd, "/tmp");
}

#[test]
fn huge_single_argument_is_cut_and_the_rest_kept() {
    let big = "x".repeat(100 * 1024);
    let argv = leak(args(&["gcc", &big, "-o", "out.so"]));
    let text = line(LINE_BUDGET, fields(b"gcc", argv, b"/tmp"));
    let record = parse_line(&text).unwrap();
    assert_eq!(record.argv.len(), 4);
    assert!(record.argv[1].ends_with("...[truncated]"));
    assert!(big.starts_with(record.argv[1].trim_end_matches("...[truncated]")));
    assert_eq!(&record.argv[2..], ["-o", "out.so"]);
}

#[test]
fn huge_argument_in_a_small_buffer_is_cut_to_the_room_left() {
    let big = "y".repeat(100 * 1024);
    let argv = leak(args(&["gcc", &big, "-o", "out.so"]));
    let record = parse_line(&line(MIN_BUFFER, fields(b"gcc", argv, b"/tmp"))).unwrap();
    assert_eq!(record.argv[0], "gcc");
    assert!(
        record.argv[1].ends_with("...[truncated]"),
        "{:?}",
        record.argv
    );
    assert_eq!(record.argv[2], "...[2 more args truncated]");
}

#[test]
fn non_utf8_and_special_bytes_are_escaped_losslessly_for_ascii() {
    let argv: &'static [Vec<u8>] = leak(vec![
        b"g\xff++".to_vec(),
        "caf\u{e9} \u{1F600}".as_bytes().to_vec(),
        b"q\"b\\s\n\t\x01\x7f".to_vec(),
        b"cut\xc3".to_vec(),
        b"\xed\xa0\x80".to_vec(), // a surrogate: not UTF-8
    ]);
    let text = line(LINE_BUDGET, fields(b"/x/\xfe", argv, b"/tmp/\x80"));
    assert!(
        text.contains("\\u00ff") && text.contains("\\u0001") && text.contains("\\u000a"),
        "{text}"
    );
    let record = parse_line(&text).unwrap();
    let want: Vec<String> = argv.iter().map(|a| expected(a)).collect();
    assert_eq!(record.argv, want);
    assert_eq!(record.exe, "/x/\u{fe}");
    assert_eq!(record.cwd, "/tmp/\u{80}");
}

#[test]
fn cutting_never_splits_a_character_or_an_escape() {
    for unit in ["\u{e9}", "\u{1F600}", "\"", "\x01", "\u{80}"] {
        let big = unit.repeat(50_000);
        let argv = leak(vec![
            b"gcc".to_vec(),
            big.into_bytes(),
            b"\xff".repeat(50_000),
        ]);
        for size in [
            MIN_BUFFER,
            MIN_BUFFER + 1,
            MIN_BUFFER + 3,
            1000,
            2047,
            LINE_BUDGET,
        ] {
            let record = parse_line(&line(size, fields(b"gcc", argv, b"/"))).unwrap();
            let cut = record.argv[1].trim_end_matches("...[truncated]");
            assert!(
                cut.chars().all(|c| c.to_string() == unit),
                "{unit:?} {size}"
            );
        }
    }
}

#[test]
fn long_paths_and_source_are_cut() {
    let exe = "/e".repeat(5000);
    let cwd = "/c".repeat(5000);
    let argv = leak(args(&["gcc", "-c", "a.c"]));
    let f = Fields {
        source: "s".repeat(500).leak(),
        ..fields(
            exe.clone().leak().as_bytes(),
            argv,
            cwd.clone().leak().as_bytes(),
        )
    };
    let record = parse_line(&line(LINE_BUDGET, f)).unwrap();
    assert!(
        record.exe.ends_with("...[truncated]")
            && exe.starts_with(record.exe.trim_end_matches("...[truncated]"))
    );
    assert!(
        record.cwd.ends_with("...[truncated]")
            && cwd.starts_with(record.cwd.trim_end_matches("...[truncated]"))
    );
    assert!(record.source.ends_with("...[truncated]"));
    assert_eq!(record.argv, ["gcc", "-c", "a.c"]);
}

#[test]
fn buffers_larger_than_the_budget_are_used_only_up_to_it() {
    let argv = leak((0..2000).map(|i| format!("arg{i}").into_bytes()).collect());
    let text = line(64 * 1024, fields(b"gcc", argv, b"/"));
    assert!(
        text.len() <= LINE_BUDGET && text.len() > LINE_BUDGET - 100,
        "{}",
        text.len()
    );
}

#[test]
fn buffers_below_the_minimum_get_nothing() {
    let argv = leak(args(&["gcc"]));
    for size in [0, 1, 100, MIN_BUFFER - 1] {
        assert_eq!(line(size, fields(b"gcc", argv, b"/")), "");
    }
}

#[test]
fn times_and_ids_are_written_as_plain_numbers() {
    let argv = leak(args(&["gcc"]));
    for (time, want) in [
        (0.0, "0.000000"),
        (-5.0, "0.000000"),
        (f64::NAN, "0.000000"),
        (f64::INFINITY, "0.000000"),
        (1.9999999, "2.000000"),
        (1.5, "1.500000"),
        (1e30, "18446744073709551615.000000"),
    ] {
        let f = Fields {
            time,
            pid: i64::MIN,
            ppid: -1,
            tid: i64::MAX,
            ..fields(b"gcc", argv, b"/")
        };
        let text = line(LINE_BUDGET, f);
        assert!(text.starts_with(&format!("{{\"time\": {want}, ")), "{text}");
        let record = parse_line(&text).unwrap();
        assert_eq!(
            (record.pid, record.ppid, record.tid),
            (i64::MIN, -1, i64::MAX)
        );
    }
}

#[test]
fn random_inputs_always_give_valid_bounded_lines() {
    // A small xorshift: deterministic, no dependency.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..1500 {
        let nargs = (next() % 40) as usize;
        let argv: Vec<Vec<u8>> = (0..nargs)
            .map(|_| {
                let len = match next() % 10 {
                    0 => (next() % 3000) as usize,
                    _ => (next() % 20) as usize,
                };
                (0..len).map(|_| next() as u8).collect()
            })
            .collect();
        let argv = leak(argv);
        let exe: Vec<u8> = (0..next() % 200).map(|_| next() as u8).collect();
        let size = (next() % 5000) as usize;
        let text = line(size, fields(exe.leak(), argv, b"/w"));
        if size < MIN_BUFFER {
            continue;
        }
        let record = parse_line(&text).unwrap();
        for (i, got) in record.argv.iter().enumerate() {
            if i >= argv.len() || got.starts_with("...[") && got.ends_with(" more args truncated]")
            {
                assert_eq!(i, record.argv.len() - 1, "{got:?}");
                continue;
            }
            let want = expected(&argv[i]);
            match got.strip_suffix("...[truncated]") {
                Some(cut) if *got != want => assert!(want.starts_with(cut), "{got:?} vs {want:?}"),
                _ => assert_eq!(*got, want),
            }
        }
    }
}

#[test]
fn a_rank_is_written_after_the_ids_and_read_back() {
    let argv = leak(args(&["gcc"]));
    let f = Fields {
        rank: Some(7),
        ..fields(b"gcc", argv, b"/")
    };
    let text = line(LINE_BUDGET, f);
    assert!(text.contains("\"tid\": 12, \"rank\": 7, \"exe\""), "{text}");
    assert_eq!(parse_line(&text).unwrap().rank, Some(7));
    let text = line(LINE_BUDGET, fields(b"gcc", argv, b"/"));
    assert!(!text.contains("rank"), "{text}");
    assert_eq!(parse_line(&text).unwrap().rank, None);
}
