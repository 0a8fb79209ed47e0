//! A value set once and read with one atomic load afterwards: std's
//! `OnceLock`, for a library without std. The constructor sets the values
//! before `main`; a reader that comes first (another library's constructor
//! exec'ing) sets them itself. A second thread arriving while one sets the
//! value waits for it (only possible before the constructor ran).

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, Ordering};

const EMPTY: u8 = 0;
const BUSY: u8 = 1;
const READY: u8 = 2;

pub struct Once<T> {
    state: AtomicU8,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is written once, by the one thread that moved the state
// from EMPTY to BUSY, and read only after the state is READY (Release store,
// Acquire load), so it is shared like a `&T`.
unsafe impl<T: Send + Sync> Sync for Once<T> {}

impl<T> Once<T> {
    pub const fn new() -> Once<T> {
        Once {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The value, once set. One atomic load: exec-path safe.
    pub fn get(&self) -> Option<&T> {
        if self.state.load(Ordering::Acquire) == READY {
            // SAFETY: READY is stored only after the value was written, and
            // it is never written again.
            Some(unsafe { (*self.value.get()).assume_init_ref() })
        } else {
            None
        }
    }

    /// The value, set with `init` if nobody set it yet.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        if self
            .state
            .compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Acquire)
            .is_ok()
        {
            let value = init();
            // SAFETY: this thread alone moved the state to BUSY; no reader
            // looks at the value before READY.
            unsafe { (*self.value.get()).write(value) };
            self.state.store(READY, Ordering::Release);
        }
        loop {
            if let Some(v) = self.get() {
                return v;
            }
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_once_and_kept() {
        static CELL: Once<u32> = Once::new();
        assert!(CELL.get().is_none());
        assert_eq!(*CELL.get_or_init(|| 7), 7);
        assert_eq!(*CELL.get_or_init(|| 8), 7);
        assert_eq!(CELL.get(), Some(&7));
    }

    #[test]
    fn racing_threads_see_one_value() {
        static CELL: Once<usize> = Once::new();
        let got: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|i| s.spawn(move || *CELL.get_or_init(|| i)))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(got.iter().all(|&v| v == got[0]));
    }
}
