/* Process helpers: /proc/PID/stat, the pids in /proc, pidfds, a child's report. */
#define _GNU_SOURCE
#include "core/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/err.h"
#include "core/util.h"

/* /proc/PID/stat from its fourth field on (after "PID (comm) STATE", comm may hold spaces and
 * ')'), with the state in *ret_state; NULL when the process is gone */
static const char *stat_fields(pid_t pid, char *buf, size_t len, char *ret_state)
{
	char path[64];

	if (pid <= 0)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	char *s = strrchr(buf, ')');
	if (!s || s[1] != ' ' || !s[2])
		return NULL;
	*ret_state = s[2];
	return s + 3;
}

/* field 22 (starttime), counted from the fourth field that stat_fields gives */
static int starttime_of(const char *f, unsigned long long *ret)
{
	for (int field = 4; field <= 22; field++) {
		f = strchr(f, ' ');
		if (!f)
			return -1;
		f++;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(f, &end, 10);
	if (errno || end == f)
		return -1;
	*ret = v;
	return 0;
}

char sbx_proc_state(pid_t pid)
{
	char buf[512], st;

	return stat_fields(pid, buf, sizeof(buf), &st) ? st : 0;
}

int sbx_proc_parent_group(pid_t pid, pid_t *ret_ppid, pid_t *ret_pgrp)
{
	char buf[1024], st;
	const char *f = stat_fields(pid, buf, sizeof(buf), &st);
	int pp, pg;

	if (!f || sscanf(f, " %d %d", &pp, &pg) != 2)
		return -1;
	*ret_ppid = pp;
	*ret_pgrp = pg;
	return 0;
}

int sbx_proc_starttime(pid_t pid, unsigned long long *ret)
{
	char buf[1024], st;
	const char *f = stat_fields(pid, buf, sizeof(buf), &st);

	return f ? starttime_of(f, ret) : -1;
}

bool sbx_proc_alive(pid_t pid, unsigned long long start)
{
	char buf[1024], st;
	unsigned long long v;
	const char *f = stat_fields(pid, buf, sizeof(buf), &st);

	/* a zombie is not alive; another start time is another process on a reused pid */
	return f && st != 'Z' && st != 'X' && starttime_of(f, &v) == 0 && v == start;
}

bool sbx_proc_stop_pending(pid_t pid, pid_t tid)
{
	char p[96];
	snprintf(p, sizeof(p), "/proc/%d/task/%d/status", (int)pid, (int)(tid ? tid : pid));
	_cleanup_free_ char *t = sbx_read_file(p, 1 << 16, NULL);
	static const char *const keys[] = { "\nSigPnd:", "\nShdPnd:" };

	for (size_t k = 0; t && k < ARRAY_SIZE(keys); k++) {
		const char *s = strstr(t, keys[k]);
		if (s && (strtoull(s + strlen(keys[k]), NULL, 16) >> (SIGSTOP - 1)) & 1)
			return true;
	}
	return false;
}

/* a directory of /proc named by a pid: digits only, no leading zero, in range */
static bool pid_name(const char *s, pid_t *ret)
{
	char *end;

	if (*s < '1' || *s > '9')
		return false;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v <= 0 || v > INT_MAX)
		return false;
	*ret = (pid_t)v;
	return true;
}

int sbx_proc_list(pid_t **ret, size_t *ret_n)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t n = 0, cap = 0;
	pid_t *v = NULL, pid;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (!pid_name(de->d_name, &pid))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			v = xrealloc(v, cap * sizeof(pid_t));
		}
		v[n++] = pid;
	}
	closedir(d);
	*ret = v;
	*ret_n = n;
	return 0;
}

int sbx_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

int sbx_pidfd_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

int sbx_pidfd_wait(int pidfd, int ms)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int r;

	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	return r > 0 ? 0 : -1;
}

int sbx_proc_report(int fd, const void *msg, size_t len)
{
	return sbx_write_all(fd, msg, len);
}

ssize_t sbx_proc_read_report(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return got ? (ssize_t)got : -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* struct sbx_err as a report (core/err.h): the outcome of a forked child */
void sbx_err_send(int fd, const struct sbx_err *err)
{
	struct sbx_err ok = { 0 };

	(void)sbx_proc_report(fd, err ? err : &ok, sizeof(ok));
}

int sbx_err_recv(int fd, pid_t pid, const char *what, struct sbx_err *err)
{
	struct sbx_err got;
	size_t have = 0;
	int st = 0;

	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return sbx_err_errno(err, "cannot wait for the %s process", what);
	}
	ssize_t n = sbx_proc_read_report(fd, &got, sizeof(got));
	have = n > 0 ? (size_t)n : 0;
	if (have == sizeof(got) && got.kind != SBX_E_NONE) {
		got.msg[sizeof(got.msg) - 1] = 0;
		*err = got;
		return -1;
	}
	if (have == sizeof(got) && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFSIGNALED(st))
		return sbx_err_set(err, SBX_E_SYSTEM, "the %s process was killed by signal %d",
				   what, WTERMSIG(st));
	return sbx_err_set(err, SBX_E_SYSTEM, "the %s process exited without a report", what);
}

int sbx_proc_write(pid_t pid, const char *file, const char *text)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	return sbx_write_file(path, text);
}

int sbx_proc_write_id_maps(pid_t pid, unsigned long base, unsigned long count)
{
	char m[64];

	if (count == 0) {
		if (sbx_proc_write(pid, "setgroups", "deny") < 0 && errno != ENOENT)
			return -1;
		snprintf(m, sizeof(m), "0 %u 1\n", (unsigned)geteuid());
		if (sbx_proc_write(pid, "uid_map", m) < 0)
			return -1;
		snprintf(m, sizeof(m), "0 %u 1\n", (unsigned)getegid());
		return sbx_proc_write(pid, "gid_map", m);
	}
	snprintf(m, sizeof(m), "0 %lu %lu\n", base, count);
	if (sbx_proc_write(pid, "uid_map", m) < 0)
		return -1;
	return sbx_proc_write(pid, "gid_map", m);
}

int sbx_proc_run_idmap(const char *prog, pid_t pid, const unsigned long *maps, size_t n)
{
	/* "newuidmap PID IN OUT COUNT..." in a buffer of our own: nothing is allocated after
	 * the fork */
	char buf[16 + 3 * 4 * 24], *argv[2 + 3 * 4 + 1], *p = buf;
	size_t a = 0, left = sizeof(buf);

	if (n > 4) {
		errno = EINVAL;
		return -1;
	}
	argv[a++] = (char *)prog;
	for (size_t i = 0; i <= 3 * n; i++) {
		int w = i == 0 ? snprintf(p, left, "%d", (int)pid)
			       : snprintf(p, left, "%lu", maps[i - 1]);
		if (w < 0 || (size_t)w >= left) {
			errno = EINVAL;
			return -1;
		}
		argv[a++] = p;
		p += w + 1;
		left -= (size_t)w + 1;
	}
	argv[a] = NULL;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return -1;
	fflush(NULL);
	pid_t c = fork();
	if (c < 0) {
		close(null);
		return -1;
	}
	if (c == 0) {
		/* an empty environment, no descriptor of ours: the program is set-uid root */
		static char *const envp[] = { NULL };
		if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(127);
		syscall(SYS_close_range, 3, ~0U, 0);
		execve(prog, argv, envp);
		_exit(127);
	}
	close(null);
	int st;
	while (waitpid(c, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	errno = WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ENOENT : EPERM;
	return -1;
}
