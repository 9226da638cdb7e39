/* The local provider's background commands (exec -d): their records and logs, ps, logs,
 * kill.
 *
 * exec -d forks a waiter before joining the sandbox. The waiter stays in the host's pid
 * namespace (so no process of the sandbox can name it, signal it or read its descriptors),
 * joins the other namespaces as exec does and starts the command as its own child in the
 * sandbox's pid namespace; the CLI, which never joined, returns once the command runs and
 * writes its record. The waiter relays the command's output into the exec's log and the
 * sandbox's log, and reaps it: the exit status is written by a process the sandbox cannot
 * reach, through a descriptor the CLI opened on the host.
 *
 * DIR/jobs/ (0700, on the host, out of the sandbox's reach), per exec id ID:
 *   ID.json   written by the CLI once the command runs: argv, pids, start (a new file
 *             renamed into place)
 *   ID.end    "WAITSTATUS UNIXMS LOST\n", written once by the waiter when it reaped the command
 *             (LOST: bytes of its output that could not be written to ID.log, a full disk)
 *   ID.log    its output; past LOG_PART bytes the part is moved to ID.log.1 (so at most
 *             2 * LOG_PART are kept: the newest output)
 * Of finished commands the newest KEEP_FINISHED are kept; exec -d removes older ones. */
#define END_ROOM 64 /* ID.end's size: its line and the blanks after it */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "core/json.h"
#include "core/proc.h"
#include "providers/local/gvisor.h"

#define LOG_PART (4LL << 20)
#define ALL_LOG_MAX (64LL << 20) /* the sandbox's log: past it, each exec's own log alone */
#define KEEP_FINISHED 100
#define RECORD_MAX (1 << 20)

#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP (1U << 2)
#endif

struct local_job {
	char id[LOCAL_JOB_ID_LEN + 1];
	int out_r, out_w; /* the command's stdout and stderr: the waiter reads */
	int log, log1;	  /* ID.log, ID.log.1 */
	int all;	  /* the sandbox's log (sbx logs SB) */
	int end;	  /* ID.end */
	bool all_full;	  /* the sandbox's log reached ALL_LOG_MAX (said once) */
	long long lost;	  /* bytes of output ID.log did not take (a write failed) */
	int res;	  /* the waiter's word to the CLI (a socket) */
	bool told;
};

/* what the waiter tells the CLI: the command runs (its pid, the host's; on --runtime gvisor
 * runsc's, and the command's in gVisor), or why not */
struct job_msg {
	int ok;
	pid_t pid;
	pid_t inner;
	struct sbx_err err;
};

char *local_log_path(const struct sbx_record *rec)
{
	return xasprintf("%s/exec.log", rec->dir);
}

bool local_job_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n != LOCAL_JOB_ID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", id[i]))
			return false;
	return true;
}

/* DIR/jobs, opened without following a link (created when make) */
static int execs_dir(const struct sbx_record *rec, bool make, struct sbx_err *err)
{
	_cleanup_close_ int d = open(rec->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (d < 0)
		return sbx_err_errno(err, "cannot open '%s'", rec->dir);
	if (make && mkdirat(d, "jobs", 0700) < 0 && errno != EEXIST)
		return sbx_err_errno(err, "cannot create '%s/jobs'", rec->dir);
	int fd = openat(d, "jobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return -2;
		return sbx_err_errno(err, "cannot open '%s/jobs'", rec->dir);
	}
	return fd;
}

static char *read_small(int dir, const char *name, size_t max)
{
	_cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)max)
		return NULL;
	char *buf = xmalloc((size_t)st.st_size + 1);
	ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

/* one exec's state, from its files */
struct job_state {
	json_t *rec;	       /* ID.json */
	bool ended;	       /* ID.end written */
	bool lost;	       /* not ended, and its waiter is gone (a sandbox stopped under it) */
	int status;	       /* wait status, when ended */
	long long end_ms;      /* when ended */
	long long output_lost; /* bytes of its output its log did not take */
};

