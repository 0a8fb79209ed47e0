/*
 * abi: exercises libprecompile.so's C ABI from C, as the Python layer will
 * (through symbols resolved at run time). Run with the shim preloaded.
 *
 * usage: abi VERSION SRC OUTDIR ARMED_JOURNAL
 *   compiles SRC with /usr/bin/g++ at several points to observe the gate;
 *   prints "ok ..." per check; exits 1 at the first failed check.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "precompile.h"

extern char **environ;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			printf("FAIL line %d: %s: ", __LINE__, #cond);       \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
			exit(1);                                             \
		}                                                            \
	} while (0)

static const char *src, *outdir;

/* posix_spawn g++ -c SRC -o OUTDIR/NAME.o; returns posix_spawn's result
 * (0 started and waited, else the error number). */
static int compile(const char *name)
{
	char out[4096];
	snprintf(out, sizeof out, "%s/%s.o", outdir, name);
	char *argv[] = {"g++", "-c", (char *)src, "-o", out, NULL};
	pid_t pid;
	int rc = posix_spawn(&pid, "/usr/bin/g++", NULL, NULL, argv, environ);
	if (rc != 0)
		return rc;
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* runs `sh -c CMD` and returns its exit status */
static int sh(const char *cmd)
{
	char *argv[] = {"sh", "-c", (char *)cmd, NULL};
	pid_t pid;
	if (posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ) != 0)
		return -1;
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void *other_thread(void *arg)
{
	int *result = arg;
	result[0] = (int)precompile_serving_depth();
	result[1] = precompile_locked_here();
	result[2] = compile("other-thread");
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: abi VERSION SRC OUTDIR ARMED_JOURNAL\n");
		return 2;
	}
	src = argv[2];
	outdir = argv[3];
	const char *armed = argv[4];
	setvbuf(stdout, NULL, _IONBF, 0);

	/* the symbols resolve in the global scope: the shim is preloaded */
	const char *names[] = {"precompile_version", "precompile_lockdown_enter", "precompile_lockdown_exit",
			       "precompile_lockdown_depth", "precompile_lockdown_startup", "precompile_serving_enter",
			       "precompile_serving_exit", "precompile_serving_depth", "precompile_locked_here",
			       "precompile_journal_arm", "precompile_journal_disarm", "precompile_classify"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		CHECK(dlsym(RTLD_DEFAULT, names[i]) != NULL, "%s", names[i]);
	printf("ok symbols\n");

	CHECK(strcmp(precompile_version(), argv[1]) == 0, "version %s", precompile_version());
	printf("ok version\n");

	CHECK(precompile_lockdown_startup() == 0, "startup");
	CHECK(precompile_lockdown_depth() == 0, "depth");
	CHECK(precompile_locked_here() == 0, "locked_here");
	CHECK(compile("open") == 0, "an unlocked compile runs");
	printf("ok open\n");

	CHECK(precompile_lockdown_enter() == 1, "enter");
	CHECK(precompile_lockdown_enter() == 2, "enter twice");
	CHECK(precompile_lockdown_depth() == 2, "depth 2");
	CHECK(precompile_locked_here() == 1, "locked");
	int rc = compile("locked");
	CHECK(rc == EPERM, "a locked compile is refused with EPERM, got %d", rc);
	/* children started while locked are locked down too */
	CHECK(sh("echo \"child sees TORCH_PRECOMPILE_NO_COMPILATION=$TORCH_PRECOMPILE_NO_COMPILATION\"") == 0, "sh");
	CHECK(sh("g++ --version >/dev/null && ! g++ -c /dev/null -x c -o /dev/null") == 0,
	      "a child of a locked process refuses compiles");
	CHECK(precompile_lockdown_exit() == 1, "exit");
	CHECK(precompile_lockdown_exit() == 0, "exit twice");
	CHECK(precompile_lockdown_exit() == -1, "unbalanced exit");
	CHECK(precompile_lockdown_depth() == 0, "depth 0 again");
	CHECK(compile("reopened") == 0, "compiles run again after exit");
	printf("ok lockdown\n");

	CHECK(precompile_serving_enter() == 1, "serving enter");
	CHECK(precompile_serving_depth() == 1, "serving depth");
	CHECK(precompile_locked_here() == 1, "serving thread is locked");
	CHECK(precompile_lockdown_depth() == 0, "serving is not process-wide");
	int other[3] = {-1, -1, -1};
	pthread_t t;
	pthread_create(&t, NULL, other_thread, other);
	pthread_join(t, NULL);
	CHECK(other[0] == 0 && other[1] == 0, "another thread is not serving: %d %d", other[0], other[1]);
	CHECK(other[2] == 0, "another thread compiles, got %d", other[2]);
	rc = compile("serving");
	CHECK(rc == EPERM, "the serving thread is refused, got %d", rc);
	CHECK(precompile_serving_exit() == 0, "serving exit");
	CHECK(precompile_serving_exit() == -1, "unbalanced serving exit");
	CHECK(precompile_locked_here() == 0, "not serving any more");
	printf("ok serving\n");

	CHECK(precompile_journal_arm(NULL) == -1 && errno == EINVAL, "arm(NULL)");
	CHECK(precompile_journal_arm("") == -1 && errno == EINVAL, "arm(\"\")");
	CHECK(precompile_journal_arm("/nonexistent/precompile/j") == -1 && errno == ENOENT, "arm(bad dir)");
	CHECK(precompile_journal_arm(armed) == 0, "arm");
	precompile_lockdown_enter();
	CHECK(compile("armed") == EPERM, "refused while armed");
	precompile_lockdown_exit();
	CHECK(precompile_journal_disarm() == 0, "disarm");
	CHECK(compile("disarmed") == 0, "compile after disarm");
	printf("ok journal\n");

	char *compile_argv[] = {"g++", "-c", "a.c", "-o", "a.o", NULL};
	char *probe_argv[] = {"g++", "--version", NULL};
	char *true_argv[] = {"true", NULL};
	char *cxx_argv[] = {"c++", "-c", "a.c", NULL};
	CHECK(precompile_classify("/usr/bin/g++", (const char *const *)compile_argv) == 2, "compile");
	CHECK(precompile_classify("g++", (const char *const *)compile_argv) == 2, "bare name");
	CHECK(precompile_classify("/usr/bin/g++", (const char *const *)probe_argv) == 1, "probe");
	CHECK(precompile_classify("/bin/true", (const char *const *)true_argv) == 0, "other");
	CHECK(precompile_classify("/usr/bin/c++", (const char *const *)cxx_argv) == 2, "c++ via alternatives");
	CHECK(precompile_classify(NULL, NULL) == 0, "null");
	printf("ok classify\n");
	printf("all ok\n");
	return 0;
}
