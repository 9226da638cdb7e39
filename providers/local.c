/* The local provider: Linux namespaces on this host, no daemon, no root needed. */
#define _GNU_SOURCE
#include "providers/local.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "core/json.h"
#include "core/log.h"
#include "core/test-hook.h"

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

#define NS_ALL (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | \
		CLONE_NEWIPC | CLONE_NEWCGROUP)

/* the cached seccomp filter is keyed by the build that compiled it */
#ifdef SBX_VERSION
#define SBX_VERSION_STR SBX_VERSION
#else
#define SBX_VERSION_STR "dev"
#endif
#ifdef SBX_COMMIT
#define SBX_COMMIT_STR SBX_COMMIT
#else
#define SBX_COMMIT_STR "unknown"
#endif


int local_starttime(pid_t pid, unsigned long long *ret)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* comm may hold spaces and ')': fields resume after the last ')' */
	char *s = strrchr(buf, ')');
	if (!s)
		return -1;
	s++;
	/* state is field 3; starttime is field 22 */
	for (int field = 3; field < 22; field++) {
		s = strchr(s + 1, ' ');
		if (!s)
			return -1;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s + 1, &end, 10);
	if (errno || end == s + 1)
		return -1;
	*ret = v;
	return 0;
}

int local_alive(pid_t pid, unsigned long long start)
{
	unsigned long long st;

	if (pid <= 0)
		return 0;
	if (local_starttime(pid, &st) < 0)
		return 0;
	if (st != start)
		return 0;
	/* a zombie is not alive */
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *s = strrchr(buf, ')');
	return s && s[1] == ' ' && s[2] != 'Z' && s[2] != 'X';
}

int local_read_pids(const char *dir, struct local_pids *ret)
{
	char path[PATH_MAX], buf[256];
	snprintf(path, sizeof(path), "%s/pids", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	int ip, sp;
	if (sscanf(buf, "%d %llu %d %llu", &ip, &ret->init_start, &sp, &ret->sup_start) != 4)
		return -1;
	ret->init_pid = ip;
	ret->sup_pid = sp;
	return 0;
}

/* --- create -------------------------------------------------------------------------------- */

/* the sandbox's root directory: empty, with the top-level names a system expects */
static int prepare_root(const char *dir, const struct local_setup *s, struct sbx_err *err)
{
	static const struct { const char *name; mode_t mode; } dirs[] = {
		{ "workspace", 0755 }, { "tmp", 01777 }, { "root", 0700 }, { "home", 0755 },
		{ "var", 0755 },       { "var/tmp", 01777 }, { "run", 0755 }, { "mnt", 0755 },
		{ "opt", 0755 },       { "srv", 0755 },  { "proc", 0555 }, { "dev", 0755 },
		{ "sys", 0555 },
	};
	static const char *const sys[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32",
					   "etc" };
	_cleanup_free_ char *root = xasprintf("%s/root", dir);
	char p[PATH_MAX];

	if (mkdir(root, 0755) < 0)
		return sbx_err_errno(err, "cannot create '%s'", root);
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i].name);
		if (mkdir(p, dirs[i].mode) < 0 || chmod(p, dirs[i].mode) < 0)
			return sbx_err_errno(err, "cannot create '%s'", p);
	}
	for (size_t i = 0; i < ARRAY_SIZE(sys); i++) {
		char host[64], target[PATH_MAX];
		struct stat st;
		snprintf(host, sizeof(host), "/%s", sys[i]);
		snprintf(p, sizeof(p), "%s/%s", root, sys[i]);
		if (lstat(host, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(host, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = 0;
			if (symlink(target, p) < 0)
				return sbx_err_errno(err, "cannot create '%s'", p);
		} else if (S_ISDIR(st.st_mode)) {
			if (mkdir(p, 0755) < 0)
				return sbx_err_errno(err, "cannot create '%s'", p);
		}
	}
	/* the sandbox's own /etc/hostname and /etc/hosts, bound over the host's by init (docker
	 * does the same); sandbox root may edit them */
	snprintf(p, sizeof(p), "%s/run/sbx", root);
	if (mkdir(p, 0755) < 0)
		return sbx_err_errno(err, "cannot create '%s'", p);
	_cleanup_free_ char *hn = xasprintf("%s\n", s->hostname);
	_cleanup_free_ char *hosts = xasprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost "
					       "ip6-loopback\n127.0.1.1\t%s\n", s->hostname);
	snprintf(p, sizeof(p), "%s/run/sbx/hostname", root);
	if (sbx_write_atomic(p, hn, strlen(hn), false, err) < 0 || chmod(p, 0644) < 0)
		return sbx_err_errno(err, "cannot write '%s'", p);
	snprintf(p, sizeof(p), "%s/run/sbx/hosts", root);
	if (sbx_write_atomic(p, hosts, strlen(hosts), false, err) < 0 || chmod(p, 0644) < 0)
		return sbx_err_errno(err, "cannot write '%s'", p);
	if (s->map_range) {
		static const char *const own[] = { "run/sbx", "run/sbx/hostname", "run/sbx/hosts" };
		for (size_t i = 0; i < ARRAY_SIZE(own); i++) {
			snprintf(p, sizeof(p), "%s/%s", root, own[i]);
			if (lchown(p, s->uid, s->gid) < 0)
				return sbx_err_errno(err, "cannot hand '%s' to the sandbox", p);
		}
	}
	if (s->map_range) {
		/* sandbox root owns its root directory */
		if (lchown(root, s->uid, s->gid) < 0)
			return sbx_err_errno(err, "cannot hand '%s' to the sandbox", root);
		for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
			snprintf(p, sizeof(p), "%s/%s", root, dirs[i].name);
			if (lchown(p, s->uid, s->gid) < 0)
				return sbx_err_errno(err, "cannot hand '%s' to the sandbox", p);
		}
		for (size_t i = 0; i < ARRAY_SIZE(sys); i++) {
			snprintf(p, sizeof(p), "%s/%s", root, sys[i]);
			(void)lchown(p, s->uid, s->gid);
		}
	}
	return 0;
}

