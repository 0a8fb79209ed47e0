/*
 * The C-variadic members of the exec family, which stable Rust cannot define.
 *
 * hooks.rs exports execl, execlp and execle as naked tail jumps to the
 * functions below. Each gathers its arguments into an array on its own stack
 * (a VLA, as glibc's own execl does: no heap, safe in a vfork child) and
 * calls this library's execv, execvp or execve, where the gate lives.
 *
 * Symbols here are hidden (-fvisibility=hidden): only the Rust side exports.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

/* Counts the arguments after `arg` up to the terminating NULL. */
static size_t count_rest(va_list ap)
{
	size_t n = 0;
	while (va_arg(ap, char *) != NULL) {
		if (++n > (size_t)INT_MAX)
			break;
	}
	return n;
}

/* execl(path, arg0, ..., NULL) */
int precompile_c_execl(const char *path, const char *arg, ...)
{
	va_list ap, count;
	va_start(ap, arg);
	va_copy(count, ap);
	size_t n = count_rest(count);
	va_end(count);
	if (n >= (size_t)INT_MAX) {
		va_end(ap);
		errno = E2BIG;
		return -1;
	}
	char *argv[n + 2];
	argv[0] = (char *)arg;
	for (size_t i = 1; i <= n + 1; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	return execv(path, argv);
}

/* execlp(file, arg0, ..., NULL) */
int precompile_c_execlp(const char *file, const char *arg, ...)
{
	va_list ap, count;
	va_start(ap, arg);
	va_copy(count, ap);
	size_t n = count_rest(count);
	va_end(count);
	if (n >= (size_t)INT_MAX) {
		va_end(ap);
		errno = E2BIG;
		return -1;
	}
	char *argv[n + 2];
	argv[0] = (char *)arg;
	for (size_t i = 1; i <= n + 1; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	return execvp(file, argv);
}

/* execle(path, arg0, ..., NULL, envp) */
int precompile_c_execle(const char *path, const char *arg, ...)
{
	va_list ap, count;
	va_start(ap, arg);
	va_copy(count, ap);
	size_t n = count_rest(count);
	va_end(count);
	if (n >= (size_t)INT_MAX) {
		va_end(ap);
		errno = E2BIG;
		return -1;
	}
	char *argv[n + 2];
	argv[0] = (char *)arg;
	for (size_t i = 1; i <= n + 1; i++)
		argv[i] = va_arg(ap, char *);
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}
