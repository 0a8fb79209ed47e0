//! What the shim learned at process start: the classification rules, where
//! the library itself lives, and the settings it hands on to children.
//!
//! Built once (by the constructor) and read afterwards with one atomic load.

use alloc::boxed::Box;
use alloc::ffi::CString;
use alloc::vec::Vec;
use core::ffi::CStr;

use policy::{env, Rules};

use crate::envp::{Wanted, LOCKED_ENTRY};
use crate::journal::{self, JournalPath};
use crate::once::Once;
use crate::raw::basename;

pub struct Settings {
    pub rules: Rules,
    /// Absolute path of libprecompile.so; `None` when the code is not
    /// running from a shared object (unit tests) or it cannot be found.
    pub self_path: Option<&'static CStr>,
    /// `PRECOMPILE_STRICT`/`_COMPILERS`/`_ALLOW` entries exactly as they were
    /// at start, handed on to every child.
    pub start_entries: Vec<CString>,
    /// Whether `PRECOMPILE_ALLOW` was set at start.
    pub allow_at_start: bool,
    /// `RANK` at start (a torchrun worker's global rank, inherited by the
    /// processes it forks), written into every journal record.
    pub rank: Option<i64>,
}

// In `.data`, not `.bss` (as `real::REAL`): the loader writes the last
// writable page it maps (`.data`, then `.got.plt`) while relocating, and
// `.bss` follows; where `.bss` crosses into a page of its own, the
// constructor's first store there is one or two more page faults in every
// process, a good part of what an exec costs beyond the constructor's own
// work (perf stat: 58.0 page faults per exec of /bin/true with these in
// `.data`, 60.0 with them in a `.bss` that crossed; an empty preloaded
// library: 56.5). For the same reason `load` stores nothing that already
// holds its value.
#[link_section = ".data"]
static SETTINGS: Once<Settings> = Once::new();

/// The settings. Before the constructor ran (only another library's
/// constructor can exec that early) they are loaded on the spot.
pub fn get() -> &'static Settings {
    match SETTINGS.get() {
        Some(s) => s,
        None => SETTINGS.get_or_init(|| load(&StartEnv::read())),
    }
}

/// Loads the settings from `start`; called by the constructor.
pub fn init(start: &StartEnv<'_>) {
    let _ = SETTINGS.get_or_init(|| load(start));
}

/// The variables the shim reads at start, found in ONE pass over `environ`
/// with no lock and no copy. The shim is loaded into every process of the
/// tree, and each `std::env::var_os` (a dozen at start) scanned the whole
/// environment again under std's lock (scripts/bench exec).
pub struct StartEnv<'a> {
    values: [Option<&'a [u8]>; START_NAMES.len()],
}

/// What [`StartEnv`] looks for; `StartEnv::get` takes one of these names.
const START_NAMES: [&str; 8] = [
    env::LOG,
    env::NO_COMPILATION,
    env::JOURNAL,
    env::STRICT,
    env::COMPILERS,
    env::ALLOW,
    env::RANK,
    env::PYTHONPATH,
];

impl<'a> StartEnv<'a> {
    /// Reads the process environment. The values point into `environ`'s
    /// strings: use them before changing the environment (the constructor
    /// copies or parses every one first).
    pub fn read() -> StartEnv<'a> {
        // SAFETY: called before `main` (the constructor, or another library's
        // constructor reaching a hook first), when no other thread changes the
        // environment; in a copy of the library dlopen'ed later this reads
        // `environ` under `getenv`'s own contract (std's lock never covered
        // C's or Python's setenv either). The callers read every value before
        // they change the environment themselves.
        let environ = unsafe { crate::raw::environ() };
        StartEnv::from_entries(environ.bytes())
    }

    /// The first `NAME=value` entry of each name (as `getenv` finds it).
    pub fn from_entries(entries: impl Iterator<Item = &'a [u8]>) -> StartEnv<'a> {
        let mut values = [None; START_NAMES.len()];
        for entry in entries {
            for (name, slot) in START_NAMES.iter().zip(values.iter_mut()) {
                if slot.is_none() {
                    if let Some(value) = crate::raw::value_of(entry, name.as_bytes()) {
                        *slot = Some(value);
                    }
                }
            }
        }
        StartEnv { values }
    }

    /// The value of `name` (one of START_NAMES), as bytes.
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        let i = START_NAMES.iter().position(|n| *n == name)?;
        self.values.get(i).copied().flatten()
    }

    /// The value as UTF-8 text; `None` when unset or not UTF-8 (as
    /// `std::env::var` reads it).
    pub fn text(&self, name: &str) -> Option<&'a str> {
        core::str::from_utf8(self.get(name)?).ok()
    }
}