static int local_create(struct sbx_ctx *ctx, const struct sbx_create_opts *o, struct sbx_record *rec,
			struct sbx_err *err)
{
	struct local_setup s = {
		.dir = rec->dir,
		.hostname = rec->name ? rec->name : rec->id,
		.workdir = o->workdir ? o->workdir : "/workspace",
		.volumes = o->volumes,
		.n_volumes = o->n_volumes,
	};
	_cleanup_free_ void *bpf = NULL;
	size_t bpf_len = 0;

	if (geteuid() == 0) {
		s.map_range = true;
		s.uid = LOCAL_UID_BASE;
		s.gid = LOCAL_UID_BASE;
		s.map_count = LOCAL_UID_COUNT;
	} else {
		s.uid = geteuid();
		s.gid = getegid();
		s.map_count = 1;
	}
	if (prepare_root(rec->dir, &s, err) < 0)
		return -1;
	/* the filter is the same for every sandbox of this sbx: compile it once per version */
	_cleanup_free_ char *cache = xasprintf("%s/seccomp-%s-%s.bpf", ctx->store.root, SBX_VERSION_STR, SBX_COMMIT_STR);
	bpf = sbx_read_file(cache, 1 << 20, &bpf_len);
	if (!bpf || !bpf_len || bpf_len % 8) {
		free(bpf);
		bpf = NULL;
		if (local_seccomp_build(&bpf, &bpf_len, err) < 0)
			return -1;
		struct sbx_err ignored = { 0 };
		(void)sbx_write_atomic(cache, bpf, bpf_len, false, &ignored);
	}
	s.bpf = bpf;
	s.bpf_len = bpf_len;
	{
		_cleanup_free_ char *p = xasprintf("%s/seccomp.bpf", rec->dir);
		if (sbx_write_atomic(p, bpf, bpf_len, false, err) < 0)
			return -1;
	}
	sbx_test_hook("create-prepared");

