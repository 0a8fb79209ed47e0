/*
 * spawner: starts a program through one member of the exec family, so the
 * integration tests can drive every entry the shim hooks from a real C
 * program. It reports on stdout, one line each:
 *
 *   errno=N         an exec* call returned (it failed with errno N)
 *   spawn=N         posix_spawn* returned N (0 = started)
 *   status=N        the started child's exit status (or system/pclose's)
 *   child-exit=N    fork/vfork child's exit status; 200+errno = exec failed
 *
 * The syscall-* modes make the system call directly, past any exec hook
 * (what an LD_PRELOAD shim cannot see; the enforced mode must); int80-execve
 * goes through the 32-bit system call entry.
 *
 * usage: spawner MODE ARGS...   (see main)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int status_of(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

static void exec_failed(void)
{
	printf("errno=%d\n", errno);
	fflush(stdout);
	exit(111);
}

static int wait_child(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return status_of(st);
}

/* posix_spawn(p) with stdout sent to /dev/null when quiet */
static int spawn(int use_path, char *file, char **argv, int quiet)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	if (quiet)
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = use_path ? posix_spawnp(&pid, file, &fa, NULL, argv, environ)
			  : posix_spawn(&pid, file, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -rc;
	return wait_child(pid);
}

struct job {
	int index;
	int use_fork;
	char *path;
	char **argv; /* template: "%d" in an argument becomes the index */
	int argc;
	pthread_barrier_t *barrier;
	int result;
};

static void *thread_main(void *p)
{
	struct job *j = p;
	char *argv[64];
	char bufs[64][256];
	int n = j->argc < 63 ? j->argc : 63;
	for (int i = 0; i < n; i++) {
		if (strstr(j->argv[i], "%d")) {
			snprintf(bufs[i], sizeof bufs[i], j->argv[i], j->index);
			argv[i] = bufs[i];
		} else {
			argv[i] = j->argv[i];
		}
	}
	argv[n] = NULL;
	pthread_barrier_wait(j->barrier);
	if (j->use_fork) {
		pid_t pid = fork();
		if (pid == 0) {
			execv(j->path, argv);
			_exit(200 + errno);
		}
		j->result = wait_child(pid);
	} else {
		j->result = spawn(0, j->path, argv, 0);
	}
	return NULL;
}

#if defined(__x86_64__)
/* execve through the 32-bit entry (int 0x80), which takes 32-bit pointers:
 * the path and argv are copied below 4 GiB first. The environment is empty.
 * Returns the kernel's result (-errno). */