fn load(start: &StartEnv<'_>) -> Settings {
    let strict = env::is_on(start.text(env::STRICT));
    // stored only when it differs from the initial state (see SETTINGS)
    if env::is_on(start.text(env::NO_COMPILATION)) {
        policy::lockdown::set_startup(true);
    }
    let journal = start
        .text(env::JOURNAL)
        .filter(|p| !p.is_empty())
        .and_then(|p| {
            let mut cwd_buf = [0u8; crate::resolve::PATH_BUF];
            let cwd = crate::sys::current_dir(&mut cwd_buf).ok()?;
            JournalPath::new(p.as_bytes(), cwd)
        });
    if journal.is_some() {
        journal::set_startup(journal);
    }
    let rules = Rules::from_env_values(start.text(env::COMPILERS), start.text(env::ALLOW), strict);
    let start_entries = env::PROPAGATED_FROM_START
        .iter()
        .filter_map(|name| {
            let value = start.get(name)?;
            let mut entry = name.as_bytes().to_vec();
            entry.push(b'=');
            entry.extend_from_slice(value);
            CString::new(entry).ok()
        })
        .collect();
    Settings {
        rules,
        self_path: locate_self(),
        start_entries,
        allow_at_start: start.get(env::ALLOW).is_some(),
        rank: env::rank(start.text(env::RANK)),
    }
}

/// This library's absolute path, found with `dladdr` on one of its own
/// functions. `None` inside an executable (the unit tests link this code
/// into one), so that a test binary never preloads itself into children.
fn locate_self() -> Option<&'static CStr> {
    // SAFETY: an all-zero Dl_info (null pointers) is a valid value.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let addr = locate_self as *const libc::c_void;
    // SAFETY: `addr` is an address inside this object; `info` is a valid
    // out-parameter.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 {
        return None;
    }
    // SAFETY: on success dli_fname is null or the loader's own name for this
    // object, alive as long as the object is loaded. This library is never
    // unloaded (a preload cannot be; a dlopen'ed copy is not closed by its
    // users, and its hooks could not be closed safely anyway), so 'static.
    let name: &'static CStr = unsafe { crate::raw::c_str(info.dli_fname) }?;
    let file = basename(name.to_bytes());
    if !file.windows(3).any(|w| w == b".so") {
        return None;
    }
    if name.to_bytes().first() == Some(&b'/') {
        // as the loader found it: no allocation, no realpath walk
        return Some(name);
    }
    let abs = crate::sys::realpath(name)?;
    Some(Box::leak(abs.into_boxed_c_str()))
}

/// The lock that holds for the calling thread: the process-wide state
/// (`policy::lockdown`) and this thread's serving depth. Exec-path safe.
pub fn lock() -> policy::Lock {
    policy::lockdown::current(crate::sys::serving_depth())
}

/// Room for the entries a child may be forced to carry: lockdown, journal
/// and the three startup settings.
pub type Forced = [&'static CStr; 5];

/// What every exec the shim lets through must hand on, given the live state.
/// Allocation-free: exec-path safe.
pub fn wanted<'a>(s: &'static Settings, forced: &'a mut Forced) -> Wanted<'a> {
    let mut n = 0usize;
    let mut add = |entry: &'static CStr| {
        if let Some(slot) = forced.get_mut(n) {
            *slot = entry;
            n = n.saturating_add(1);
        }
    };
    let locked = lock() != policy::Lock::Open;
    if locked {
        add(LOCKED_ENTRY);
    }
    if let Some(j) = journal::armed() {
        add(j.entry());
    }
    for e in &s.start_entries {
        add(e.as_c_str());
    }
    // Under a lockdown nobody below its start loosens the compiler list: the
    // allowed names are the start's (forced above), or none when it had none.
    const ALLOW: &[&[u8]] = &[env::ALLOW.as_bytes()];
    let stripped: &'static [&'static [u8]] = if locked && !s.allow_at_start {
        ALLOW
    } else {
        &[]
    };
    Wanted {
        preload: s.self_path.map(CStr::to_bytes),
        forced: forced.get(..n).unwrap_or(&[]),
        stripped,
    }
}
