/*
 * precompile.h: the C ABI of libprecompile.so, the precompile LD_PRELOAD shim.
 *
 * The contract is docs/CONTRACTS.md; the implementation interpose/src/abi.rs.
 * The Python layer reaches these through ctypes.CDLL(None) when the shim is
 * preloaded. None of them is meant for an exec path; all are thread-safe.
 */
#ifndef PRECOMPILE_H
#define PRECOMPILE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, a static string such as "0.1.0"; never free it. */
const char *precompile_version(void);

/* Process-wide lockdown (no_compilation()): depth += 1; returns the new depth.
 * While the depth is above 0 every compile in this process is refused, and
 * every exec the shim lets through carries TORCH_PRECOMPILE_NO_COMPILATION=1. */
uint32_t precompile_lockdown_enter(void);

/* depth -= 1; returns the new depth, or -1 if it was already 0. */
int64_t precompile_lockdown_exit(void);

/* The process-wide depth. */
uint32_t precompile_lockdown_depth(void);

/* 1 if TORCH_PRECOMPILE_NO_COMPILATION=1 was set at process start (a lockdown
 * that cannot be exited), else 0. */
int precompile_lockdown_startup(void);

/* The calling thread's serving depth += 1 (serving()); returns the new depth. */
uint32_t precompile_serving_enter(void);

/* The calling thread's serving depth -= 1; returns it, or -1 if it was 0. */
int64_t precompile_serving_exit(void);

/* The calling thread's serving depth. */
uint32_t precompile_serving_depth(void);

/* 1 if a compile started by the calling thread now would be refused: startup
 * lockdown, process-wide depth > 0, or this thread serving. */
int precompile_locked_here(void);

/* Appends every later compile/probe decision of this process, and of the
 * children it starts, to PATH (made absolute; created if missing).
 * Returns 0, or -1 with errno set (EINVAL for NULL or "", else open(2)'s). */
int precompile_journal_arm(const char *path);

/* Back to the journal named by PRECOMPILE_JOURNAL at start, if any. Returns 0. */
int precompile_journal_disarm(void);

/* What an exec of EXE with ARGV (NULL-terminated; NULL = empty) would be:
 * 0 other, 1 version probe, 2 compile. A bare name is looked up on PATH and
 * symlinks are followed, as the exec hooks do. */
int precompile_classify(const char *exe, const char *const *argv);

#ifdef __cplusplus
}
#endif

#endif /* PRECOMPILE_H */