static long int80_execve(const char *path, char **args)
{
	char *low = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	if (low == MAP_FAILED)
		return -errno;
	unsigned int *vec = (unsigned int *)low;
	char *p = low + 4096;
	int n = 0;
	for (; args[n] && n < 64; n++) {
		size_t len = strlen(args[n]) + 1;
		memcpy(p, args[n], len);
		vec[n] = (unsigned int)(unsigned long)p;
		p += len;
	}
	vec[n] = 0;
	strcpy(p, path);
	long ret;
	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "a"(11L), "b"((unsigned long)p), "c"((unsigned long)vec), "d"(0UL)
			 : "memory");
	return ret;
}
#endif

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: spawner MODE ARGS...\n");
		return 2;
	}
	const char *mode = argv[1];
	char *file = argv[2];
	char **args = argv + 3; /* the child's argv, argv[0] first */
	int nargs = argc - 3;
	setvbuf(stdout, NULL, _IONBF, 0);

	if (!strcmp(mode, "execve")) {
		execve(file, args, environ);
		exec_failed();
	} else if (!strcmp(mode, "execve-empty")) {
		char *empty[] = {NULL};
		execve(file, args, empty);
		exec_failed();
	} else if (!strcmp(mode, "execve-null")) {
		execve(file, args, NULL);
		exec_failed();
	} else if (!strcmp(mode, "execv")) {
		execv(file, args);
		exec_failed();
	} else if (!strcmp(mode, "execvp")) {
		execvp(file, args);
		exec_failed();
	} else if (!strcmp(mode, "execvpe")) {
		execvpe(file, args, environ);
		exec_failed();
	} else if (!strcmp(mode, "execl") || !strcmp(mode, "execlp") || !strcmp(mode, "execle")) {
		int m = !strcmp(mode, "execl") ? 0 : !strcmp(mode, "execlp") ? 1 : 2;
		char **a = args;
#define DO(...)                                                                        \
	do {                                                                           \
		if (m == 0)                                                            \
			execl(file, __VA_ARGS__, (char *)NULL);                        \
		else if (m == 1)                                                       \
			execlp(file, __VA_ARGS__, (char *)NULL);                       \
		else                                                                   \
			execle(file, __VA_ARGS__, (char *)NULL, environ);              \
	} while (0)
		switch (nargs) {
		case 1: DO(a[0]); break;
		case 2: DO(a[0], a[1]); break;
		case 3: DO(a[0], a[1], a[2]); break;
		case 4: DO(a[0], a[1], a[2], a[3]); break;
		case 5: DO(a[0], a[1], a[2], a[3], a[4]); break;
		case 6: DO(a[0], a[1], a[2], a[3], a[4], a[5]); break;
		case 7: DO(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
		default:
			fprintf(stderr, "spawner: 1 to 7 args for %s\n", mode);
			return 2;
		}
#undef DO
		exec_failed();
	} else if (!strcmp(mode, "syscall-execve")) {
		syscall(SYS_execve, file, args, environ);
		exec_failed();
	} else if (!strcmp(mode, "syscall-execveat")) {
		syscall(SYS_execveat, AT_FDCWD, file, args, environ, 0);
		exec_failed();
	} else if (!strcmp(mode, "int80-execve")) {
#if defined(__x86_64__)
		printf("errno=%ld\n", -int80_execve(file, args));
		return 0;
#else
		fprintf(stderr, "spawner: int80-execve is x86_64 only\n");
		return 2;
#endif
	} else if (!strcmp(mode, "fexecve")) {
		int fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			exec_failed();
		fexecve(fd, args, environ);
		exec_failed();
	} else if (!strcmp(mode, "execveat")) {
		/* relative to the file's directory opened as dirfd */
		char dir[4096];
		snprintf(dir, sizeof dir, "%s", file);
		char *slash = strrchr(dir, '/');
		if (!slash)
			return 2;
		*slash = '\0';
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			exec_failed();
		execveat(dfd, slash + 1, args, environ, 0);
		exec_failed();
	} else if (!strcmp(mode, "posix_spawn") || !strcmp(mode, "posix_spawnp")) {
		int r = spawn(!strcmp(mode, "posix_spawnp"), file, args, 0);
		if (r < 0) {
			printf("spawn=%d\n", -r);
		} else {
			printf("spawn=0\nstatus=%d\n", r);
		}
	} else if (!strcmp(mode, "system")) {
		int st = system(file);
		printf("status=%d\n", status_of(st));
	} else if (!strcmp(mode, "popen")) {
		FILE *f = popen(file, "r");
		if (!f) {
			printf("errno=%d\n", errno);
			return 0;
		}
		char buf[256];
		while (fgets(buf, sizeof buf, f))
			fputs(buf, stdout);
		printf("status=%d\n", status_of(pclose(f)));
	} else if (!strcmp(mode, "fork-exec") || !strcmp(mode, "vfork-exec")) {
		pid_t pid = !strcmp(mode, "fork-exec") ? fork() : vfork();
		if (pid == 0) {
			execv(file, args);
			_exit(200 + errno);
		}
		printf("child-exit=%d\n", wait_child(pid));
	} else if (!strcmp(mode, "threads-fork") || !strcmp(mode, "threads-spawn")) {
		/* threads-* N PATH ARGV... : N threads exec at once */
		int n = atoi(file);
		if (n < 1 || n > 64 || nargs < 2)
			return 2;
		pthread_barrier_t barrier;
		pthread_barrier_init(&barrier, NULL, (unsigned)n);
		pthread_t t[64];
		struct job jobs[64];
		for (int i = 0; i < n; i++) {
			jobs[i] = (struct job){i, !strcmp(mode, "threads-fork"), args[0], args + 1, nargs - 1, &barrier, 0};
			pthread_create(&t[i], NULL, thread_main, &jobs[i]);
		}
		for (int i = 0; i < n; i++) {
			pthread_join(t[i], NULL);
			printf("thread %d result=%d\n", i, jobs[i].result);
		}
	} else if (!strcmp(mode, "spawn-loop")) {
		/* spawn-loop N PATH ARGV... : N sequential posix_spawn + wait */
		int n = atoi(file);
		int failures = 0;
		for (int i = 0; i < n; i++) {
			if (spawn(0, args[0], args + 1, 1) != 0)
				failures++;
		}
		printf("failures=%d\n", failures);
	} else {
		fprintf(stderr, "spawner: unknown mode %s\n", mode);
		return 2;
	}
	return 0;
}