static int job_load(int dir, const char *id, struct job_state *s)
{
	char name[LOCAL_JOB_ID_LEN + 8];

	memset(s, 0, sizeof(*s));
	snprintf(name, sizeof(name), "%s.json", id);
	_cleanup_free_ char *txt = read_small(dir, name, RECORD_MAX);
	if (!txt || !(s->rec = json_loads(txt, 0, NULL)))
		return -1;
	snprintf(name, sizeof(name), "%s.end", id);
	_cleanup_free_ char *end = read_small(dir, name, END_ROOM);
	int st;
	long long ms;
	long long lost = 0;
	if (end && strchr(end, '\n') && sscanf(end, "%d %lld %lld", &st, &ms, &lost) >= 2) {
		s->ended = true;
		s->output_lost = lost;
		s->status = st;
		s->end_ms = ms;
		return 0;
	}
	pid_t w = (pid_t)json_integer_value(json_object_get(s->rec, "waiter_pid"));
	unsigned long long ws = (unsigned long long)json_integer_value(
		json_object_get(s->rec, "waiter_start"));
	if (w <= 0 || !sbx_proc_alive(w, ws)) {
		/* the end may have been written just before the waiter went */
		_cleanup_free_ char *again = read_small(dir, name, END_ROOM);
		if (again && strchr(again, '\n') &&
		    sscanf(again, "%d %lld %lld", &st, &ms, &lost) >= 2) {
			s->ended = true;
			s->output_lost = lost;
			s->status = st;
			s->end_ms = ms;
		} else {
			s->lost = true;
		}
	}
	return 0;
}

static json_t *rfc3339_ms(long long ms)
{
	_cleanup_free_ char *t = sbx_time_rfc3339(ms / 1000);
	return json_string(t);
}

/* the object ps lists */
static json_t *job_view(const char *id, const struct job_state *s)
{
	json_t *o = json_object();
	json_t *pid = json_object_get(s->rec, "pid");
	json_t *argv = json_object_get(s->rec, "argv");

	json_object_set_new(o, "id", json_string(id));
	json_object_set(o, "pid", pid ? pid : json_null());
	json_object_set(o, "command", argv ? argv : json_array());
	bool done = s->ended || s->lost;
	json_object_set_new(o, "state", json_string(done ? "exited" : "running"));
	json_t *code = json_null(), *sig = json_null();
	/* on gVisor, runsc says a death by signal N as status 128 + N */
	bool gvisor = json_integer_value(json_object_get(s->rec, "gvisor_pid")) > 0;
	int ec = s->ended && WIFEXITED(s->status) ? WEXITSTATUS(s->status) : 0;
	if (s->ended && WIFEXITED(s->status) && !(gvisor && ec > 128 && ec < 160)) {
		code = json_integer(ec);
	} else if (s->ended && (WIFSIGNALED(s->status) || WIFEXITED(s->status))) {
		int n = WIFSIGNALED(s->status) ? WTERMSIG(s->status) : ec - 128;
		const char *ab = sigabbrev_np(n);
		code = json_integer(128 + n);
		if (ab) {
			_cleanup_free_ char *name = xasprintf("SIG%s", ab);
			sig = json_string(name);
		}
	}
	json_object_set_new(o, "exit_code", code);
	json_object_set_new(o, "signal", sig);
	json_object_set_new(
		o, "started_at",
		rfc3339_ms((long long)json_integer_value(json_object_get(s->rec, "started_ms"))));
	json_object_set_new(o, "finished_at", s->ended ? rfc3339_ms(s->end_ms) : json_null());
	if (s->lost)
		json_object_set_new(o, "status_lost", json_true());
	if (s->output_lost > 0)
		json_object_set_new(o, "output_lost_bytes", json_integer(s->output_lost));
	return o;
}

static void job_unlink(int dir, const char *id)
{
	static const char *const ext[] = { ".json", ".end", ".log", ".log.1" };
	char name[LOCAL_JOB_ID_LEN + 8];

	for (size_t i = 0; i < ARRAY_SIZE(ext); i++) {
		snprintf(name, sizeof(name), "%s%s", id, ext[i]);
		(void)unlinkat(dir, name, 0);
	}
}

struct job_entry {
	char id[LOCAL_JOB_ID_LEN + 1];
	long long started, ended; /* ended 0: running */
};

static int by_start(const void *a, const void *b)
{
	const struct job_entry *x = a, *y = b;
	return x->started < y->started ? -1 : x->started > y->started;
}

static int by_end_newest(const void *a, const void *b)
{
	const struct job_entry *x = a, *y = b;
	return x->ended > y->ended ? -1 : x->ended < y->ended;
}

