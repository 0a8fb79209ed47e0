//! The journal under load: many processes appending at once never tear or
//! interleave a line, and an oversized record is cut to one bounded line.

mod common;

use common::{helpers, records, Scratch, Shim};

#[test]
fn eight_processes_times_fifty_probes_write_whole_lines() {
    let s = Scratch::new("journal-concurrent");
    // a deep working directory makes every record ~2 KiB (the cwd is in it),
    // so a writer that split its line would show up as torn lines
    let mut deep = s.dir.clone();
    for i in 0..8 {
        deep.push(format!("{i}-{}", "d".repeat(200)));
    }
    std::fs::create_dir_all(&deep).unwrap();
    let shim = Shim::open(&s.journal());
    let children: Vec<_> = (0..8)
        .map(|_| {
            shim.command(&helpers().spawner)
                .current_dir(&deep)
                .args(["spawn-loop", "50", "/usr/bin/g++", "g++", "--version"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "failures=0");
    }
    let text = std::fs::read_to_string(s.journal()).unwrap();
    assert!(text.ends_with('\n'));
    let recs = records(&s.journal()); // panics on any line that is not a whole record
    assert_eq!(recs.len(), 400);
    let mut pids: Vec<i64> = recs.iter().map(|r| r["pid"].as_i64().unwrap()).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 8, "records come from 8 writers");
    assert!(recs
        .iter()
        .all(|r| r["kind"] == "probe" && r["verdict"] == "allowed"));
    let deep = deep.display().to_string();
    for r in &recs {
        // policy may cut a long field: then it ends with "...[truncated]"
        let cwd = r["cwd"].as_str().unwrap();
        let kept = cwd.strip_suffix("...[truncated]").unwrap_or(cwd);
        assert!(deep.starts_with(kept) && kept.len() > 900, "{cwd}");
    }
    assert!(
        text.len() > 400 * 1000,
        "records are long: {} bytes",
        text.len()
    );
}

#[test]
fn an_oversized_argv_is_cut_to_one_bounded_line() {
    let s = Scratch::new("journal-long");
    let long: Vec<String> = (0..200)
        .map(|i| format!("-DARG{i}={}", "x".repeat(60)))
        .collect();
    let mut args = vec![
        "/usr/bin/g++".to_owned(),
        "g++".to_owned(),
        "-c".to_owned(),
        s.src(),
    ];
    args.extend(long);
    args.extend(["-o".to_owned(), s.path("a.o").display().to_string()]);
    Shim::locked(&s.journal())
        .spawner("posix_spawn", &args)
        .expect_line("spawn=1");
    let text = std::fs::read_to_string(s.journal()).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(text.len() <= 4097, "line of {} bytes", text.len());
    let recs = records(&s.journal());
    let argv = recs[0]["argv"].as_array().unwrap();
    let last = argv.last().unwrap().as_str().unwrap();
    assert!(last.contains("more args truncated"), "{last}");
    assert_eq!(recs[0]["verdict"], "refused");
}

#[test]
fn an_unwritable_journal_does_not_change_the_decision() {
    let s = Scratch::new("journal-unwritable");
    let shim = Shim::locked(&s.path("no-such-dir/journal.jsonl"));
    let ran = shim.spawner(
        "posix_spawn",
        &["/usr/bin/g++", "g++", "-c", &s.src(), "-o", "/dev/null"],
    );
    ran.expect_line("spawn=1");
    assert_eq!(ran.refusals().len(), 1);
    let shim = Shim::open(&s.path("no-such-dir/journal.jsonl"));
    let ran = shim.spawner("posix_spawn", &["/usr/bin/g++", "g++", "--version"]);
    ran.expect_line("status=0");
}

#[test]
fn a_process_started_with_a_rank_journals_it() {
    let s = Scratch::new("journal-rank");
    let probe = ["/usr/bin/g++", "g++", "--version"];
    Shim::locked(&s.journal())
        .with("PRECOMPILE_STRICT", "1")
        .with("RANK", "3")
        .spawner("posix_spawn", &probe)
        .expect_line("spawn=1");
    // no RANK, or one that is not a rank: no `rank` key rather than a wrong one
    for rank in [None, Some("-1")] {
        let mut shim = Shim::locked(&s.journal()).with("PRECOMPILE_STRICT", "1");
        if let Some(r) = rank {
            shim = shim.with("RANK", r);
        }
        shim.spawner("posix_spawn", &probe).expect_line("spawn=1");
    }
    let recs = records(&s.journal());
    assert_eq!(recs.len(), 3, "{recs:?}");
    assert_eq!(recs[0]["rank"], 3, "{:?}", recs[0]);
    assert!(
        recs[1].get("rank").is_none() && recs[2].get("rank").is_none(),
        "{recs:?}"
    );
}
