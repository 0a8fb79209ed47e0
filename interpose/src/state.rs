//! What the shim learned at process start: the classification rules, where
//! the library itself lives, and the settings it hands on to children.
//!
//! Built once (by the constructor) and read afterwards with one atomic load.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use policy::{env, Rules};

use crate::envp::{Wanted, LOCKED_ENTRY};
use crate::journal::{self, JournalPath};

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

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// The settings. Before the constructor ran (only another library's
/// constructor can exec that early) they are loaded on the spot.
pub fn get() -> &'static Settings {
    match SETTINGS.get() {
        Some(s) => s,
        None => SETTINGS.get_or_init(load),
    }
}

/// Loads the settings from the environment; called by the constructor.
pub fn init() {
    let _ = get();
}

fn var(name: &str) -> Option<String> {
    std::env::var_os(name).and_then(|v| v.into_string().ok())
}

fn load() -> Settings {
    let strict = env::is_on(var(env::STRICT).as_deref());
    policy::lockdown::set_startup(env::is_on(var(env::NO_COMPILATION).as_deref()));
    let journal = var(env::JOURNAL).filter(|p| !p.is_empty()).and_then(|p| {
        let cwd = std::env::current_dir().ok()?;
        JournalPath::new(p.as_bytes(), cwd.as_os_str().as_encoded_bytes())
    });
    journal::set_startup(journal);
    let rules = Rules::from_env_values(
        var(env::COMPILERS).as_deref(),
        var(env::ALLOW).as_deref(),
        strict,
    );
    let start_entries = env::PROPAGATED_FROM_START
        .iter()
        .filter_map(|name| {
            let value = std::env::var_os(name)?;
            let mut entry = name.as_bytes().to_vec();
            entry.push(b'=');
            entry.extend_from_slice(value.as_encoded_bytes());
            CString::new(entry).ok()
        })
        .collect();
    Settings {
        rules,
        self_path: locate_self(),
        start_entries,
        allow_at_start: std::env::var_os(env::ALLOW).is_some(),
        rank: env::rank(var(env::RANK).as_deref()),
    }
}

/// This library's absolute path, found with `dladdr` on one of its own
/// functions. `None` inside an executable (the unit tests link this code
/// into one), so that a test binary never preloads itself into children.
fn locate_self() -> Option<&'static CStr> {
    // SAFETY: an all-zero Dl_info (null pointers) is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
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
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()));
    let file = path.file_name()?.to_str()?;
    if !file.contains(".so") {
        return None;
    }
    if path.is_absolute() {
        // as the loader found it: no allocation, no realpath walk
        return Some(name);
    }
    let abs = std::fs::canonicalize(path).ok()?;
    let owned = CString::new(abs.into_os_string().into_encoded_bytes()).ok()?;
    Some(Box::leak(owned.into_boxed_c_str()))
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
    let locked = policy::lockdown::current() != policy::Lock::Open;
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