/* the execs of dir (with a record), sorted by start */
static size_t job_entries(int dir, struct job_entry **ret)
{
	int d2 = dup(dir);
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	struct job_entry *v = NULL;
	size_t n = 0;
	struct dirent *de;

	*ret = NULL;
	if (!d) {
		if (d2 >= 0)
			close(d2);
		return 0;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		const char *dot = strchr(de->d_name, '.');
		if (!dot || !streq(dot, ".json") || dot - de->d_name != LOCAL_JOB_ID_LEN)
			continue;
		char id[LOCAL_JOB_ID_LEN + 1];
		memcpy(id, de->d_name, LOCAL_JOB_ID_LEN);
		id[LOCAL_JOB_ID_LEN] = 0;
		struct job_state s;
		if (!local_job_id_valid(id) || job_load(dir, id, &s) < 0)
			continue;
		v = xrealloc(v, (n + 1) * sizeof(*v));
		memcpy(v[n].id, id, sizeof(id));
		v[n].started = (long long)json_integer_value(json_object_get(s.rec, "started_ms"));
		v[n].ended = s.ended ? s.end_ms : s.lost ? 1 : 0;
		n++;
		json_decref(s.rec);
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), by_start);
	*ret = v;
	return n;
}

/* the files of an exec -d that never got its record (its sbx was killed before the command
 * ran), an hour on */
