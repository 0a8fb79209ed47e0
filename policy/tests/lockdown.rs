//! The lockdown state machine. Its state is process-global, so the tests in
//! this binary take turns. (The per-thread serving depth is kept by the shim
//! and by the Python extension, and tested there.)

use std::sync::{Barrier, Mutex, MutexGuard};
use std::thread;

use policy::{lockdown, Lock};

static TURN: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    let guard = TURN.lock().unwrap_or_else(|e| e.into_inner());
    lockdown::set_startup(false);
    while lockdown::exit().is_some() {}
    guard
}

#[test]
fn depth_counts_nested_entries() {
    let _t = turn();
    assert_eq!(lockdown::current(0), Lock::Open);
    assert_eq!(lockdown::enter(), 1);
    assert_eq!(lockdown::enter(), 2);
    assert_eq!(lockdown::current(0), Lock::NoCompilation);
    assert_eq!(lockdown::exit(), Some(1));
    assert_eq!(lockdown::depth(), 1);
    assert_eq!(lockdown::exit(), Some(0));
    assert_eq!(lockdown::current(0), Lock::Open);
}

#[test]
fn exit_at_zero_is_refused_and_keeps_zero() {
    let _t = turn();
    assert_eq!(lockdown::exit(), None);
    assert_eq!(lockdown::depth(), 0);
}

#[test]
fn depth_never_goes_below_zero_with_racing_threads() {
    let _t = turn();
    let threads = 8;
    let start = Barrier::new(threads);
    let net: i64 = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|id| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let mut net = 0i64;
                    for i in 0..20_000 {
                        // Odd threads exit more than they enter: most of those
                        // exits meet zero and must be refused, not wrap.
                        if id % 2 == 0 || i % 3 == 0 {
                            lockdown::enter();
                            net += 1;
                        }
                        if lockdown::exit().is_some() {
                            net -= 1;
                        }
                        assert!(lockdown::depth() < 1_000_000, "depth wrapped");
                    }
                    net
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert!(net >= 0);
    assert_eq!(i64::from(lockdown::depth()), net);
}

#[test]
fn a_serving_depth_counts_and_never_goes_below_zero() {
    let _t = turn();
    assert_eq!(lockdown::serving_entered(0), 1);
    assert_eq!(lockdown::serving_entered(u32::MAX), u32::MAX);
    assert_eq!(lockdown::serving_exited(2), Some(1));
    assert_eq!(lockdown::serving_exited(0), None);
    assert_eq!(lockdown::current(2), Lock::Serving);
    assert_eq!(lockdown::current(0), Lock::Open);
}

#[test]
fn startup_outranks_depth_which_outranks_serving() {
    let _t = turn();
    lockdown::enter();
    lockdown::set_startup(true);
    assert!(lockdown::startup());
    assert_eq!(lockdown::current(1), Lock::Startup);
    lockdown::set_startup(false);
    assert_eq!(lockdown::current(1), Lock::NoCompilation);
    lockdown::exit();
    assert_eq!(lockdown::current(1), Lock::Serving);
    assert_eq!(lockdown::current(0), Lock::Open);
}

#[test]
fn no_compilation_applies_to_every_thread() {
    let _t = turn();
    lockdown::enter();
    let seen = thread::spawn(|| lockdown::current(0)).join().unwrap();
    lockdown::exit();
    assert_eq!(seen, Lock::NoCompilation);
}
