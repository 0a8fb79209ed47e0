//! What std would otherwise provide to a library without it: the C library
//! itself (the `libc` crate leaves linking it to std when its `std` feature is
//! on, as the workspace's other users have it), the allocator (libc's malloc,
//! as std's `System`) and the panic handler (abort: nothing on the exec path
//! may panic, and a panic elsewhere is a bug). Only in builds without std (see
//! lib.rs); `cargo test` builds get std's own, and the unwinder linked in.

#[cfg(not(any(test, panic = "unwind")))]
#[link(name = "c")]
extern "C" {}

// Builds that unwind: libgcc_eh.a linked in whole (build.rs found it), so
// that its symbols are defined before std's `-lgcc_s` comes up in the link
// line and (with --as-needed) libgcc_s.so.1 is never recorded as NEEDED.
#[cfg(all(any(test, panic = "unwind"), precompile_gcc_eh))]
#[link(name = "gcc_eh", kind = "static", modifiers = "+whole-archive")]
extern "C" {}

#[cfg(not(any(test, panic = "unwind")))]
mod imp {
    use core::alloc::{GlobalAlloc, Layout};
    use core::ffi::c_void;

    /// malloc's alignment guarantee on the 64-bit targets this builds for.
    const MIN_ALIGN: usize = 16;

    struct Malloc;

    // SAFETY: each method returns memory from libc's allocator
    // with at least the layout's size and alignment, or null; `dealloc` and
    // `realloc` get only pointers this allocator returned.
    unsafe impl GlobalAlloc for Malloc {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if layout.align() <= MIN_ALIGN && layout.align() <= layout.size() {
                // SAFETY: malloc has no preconditions.
                unsafe { libc::malloc(layout.size()) }.cast()
            } else {
                aligned(layout)
            }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            if layout.align() <= MIN_ALIGN && layout.align() <= layout.size() {
                // SAFETY: calloc has no preconditions.
                unsafe { libc::calloc(layout.size(), 1) }.cast()
            } else {
                let p = aligned(layout);
                if !p.is_null() {
                    // SAFETY: `p` is a fresh allocation of `layout.size()` bytes.
                    unsafe { core::ptr::write_bytes(p, 0, layout.size()) };
                }
                p
            }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
            // SAFETY: `ptr` came from malloc, calloc, realloc or posix_memalign.
            unsafe { libc::free(ptr.cast()) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if layout.align() <= MIN_ALIGN && layout.align() <= new_size {
                // SAFETY: `ptr` came from this allocator with malloc's alignment.
                unsafe { libc::realloc(ptr.cast(), new_size) }.cast()
            } else {
                let Ok(new) = Layout::from_size_align(new_size, layout.align()) else {
                    return core::ptr::null_mut();
                };
                let p = aligned(new);
                if !p.is_null() {
                    // SAFETY: both blocks are live and at least
                    // min(old, new) bytes long; they do not overlap.
                    unsafe {
                        core::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                        libc::free(ptr.cast());
                    }
                }
                p
            }
        }
    }

    fn aligned(layout: Layout) -> *mut u8 {
        let mut out: *mut c_void = core::ptr::null_mut();
        let align = layout.align().max(core::mem::size_of::<usize>());
        // SAFETY: `align` is a power of two and a multiple of the pointer
        // size, as posix_memalign requires; `out` is a valid out-parameter.
        if unsafe { libc::posix_memalign(&mut out, align, layout.size()) } != 0 {
            return core::ptr::null_mut();
        }
        out.cast()
    }

    #[global_allocator]
    static ALLOCATOR: Malloc = Malloc;

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        crate::sys::write_stderr(
            b"precompile: internal error in libprecompile.so (panic); aborting\n",
        );
        // SAFETY: abort has no preconditions and does not return.
        unsafe { libc::abort() }
    }
}