static void job_prune_orphans(int dir)
{
	int d2 = dup(dir);
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	struct dirent *de;
	time_t old = time(NULL) - 3600;

	if (!d) {
		if (d2 >= 0)
			close(d2);
		return;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		const char *n = de->d_name + (de->d_name[0] == '.');
		char id[LOCAL_JOB_ID_LEN + 1], rec[LOCAL_JOB_ID_LEN + 8];
		struct stat st;
		if (strlen(n) <= LOCAL_JOB_ID_LEN || n[LOCAL_JOB_ID_LEN] != '.')
			continue;
		memcpy(id, n, LOCAL_JOB_ID_LEN);
		id[LOCAL_JOB_ID_LEN] = 0;
		snprintf(rec, sizeof(rec), "%s.json", id);
		if (!local_job_id_valid(id) || streq(de->d_name, rec) ||
		    faccessat(dir, rec, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			continue;
		if (fstatat(dir, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mtime < old)
			(void)unlinkat(dir, de->d_name, 0);
	}
	closedir(d);
}

/* bounded: the newest KEEP_FINISHED finished execs stay (ended files of a lost exec count) */
static void job_prune(int dir)
{
	struct job_entry *v;
	size_t n = job_entries(dir, &v), k = 0;

	for (size_t i = 0; i < n; i++)
		if (v[i].ended)
			v[k++] = v[i];
	if (k)
		qsort(v, k, sizeof(*v), by_end_newest);
	for (size_t i = KEEP_FINISHED; i < k; i++)
		job_unlink(dir, v[i].id);
	free(v);
	job_prune_orphans(dir);
}

int local_jobs_list(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		    struct sbx_err *err)
{
	(void)ctx;
	*ret = json_array();
	int dir = execs_dir(rec, false, err);
	if (dir == -2)
		return 0;
	if (dir < 0) {
		json_decref(*ret);
		return -1;
	}
	struct job_entry *v;
	size_t n = job_entries(dir, &v);
	for (size_t i = 0; i < n; i++) {
		struct job_state s;
		if (job_load(dir, v[i].id, &s) < 0)
			continue;
		json_array_append_new(*ret, job_view(v[i].id, &s));
		json_decref(s.rec);
	}
	free(v);
	close(dir);
	return 0;
}

/* the execs directory and the exec's state; NOTFOUND for an unknown id */
static int job_open(const struct sbx_record *rec, const char *id, struct job_state *s,
		    struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	int dir = execs_dir(rec, false, err);

	if (dir == -2 || (dir >= 0 && (!local_job_id_valid(id) || job_load(dir, id, s) < 0))) {
		if (dir >= 0)
			close(dir);
		_cleanup_free_ char *safe = sbx_term_safe(id);
		return sbx_err_set(err, SBX_E_NOTFOUND, "no exec '%s' in sandbox '%s'", safe,
				   label);
	}
	return dir;
}

int local_job_get(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, json_t **ret,
		  struct sbx_err *err)
{
	struct job_state s;
	int dir = job_open(rec, id, &s, err);

	(void)ctx;
	if (dir < 0)
		return -1;
	*ret = job_view(id, &s);
	json_decref(s.rec);
	close(dir);
	return 0;
}

/* copies fd from off on to out; the new offset */
static off_t copy_from(int fd, off_t off, int out)
{
	char buf[65536];
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		if (sbx_write_all(out, buf, (size_t)n) < 0)
			return -1;
		off += n;
	}
	return off;
}

int local_job_logs(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, bool follow,
		   int out, struct sbx_err *err)
{
	struct job_state s;
	_cleanup_close_ int dir = job_open(rec, id, &s, err);
	char name[LOCAL_JOB_ID_LEN + 8];

	(void)ctx;
	if (dir < 0)
		return -1;
	json_decref(s.rec);
	snprintf(name, sizeof(name), "%s.log.1", id);
	_cleanup_close_ int old = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	snprintf(name, sizeof(name), "%s.log", id);
	_cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_errno(err, "cannot read the log of exec '%s'", id);
	if (old >= 0 && copy_from(old, 0, out) < 0)
		return errno == EPIPE ? 0 : sbx_err_errno(err, "cannot write the log");
	off_t off = copy_from(fd, 0, out);
	/* --follow: until the command ended (its end is written after its output was) */
	for (bool last = false; follow && off >= 0 && !last;) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		struct job_state now;
		if (job_load(dir, id, &now) < 0)
			break;
		json_decref(now.rec);
		last = now.ended || now.lost;
		struct stat st;
		if (fstat(fd, &st) == 0 && st.st_size < off && old >= 0) {
			/* the part moved to ID.log.1: its rest, then the new part */
			(void)copy_from(old, off, out);
			off = 0;
		}
		off = copy_from(fd, off, out);
	}
	if (off < 0)
		return errno == EPIPE ? 0 : sbx_err_errno(err, "cannot write the log");
	struct job_state fin;
	if (job_load(dir, id, &fin) == 0) {
		json_decref(fin.rec);
		if (fin.output_lost > 0)
			return sbx_err_set(err, SBX_E_IO,
					   "%lld bytes of the output of exec '%s' are missing from "
					   "its log: writing it failed (a full disk?)",
					   fin.output_lost, id);
	}
	return 0;
}

/* --- sbx kill ---------------------------------------------------------------------------- */

/* every process of the sandbox but its init: a process joined to its pid namespace sends
 * kill(-1), which reaches every other process there, nested namespaces too */
static int kill_all(const struct sbx_record *rec, int sig, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_pids pids;
	_cleanup_close_ int pidfd = -1;

	if (local_read_pids(rec->dir, &pids) == 0)
		pidfd = sbx_pidfd_open(pids.init_pid);
	if (pidfd < 0 || !sbx_proc_alive(pids.init_pid, pids.init_start))
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is not running", label);
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	pid_t c = fork();
	if (c < 0) {
		close(ep[0]);
		close(ep[1]);
		return sbx_err_errno(err, "cannot fork");
	}
	if (c == 0) {
		struct sbx_err e = { 0 };
		close(ep[0]);
		if (local_join(rec, pids.init_pid, pidfd, &e) < 0) {
			sbx_err_send(ep[1], &e);
			_exit(1);
		}
		if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
			sbx_err_errno(&e, "cannot become root in sandbox '%s'", label);
			sbx_err_send(ep[1], &e);
			_exit(1);
		}
		pid_t g = fork(); /* in the sandbox's pid namespace */
		if (g == 0) {
			if (kill(-1, sig) < 0 && errno != ESRCH)
				_exit(1);
			_exit(0);
		}
		int st = 0;
		while (g > 0 && waitpid(g, &st, 0) < 0 && errno == EINTR)
			;
		if (g < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			errno = g < 0 ? errno : EPERM;
			sbx_err_errno(&e, "cannot signal the processes of sandbox '%s'", label);
			sbx_err_send(ep[1], &e);
			_exit(1);
		}
		sbx_err_send(ep[1], NULL);
		_exit(0);
	}
	close(ep[1]);
	int r = sbx_err_recv(ep[0], c, "kill", err);
	close(ep[0]);
	return r;
}

int local_job_kill(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, int sig,
		   struct sbx_err *err)
{
	struct job_state s;