	int rp[2];
	if (pipe2(rp, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(rp[0]);
		close(rp[1]);
		return sbx_err_errno(err, "cannot start the supervisor");
	}
	if (pid == 0) {
		close(rp[0]);
		local_supervisor(&s, rp[1]);
	}
	close(rp[1]);

	struct local_report r;
	size_t got = 0;
	while (got < sizeof(r)) {
		ssize_t n = read(rp[0], (char *)&r + got, sizeof(r) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(rp[0]);
	/* the supervisor is detached (setsid); reap the intermediate only if it already died */
	(void)waitpid(pid, NULL, WNOHANG);
	if (got != sizeof(r))
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "cannot create sandbox: its supervisor exited during set-up");
	if (!r.ok) {
		r.msg[sizeof(r.msg) - 1] = 0;
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot create sandbox: %s", r.msg);
	}
	json_t *x = json_object();
	json_object_set_new(x, "init_pid", json_integer(r.pids.init_pid));
	json_object_set_new(x, "supervisor_pid", json_integer(r.pids.sup_pid));
	json_object_set_new(x, "uid_base", json_integer(s.uid));
	json_object_set_new(x, "uid_count", json_integer((json_int_t)s.map_count));
	if (rec->extra)
		json_decref(rec->extra);
	rec->extra = x;
	rec->state = SBX_STATE_RUNNING;
	(void)ctx;
	return 0;
}

/* --- state --------------------------------------------------------------------------------- */

static enum sbx_state look(const struct sbx_record *rec, struct local_pids *pids)
{
	if (local_read_pids(rec->dir, pids) < 0)
		return SBX_STATE_STOPPED;
	if (local_alive(pids->init_pid, pids->init_start) &&
	    local_alive(pids->sup_pid, pids->sup_start))
		return SBX_STATE_RUNNING;
	return SBX_STATE_STOPPED;
}

static int local_inspect(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	struct local_pids pids;

	rec->state = look(rec, &pids);
	if (rec->state == SBX_STATE_RUNNING && rec->extra)
		json_object_set_new(rec->extra, "init_pid", json_integer(pids.init_pid));
	return 0;
}

/* --- rm ------------------------------------------------------------------------------------ */

static int wait_gone(int pidfd, int ms)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int r;

	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	return r > 0 ? 0 : -1;
}

static int kill_checked(pid_t pid, unsigned long long start, const char *what, const char *label,
			struct sbx_err *err)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pidfd < 0)
		return 0; /* already gone */
	if (!local_alive(pid, start)) {
		close(pidfd);
		return 0; /* gone, or the pid was reused: not ours to kill */
	}
	if (syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH) {
		sbx_err_errno(err, "cannot stop the %s of sandbox '%s'", what, label);
		close(pidfd);
		return -1;
	}
	int r = wait_gone(pidfd, 10000);
	close(pidfd);
	if (r < 0)
		return sbx_err_set(err, SBX_E_SYSTEM, "the %s of sandbox '%s' did not exit", what,
				   label);
	return 0;
}

static int local_rm(struct sbx_ctx *ctx, struct sbx_record *rec, bool force, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_pids pids;

	if (local_read_pids(rec->dir, &pids) < 0)
		return 0; /* nothing runs */
	/* killing init ends every process of the pid namespace; the supervisor follows */
	if (kill_checked(pids.init_pid, pids.init_start, "init", label, err) < 0)
		return -1;
	sbx_test_hook("rm-killed");
	if (kill_checked(pids.sup_pid, pids.sup_start, "supervisor", label, err) < 0)
		return -1;
	(void)ctx;
	(void)force;
	return 0;
}

const struct sbx_provider sbx_provider_local = {
	.name = "local",
	.summary = "Linux namespaces on this host",
	.create = local_create,
	.exec = local_exec,
	.cp_in = local_cp_in,
	.cp_out = local_cp_out,
	.rm = local_rm,
	.log_path = local_log_path,
	.inspect = local_inspect,
};
