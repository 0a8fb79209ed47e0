//! The C ABI (interpose/include/precompile.h), called from a C program
//! linked against the shim: lockdown depth, per-thread serving, the
//! journal arm/disarm, classification, and their effect on real execs.

mod common;

use common::{by_tool, helpers, records, Scratch, Shim};

#[test]
fn the_c_abi_drives_the_lockdown() {
    let s = Scratch::new("abi");
    let armed = s.path("armed.jsonl");
    let shim = Shim::open(&s.journal());
    let out = s.dir.display().to_string();
    let ran = shim.run(
        &helpers().abi,
        &[
            env!("CARGO_PKG_VERSION"),
            &s.src(),
            &out,
            &armed.display().to_string(),
        ],
    );
    assert!(ran.has_line("all ok"), "{ran:#?}");
    ran.expect_code(0);
    ran.expect_line("child sees TORCH_PRECOMPILE_NO_COMPILATION=1");

    // the startup journal: everything but the armed window
    let recs = records(&s.journal());
    let gxx = by_tool(&recs, "g++");
    let verdict = |name: &str| -> Vec<String> {
        let out = s.path(&format!("{name}.o")).display().to_string();
        gxx.iter()
            .filter(|r| {
                r["argv"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a.as_str() == Some(&out))
            })
            .map(|r| {
                format!(
                    "{}/{}",
                    r["verdict"].as_str().unwrap(),
                    r["reason"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(verdict("open"), ["allowed/unlocked"]);
    assert_eq!(verdict("locked"), ["refused/no-compilation"]);
    assert_eq!(verdict("reopened"), ["allowed/unlocked"]);
    assert_eq!(verdict("other-thread"), ["allowed/unlocked"]);
    assert_eq!(verdict("serving"), ["refused/serving"]);
    assert_eq!(verdict("disarmed"), ["allowed/unlocked"]);
    assert!(
        verdict("armed").is_empty(),
        "the armed window went to the armed journal"
    );
    // the locked-down child shell journaled its own probe and refusal
    let child_refusals = gxx
        .iter()
        .filter(|r| r["reason"] == "startup-lockdown")
        .count();
    assert_eq!(child_refusals, 1, "{gxx:#?}");

    let armed_recs = records(&armed);
    assert_eq!(armed_recs.len(), 1, "{armed_recs:#?}");
    assert_eq!(armed_recs[0]["verdict"], "refused");
    assert_eq!(armed_recs[0]["reason"], "no-compilation");
    for name in ["open", "reopened", "other-thread", "disarmed"] {
        assert!(s.path(&format!("{name}.o")).exists(), "{name}.o");
    }
    for name in ["locked", "serving", "armed"] {
        assert!(!s.path(&format!("{name}.o")).exists(), "{name}.o");
    }
}

#[test]
fn lockdown_startup_reports_the_environment() {
    let s = Scratch::new("abi-startup");
    let code = "import ctypes; lib = ctypes.CDLL(None); \
                print('startup', lib.precompile_lockdown_startup(), 'locked', lib.precompile_locked_here())";
    let locked = Shim::locked(&s.journal()).run(common::python(), &["-c", code]);
    locked.expect_line("startup 1 locked 1");
    let open = Shim::open(&s.journal()).run(common::python(), &["-c", code]);
    open.expect_line("startup 0 locked 0");
}