	(void)ctx;
	if (!id)
		return local_gvisor(rec) ? local_gvisor_kill_all(rec, sig, err)
					 : kill_all(rec, sig, err);
	_cleanup_close_ int dir = job_open(rec, id, &s, err);
	if (dir < 0)
		return -1;
	pid_t pid = (pid_t)json_integer_value(json_object_get(s.rec, "host_pid"));
	unsigned long long start = (unsigned long long)json_integer_value(
		json_object_get(s.rec, "host_start"));
	pid_t inner = (pid_t)json_integer_value(json_object_get(s.rec, "gvisor_pid"));
	json_decref(s.rec);
	unsigned long long now;
	_cleanup_close_ int pfd = (s.ended || s.lost || pid <= 0) ? -1 : sbx_pidfd_open(pid);
	/* the pidfd is the command's when the process it names started when the command did */
	if (pfd < 0 || sbx_proc_starttime(pid, &now) < 0 || now != start)
		return sbx_err_set(err, SBX_E_STATE, "exec '%s' has ended", id);
	/* on gVisor the host's process is runsc's client, which waits for the command: the
	 * command and its group are signalled inside */
	if (inner > 0) {
		int r = local_gvisor_signal(rec, inner, sig, err);
		if (r == 1)
			return sbx_err_set(err, SBX_E_STATE, "exec '%s' has ended", id);
		return r < 0 ? -1 : 0;
	}
	/* its process group (it leads a session of its own), by the pidfd: no reused pid */
	if (syscall(SYS_pidfd_send_signal, pfd, sig, NULL, PIDFD_SIGNAL_PROCESS_GROUP) < 0) {
		if (errno == EINVAL && kill(-pid, sig) == 0)
			return 0;
		if (errno == ESRCH)
			return sbx_err_set(err, SBX_E_STATE, "exec '%s' has ended", id);
		return sbx_err_errno(err, "cannot signal exec '%s'", id);
	}
	return 0;
}

/* --- exec -d ------------------------------------------------------------------------------ */

int local_job_out_fd(const struct local_job *j)
{
	return j->out_w;
}

