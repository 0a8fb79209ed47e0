/*
 * The two unwinder entry points that Rust's precompiled core and alloc name:
 * the personality routine of their unwind tables, and _Unwind_Resume, which
 * their cleanup landing pads end in. std (with the unwinder) defines them;
 * the shim is built without std and with panic = "abort" (lib.rs), so nothing
 * in it ever starts an unwind. Should a foreign unwind pass through its frames
 * (a forced unwind of a cancelled thread), they have no cleanups to run:
 * unwinding continues past them, as through C frames, and no landing pad is
 * ever entered.
 *
 * Weak: a build with std (`cargo test` unwinds, and links std) uses std's
 * personality and the unwinder's _Unwind_Resume. Hidden
 * (-fvisibility=hidden): no other object sees these.
 */
#include <stdlib.h>
#include <unwind.h>

__attribute__((weak)) _Unwind_Reason_Code
rust_eh_personality(int version, _Unwind_Action actions,
		    _Unwind_Exception_Class exception_class,
		    struct _Unwind_Exception *exception,
		    struct _Unwind_Context *context)
{
	(void)version;
	(void)actions;
	(void)exception_class;
	(void)exception;
	(void)context;
	return _URC_CONTINUE_UNWIND;
}

/* Never reached: no landing pad is entered (see above). */
__attribute__((weak, noreturn)) void _Unwind_Resume(struct _Unwind_Exception *exception)
{
	(void)exception;
	abort();
}
