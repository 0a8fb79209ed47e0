//! Proves the exec-path functions never allocate: they may run in a vfork
//! child, where malloc's lock can be held by a thread that no longer exists.
//!
//! Counting needs a `GlobalAlloc`, whose trait is `unsafe`; this test crate is
//! the only place in `policy` with `unsafe`, and it only forwards to `System`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use policy::journal::{format_record, Fields, LINE_BUDGET};
use policy::{decide, lockdown, Kind, Rules};

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

fn note() {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: every method forwards to `System` unchanged; the counting touches
// only const-initialised thread locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_in(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn counter_sees_allocations() {
    assert!(allocations_in(|| drop(std::hint::black_box(vec![1u8; 10]))) > 0);
}

#[test]
fn classify_decide_lockdown_and_format_never_allocate() {
    // Everything that may allocate is built before counting starts.
    let rules = Rules::from_env_values(Some("mycc:other"), Some("ninja"), true);
    let huge = vec![b'x'; 100 * 1024];
    let many: Vec<Vec<u8>> = (0..10_000)
        .map(|i| format!("-DA{i}").into_bytes())
        .collect();
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"g++", b"-v", b"foo.c"],
        vec![b"/usr/bin/x86_64-linux-gnu-g++-12", b"-c", b"a.cpp"],
        vec![b"ccache", b"distcc", b"g++", b"-c", b"a.c"],
        vec![b"ptxas-blackwell", b"--version"],
        vec![b"mycc-3", b"x.c"],
        vec![b"ldconfig"],
        vec![b"g\xff++", b"\xfe\xfd", b"q\"\\\n"],
        vec![b"gcc", &huge, b"-o", b"out"],
    ];
    let mut buf = [0u8; LINE_BUDGET];
    let mut written = 0;
    let mut kinds = Vec::with_capacity(cases.len() * 2);

    let count = allocations_in(|| {
        let lock = {
            lockdown::set_startup(false);
            lockdown::enter();
            let serving = lockdown::serving_entered(0);
            let lock = lockdown::current(serving);
            lockdown::serving_exited(serving);
            lockdown::exit();
            lockdown::exit();
            lockdown::depth();
            lock
        };
        for argv in &cases {
            let kind = rules.classify(argv[0], Some(b"/usr/bin/g++-12"), argv.iter().copied());
            kinds.push(kind);
            kinds.push(rules.classify(argv[0], None, argv.iter().copied()));
            let verdict = decide(kind, lock, rules.strict());
            let fields = Fields {
                time: 1.5,
                pid: 1,
                ppid: 0,
                tid: 1,
                rank: Some(3),
                exe: argv[0],
                argv: argv.iter().copied(),
                cwd: b"/tmp/\xff",
                kind,
                verdict,
                source: "shim",
            };
            written += format_record(&mut buf, fields);
        }
        for head in [&b"#!  /usr/bin/as  --32 \n.text"[..], b"\x7fELF", b"#!"] {
            std::hint::black_box(policy::script::shebang(head));
        }
        let verdict = decide(Kind::Compile, lock, false);
        let fields = Fields {
            time: 2.0,
            pid: 1,
            ppid: 0,
            tid: 1,
            rank: Some(3),
            exe: b"gcc",
            argv: many.iter().map(Vec::as_slice),
            cwd: &huge,
            kind: Kind::Compile,
            verdict,
            source: "shim",
        };
        written += format_record(&mut buf, fields);
        let _ = (
            verdict.reason.as_str(),
            verdict.reason.explain(),
            verdict.as_str(),
            Kind::Probe.as_str(),
        );
    });

    assert_eq!(count, 0, "the exec path allocated {count} times");
    assert!(written > 0);
    assert!(
        kinds.contains(&Kind::Compile)
            && kinds.contains(&Kind::Probe)
            && kinds.contains(&Kind::Other)
    );
}