size_t local_job_pending(struct local_job *j, char *buf, size_t len)
{
	size_t got = 0;

	local_set_nonblock(j->out_r);
	while (got < len) {
		ssize_t n = read(j->out_r, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

void local_job_started(struct local_job *j, pid_t pid, pid_t inner)
{
	struct job_msg m = { .ok = 1, .pid = pid, .inner = inner };
	char ack;

	close(j->out_w);
	j->out_w = -1;
	/* the CLI reads the command's /proc entries: it stays unreaped until the answer */
	if (sbx_write_all(j->res, &m, sizeof(m)) == 0)
		while (read(j->res, &ack, 1) < 0 && errno == EINTR)
			;
	close(j->res);
	j->res = -1;
	j->told = true;
}

static void log_write(struct local_job *j, const char *buf, size_t n)
{
	struct stat st;

	if (fstat(j->log, &st) == 0 && st.st_size + (off_t)n > LOG_PART && st.st_size > 0) {
		/* the part becomes ID.log.1, by copy: the waiter cannot rename on the host */
		if (ftruncate(j->log1, 0) == 0) {
			char b[65536];
			ssize_t r;
			off_t off = 0;
			while ((r = pread(j->log, b, sizeof(b), off)) > 0 &&
			       pwrite(j->log1, b, (size_t)r, off) == r)
				off += r;
		}
		(void)!ftruncate(j->log, 0);
	}
	size_t part = n > LOG_PART ? LOG_PART : n;
	if (sbx_write_all(j->log, buf, part) < 0)
		j->lost += (long long)part; /* said in ID.end, and by ps and logs */
	if (j->all_full)
		return;
	if (fstat(j->all, &st) == 0 && st.st_size + (off_t)n > ALL_LOG_MAX) {
		char line[128];
		int k = snprintf(
			line, sizeof(line),
			"\nsbx: this log is full; 'sbx logs SB %s' has the rest of exec %s\n",
			j->id, j->id);
		(void)sbx_write_all(j->all, line, (size_t)k);
		j->all_full = true;
		return;
	}
	(void)sbx_write_all(j->all, buf, n);
}

/* everything the pipe holds now; false at its end */
static bool relay_some(struct local_job *j)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(j->out_r, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0)
			return false;
		log_write(j, buf, (size_t)n);
	}
}

static void job_end(struct local_job *j, int st)
{
	char line[END_ROOM];
	int n = snprintf(line, sizeof(line), "%d %lld %lld\n", st, sbx_now_ms(), j->lost);

	(void)!pwrite(j->end, line, (size_t)n, 0);
	close(j->end);
	j->end = -1;
}

void local_job_relay(struct local_job *j, pid_t pid, int *ret_st)
{
	_cleanup_close_ int pfd = sbx_pidfd_open(pid);
	bool open = true, reaped = false;
	int st = 0;

	(void)fcntl(j->out_r, F_SETFL, O_NONBLOCK);
	/* output goes on after the command ended while processes it left hold the pipe */
	while (open) {
		struct pollfd p[2] = { { .fd = j->out_r, .events = POLLIN },
				       { .fd = reaped ? -1 : pfd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents)
			open = relay_some(j);
		if (!reaped && p[1].revents) {
			open = relay_some(j) && open; /* its own output first */
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			reaped = true;
			job_end(j, st);
		}
	}
	if (!reaped) {
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		job_end(j, st);
	}
	*ret_st = st;
}

static void job_close(struct local_job *j)
{
	int *fds[] = { &j->out_r, &j->out_w, &j->log, &j->log1, &j->all, &j->end, &j->res };

	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

/* the record of a command that runs: the CLI's, on the host */
static int job_record(int dir, const struct local_job *j, const struct sbx_exec_opts *o,
		      pid_t host_pid, pid_t inner, pid_t waiter, long long started,
		      struct sbx_err *err)
{
	unsigned long long hs = 0, ws = 0;
	pid_t nspid = 0;
	_cleanup_free_ char *status = NULL;
	char path[64];

	(void)sbx_proc_starttime(host_pid, &hs);
	(void)sbx_proc_starttime(waiter, &ws);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)host_pid);
	if ((status = sbx_read_file(path, 65536, NULL))) {
		/* NSpid: the host's, then the sandbox's (the last) */
		const char *l = strstr(status, "\nNSpid:");
		if (l) {
			const char *e = strchr(l + 1, '\n');
			const char *sp = e ? e : l + strlen(l);
			while (sp > l && (sp[-1] < '0' || sp[-1] > '9'))
				sp--;
			while (sp > l && sp[-1] >= '0' && sp[-1] <= '9')
				sp--;
			nspid = (pid_t)strtol(sp, NULL, 10);
		}
	}
	if (inner > 0)
		nspid = inner; /* gVisor's: the command's pid as the sandbox sees it */
	json_t *argv = json_array();
	for (char **a = o->argv; *a; a++)
		json_array_append_new(argv, json_string(*a));
	_cleanup_json_ json_t *r = json_pack(
		"{s:s, s:o, s:i, s:i, s:I, s:i, s:I, s:I}", "id", j->id, "argv", argv, "pid",
		(int)nspid, "host_pid", (int)host_pid, "host_start", (json_int_t)hs, "waiter_pid",
		(int)waiter, "waiter_start", (json_int_t)ws, "started_ms", (json_int_t)started);
	if (r && inner > 0)
		json_object_set_new(r, "gvisor_pid", json_integer(inner));
	_cleanup_free_ char *txt = r ? json_dumps(r, JSON_COMPACT) : NULL;
	char tmp[LOCAL_JOB_ID_LEN + 16], name[LOCAL_JOB_ID_LEN + 8];
	snprintf(tmp, sizeof(tmp), ".%s.json.new", j->id);
	snprintf(name, sizeof(name), "%s.json", j->id);
	_cleanup_close_ int fd = openat(dir, tmp,
					O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (!txt || fd < 0 || sbx_write_all(fd, txt, strlen(txt)) < 0 ||
	    renameat(dir, tmp, dir, name) < 0) {
		int e = errno;
		(void)unlinkat(dir, tmp, 0);
		errno = e;
		return sbx_err_errno(err, "cannot record exec '%s'", j->id);
	}
	return 0;
}

/* the waiter outlives the caller: descriptors the caller handed sbx (open across its exec, so
 * without close-on-exec, as sbx opens none of its own) are closed, so that no pipe of the
 * caller stays open while the command runs */
static void close_inherited(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	if (!d)
		return;
	int self = dirfd(d);
	while ((de = readdir(d))) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		if (*end || fd < 3 || fd == self)
			continue;
		int fl = fcntl((int)fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			close((int)fd);
	}
	closedir(d);
}

static int open_new(int dir, const char *id, const char *ext, int flags)
{
	char name[LOCAL_JOB_ID_LEN + 8];

	snprintf(name, sizeof(name), "%s%s", id, ext);
	return openat(dir, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

int local_job_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
		   int *ret_status, struct sbx_err *err, local_exec_fn run)
{
	struct local_job j = {
		.out_r = -1, .out_w = -1, .log = -1, .log1 = -1, .all = -1, .end = -1, .res = -1
	};
	unsigned char rnd[LOCAL_JOB_ID_LEN / 2];
	_cleanup_close_ int dir = execs_dir(rec, true, err);

	if (dir < 0)
		return -1;
	job_prune(dir);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return sbx_err_errno(err, "cannot make an exec id");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(j.id + 2 * i, 3, "%02x", rnd[i]);
	_cleanup_free_ char *lp = local_log_path(rec);
	int sp[2], op[2];
	j.all = open(lp, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	j.log = open_new(dir, j.id, ".log", O_RDWR | O_APPEND);
	j.log1 = open_new(dir, j.id, ".log.1", O_RDWR);
	j.end = open_new(dir, j.id, ".end", O_WRONLY);
	if (j.all < 0 || j.log < 0 || j.log1 < 0 || j.end < 0) {
		sbx_err_errno(err, "cannot create the logs of an exec in '%s/jobs'", rec->dir);
		goto fail;
	}
	/* ID.end's room taken now (blanks, no newline: not an end yet), so that its line is
	 * written whatever the output did to the disk meanwhile */
	static const char room[END_ROOM] = { [0 ... END_ROOM - 1] = ' ' };
	if (sbx_write_all(j.end, room, sizeof(room)) < 0) {
		sbx_err_errno(err, "cannot write the record of an exec in '%s/jobs'", rec->dir);
		goto fail;
	}
	if (pipe2(op, O_CLOEXEC) < 0) {
		sbx_err_errno(err, "cannot create a pipe");
		goto fail;
	}
	j.out_r = op[0];
	j.out_w = op[1];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		sbx_err_errno(err, "cannot create a socket");
		goto fail;
	}
	fflush(stdout);
	fflush(stderr);
	long long started = sbx_now_ms();
	pid_t w = fork();
	if (w < 0) {
		close(sp[0]);
		close(sp[1]);
		sbx_err_errno(err, "cannot fork");
		goto fail;
	}
	if (w == 0) {
		/* the waiter: no terminal, none of the caller's descriptors, no signals of its */
		static const int ign[] = { SIGINT,  SIGTERM, SIGHUP, SIGQUIT,
					   SIGPIPE, SIGUSR1, SIGUSR2 };
		close(sp[0]);
		close(TAKE_FD(dir)); /* the waiter writes through its files alone */
		j.res = sp[1];
		setsid();
		for (size_t k = 0; k < ARRAY_SIZE(ign); k++)
			signal(ign[k], SIG_IGN);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int k = 0; k < 3 && null >= 0; k++)
			(void)dup2(null, k);
		close_inherited();
		struct sbx_exec_opts wo = *o;
		struct sbx_err e = { 0 };
		int st = 0;
		if (run(ctx, rec, &wo, &j, &st, &e) < 0 && !j.told) {
			struct job_msg m = { .ok = 0, .err = e };
			(void)sbx_write_all(j.res, &m, sizeof(m));
		}
		_exit(0);
	}
	close(sp[1]);
	j.res = sp[0];
	struct job_msg m = { 0 };
	ssize_t n;
	do
		n = read(j.res, &m, sizeof(m));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(m)) {
		sbx_err_set(err, SBX_E_SYSTEM, "the background command did not start");
		goto fail;
	}
	if (!m.ok) {
		*err = m.err;
		goto fail;
	}
	int r = job_record(dir, &j, o, m.pid, m.inner, w, started, err);
	char ack = 1;
	(void)!write(j.res, &ack, 1);
	job_close(&j);
	if (r < 0)
		return -1;
	if (o->ret_exec_id)
		snprintf(o->ret_exec_id, SBX_EXEC_ID_MAX, "%s", j.id);
	*ret_status = 0;
	return 0;
fail:
	job_close(&j);
	job_unlink(dir, j.id);
	return -1;
}
