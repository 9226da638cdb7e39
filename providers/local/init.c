/* The local sandbox's init (PID 1 inside, cloned by supervisor.c): its root, mounts, /dev,
 * loopback and seccomp filter, then reaping orphans and making sockets of its network. */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/confine.h"
#include "core/proc.h"
#include "core/strbuf.h"
#include "core/test-hook.h"

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

static int ready_fd = -1;

static _noreturn_ _printf_(1, 2) void init_fail(const char *fmt, ...)
{
	char buf[400];
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(buf) && e)
		snprintf(buf + n, sizeof(buf) - (size_t)n, ": %s", strerror(e));
	if (ready_fd >= 0)
		(void)sbx_proc_report(ready_fd, buf, strlen(buf));
	_exit(1);
}

static int attach_tree(int fd, const char *target)
{
	return (int)syscall(SYS_move_mount, fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
}

static int make_readonly(const char *path)
{
	struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY };

	if (syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &a, sizeof(a)) == 0)
		return 0;
	if (errno != ENOSYS)
		return -1;
	/* older kernels: remount the top mount only */
	return mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		     NULL);
}

/* a real directory at path (a symlink planted there is replaced) */
static void ensure_dir(const char *path, mode_t mode)
{
	struct stat st;

	if (lstat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return;
		if (unlink(path) < 0)
			init_fail("cannot replace '%s'", path);
	}
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		init_fail("cannot create '%s'", path);
}

static void ensure_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0)
		init_fail("cannot create '%s'", path);
	close(fd);
}

static void bind_ro(const char *src, const char *dst)
{
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		init_fail("cannot bind '%s'", src);
	if (make_readonly(dst) < 0)
		init_fail("cannot make '%s' read-only", dst);
}

#define R "/tmp" /* where the new root is assembled, in our private mount namespace */

/* --secret: the sandbox's CA (ca, PEM) trusted without configuration. The trust bundle the
 * sandbox sees (an image's own, or the host's under the host's /etc), with the CA after it,
 * is written to /run/sbx/ca-bundle.crt (what SSL_CERT_FILE and the like name) and bound over
 * every system bundle path there is, so that programs reading their default (apt, a client
 * that ignores the variables) trust it too. After the pivot: paths resolve inside only */
static void trust_ca(const char *ca)
{
	static const char *const bundles[] = {
		"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/cert.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"
	};
	struct strbuf b = STRBUF_INIT;
	char buf[65536];
	struct stat st;

	/* the first bundle there is (a link resolves inside the sandbox) */
	for (size_t i = 0; i < ARRAY_SIZE(bundles) && !b.len; i++) {
		int fd = open(bundles[i], O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
			while (b.len < (16u << 20) && (n = read(fd, buf, sizeof(buf))) > 0)
				strbuf_add(&b, buf, (size_t)n);
		close(fd);
	}
	if (b.len && b.buf[b.len - 1] != '\n')
		strbuf_addstr(&b, "\n");
	strbuf_addstr(&b, ca);
	ensure_dir("/run", 0755);
	ensure_dir("/run/sbx", 0755);
	(void)unlink("/run/sbx/ca-bundle.crt");
	int fd = open("/run/sbx/ca-bundle.crt",
		      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || sbx_write_all(fd, b.buf, b.len) < 0 || fchmod(fd, 0644) < 0)
		init_fail("cannot write /run/sbx/ca-bundle.crt");
	close(fd);
	strbuf_release(&b);
	for (size_t i = 0; i < ARRAY_SIZE(bundles); i++)
		if (stat(bundles[i], &st) == 0 && S_ISREG(st.st_mode) &&
		    mount("/run/sbx/ca-bundle.crt", bundles[i], NULL, MS_BIND, NULL) < 0)
			init_fail("cannot add the sandbox's CA to %s", bundles[i]);
}

/* --image: the root is an overlay of the image's layers (fds[0..n-1], base first) with the
 * sandbox's fs/upper (fds[n]: the sandbox's fs directory) on top. The trees are attached on a
 * small tmpfs at R first, so their paths are short and ours; the overlay then covers R. A
 * tree not detached by the supervisor (fd -1) is opened here. */
static void mount_image_root(const struct local_setup *s, int *fds)
{
	char p[PATH_MAX];
	struct strbuf o = STRBUF_INIT;

	/* every tree first: the tmpfs hides what lies under R (the store may be there) */
	for (size_t i = 0; i <= s->n_layers; i++) {
		if (fds[i] >= 0)
			continue;
		if (i < s->n_layers)
			snprintf(p, sizeof(p), "%s", s->layers[i]);
		else
			snprintf(p, sizeof(p), "%s/fs", s->dir);
		if ((fds[i] = local_clone_tree(p)) < 0)
			init_fail("cannot open '%s'", p);
	}
	if (mount("tmpfs", R, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
		init_fail("cannot mount a tmpfs to assemble the image's root");
	for (size_t i = 0; i <= s->n_layers; i++) {
		char at[64];
		snprintf(at, sizeof(at), R "/%zu", i);
		if (mkdir(at, 0755) < 0)
			init_fail("cannot create '%s'", at);
		if (attach_tree(fds[i], at) < 0)
			init_fail("cannot attach layer %zu of the image", i);
		close(fds[i]);
		fds[i] = -1;
	}
	strbuf_addstr(&o, "lowerdir=");
	for (size_t i = s->n_layers; i-- > 0;) {
		char l[64];
		snprintf(l, sizeof(l), R "/%zu%s", i, i ? ":" : "");
		strbuf_addstr(&o, l);
	}
	snprintf(p, sizeof(p), ",upperdir=" R "/%zu/upper,workdir=" R "/%zu/work,userxattr",
		 s->n_layers, s->n_layers);
	strbuf_addstr(&o, p);
	if (mount("overlay", R, "overlay", 0, o.buf) < 0)
		init_fail("cannot mount the image's layers (overlay)");
	strbuf_release(&o);
}

static void setup_dev(void)
{
	static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
	char p[64], s[64];

	ensure_dir(R "/dev", 0755);
	if (mount("tmpfs", R "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=65536k") < 0)
		init_fail("cannot mount /dev");
	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
		snprintf(p, sizeof(p), R "/dev/%s", nodes[i]);
		snprintf(s, sizeof(s), "/dev/%s", nodes[i]);
		ensure_file(p);
		if (mount(s, p, NULL, MS_BIND, NULL) < 0)
			init_fail("cannot bind %s", s);
	}
	ensure_dir(R "/dev/pts", 0755);
	if (mount("devpts", R "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		init_fail("cannot mount /dev/pts");
	if (symlink("pts/ptmx", R "/dev/ptmx") < 0)
		init_fail("cannot create /dev/ptmx");
	ensure_dir(R "/dev/shm", 01777);
	if (mount("shm", R "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=65536k") < 0)
		init_fail("cannot mount /dev/shm");
	(void)symlink("/proc/self/fd", R "/dev/fd");
	(void)symlink("/proc/self/fd/0", R "/dev/stdin");
	(void)symlink("/proc/self/fd/1", R "/dev/stdout");
	(void)symlink("/proc/self/fd/2", R "/dev/stderr");
	(void)mount(NULL, R "/dev", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
		    "mode=0755,size=65536k");
}

static void loopback_up(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = { 0 };

	if (fd < 0)
		init_fail("cannot open a socket to set up loopback");
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		init_fail("cannot read loopback flags");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		init_fail("cannot bring up loopback");
	close(fd);
}

static void mkdir_p_inside(const char *path)
{
	if (sbx_mkdir_p(path, 0755) < 0)
		init_fail("cannot create '%s' inside the sandbox", path);
}

/* no process but init left in the pid namespace (exec'd commands are not init's children) */
static bool alone(void)
{
	_cleanup_free_ pid_t *v = NULL;
	size_t n = 0;

	if (sbx_proc_list(&v, &n) < 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (v[i] != 1)
			return false;
	return true;
}

/* sends sock (or, when it is -1, the error e) as the answer */
static void factory_reply(int fd, int sock, int e)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &e, .iov_len = sizeof(e) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (sock >= 0) {
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &sock, sizeof(int));
	}
	(void)sendmsg(fd, &m, MSG_NOSIGNAL);
}

/* the supervisor's socket factory: sockets made here belong to the sandbox's network
 * namespace (the supervisor, outside it, may not be able to enter it) */
static void serve_factory(int fd)
{
	struct local_factory_req req;
	ssize_t n = recv(fd, &req, sizeof(req), MSG_DONTWAIT);

	if (n != (ssize_t)sizeof(req))
		return;
	int e = 0;
	int s = socket(req.op == '6' ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		e = errno;
	} else if (req.op == 'L') {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons(req.port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int one = 1;
		(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 128) < 0)
			e = errno;
	}
	factory_reply(fd, e ? -1 : s, e);
	if (s >= 0)
		close(s);
}

/* the sandbox's own cgroups at /sys/fs/cgroup, seen through its cgroup namespace (whose root
 * is the sandbox's cgroup, so nothing of the host's tree shows): a cgroup2 there on v2; on v1
 * or the hybrid, a tmpfs with each v1 hierarchy at its name ("cpu,cpuacct", with a symlink per
 * controller) and the unified one at unified, as docker lays them out. Runtimes that size
 * themselves from /proc/self/cgroup and /sys/fs/cgroup (Node, the JVM, Go, Python) so find
 * --memory and --cpus. Read-only unless delegated (s->cgroup_writable). */
static void mount_cgroups(const struct local_setup *s)
{
	const char *top = R "/sys/fs/cgroup";
	unsigned long fl = MS_NOSUID | MS_NODEV | MS_NOEXEC | (s->cgroup_writable ? 0 : MS_RDONLY);
	struct stat st;

	if (!s->n_cgroup_mounts || lstat(top, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	if (!s->cgroup_mounts[0].name[0]) {
		if (mount("cgroup2", top, "cgroup2", fl, NULL) < 0)
			init_fail("cannot mount the sandbox's cgroup at /sys/fs/cgroup");
		return;
	}
	if (mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k") <
	    0)
		init_fail("cannot mount a tmpfs at /sys/fs/cgroup");
	for (size_t i = 0; i < s->n_cgroup_mounts; i++) {
		const struct local_cgroup_mount *m = &s->cgroup_mounts[i];
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", top, m->name);
		if (mkdir(p, 0555) < 0 && errno != EEXIST)
			init_fail("cannot create '%s'", p);
		if (mount(m->v2 ? "cgroup2" : "cgroup", p, m->v2 ? "cgroup2" : "cgroup", fl,
			  m->v2 ? NULL : m->opts) < 0)
			init_fail("cannot mount the sandbox's cgroup at /sys/fs/cgroup/%s",
				  m->name);
		if (!strchr(m->name, ','))
			continue;
		char list[sizeof(m->opts)], *save = NULL;
		snprintf(list, sizeof(list), "%s", m->opts);
		for (char *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
			snprintf(p, sizeof(p), "%s/%s", top, c);
			(void)symlink(m->name, p);
		}
	}
	(void)mount(NULL, top, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    "mode=0755,size=64k");
}

void local_init(const struct local_setup *s, int rootfd, int *volfds, int *layerfds, int sync_fd,
		int report_fd)
{
	char c;
	char p[PATH_MAX];

	ready_fd = report_fd;
	/* getppid() is 0 in a new pid namespace: a supervisor that died before this point shows
	 * as EOF on the sync pipe instead */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	prctl(PR_SET_NAME, "sbx-init", 0, 0, 0);
	if (read(sync_fd, &c, 1) != 1)
		_exit(1); /* the supervisor went away */
	/* init stays dumpable: exec joins its namespaces through it. What keeps the sandbox's
	 * processes from /proc/1 (its exe is the sbx binary) is that init holds every
	 * capability of the sandbox's user namespace and they hold fewer: the kernel lets no
	 * process read or trace one with capabilities it lacks */
	/* the supervisor has moved us into the sandbox's cgroups: that is our cgroup root now */
	if (unshare(CLONE_NEWCGROUP) < 0)
		init_fail("cannot create the cgroup namespace");
	/* sync_fd stays open as a lifeline: EOF on it means the supervisor died */
	if (s->map.kind != LOCAL_MAP_SELF && setgroups(0, NULL) < 0)
		init_fail("cannot drop supplementary groups");
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		init_fail("cannot become root in the user namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		init_fail("cannot make mounts private");

	/* the sandbox's own root directory: run by root, the supervisor cloned it (sandbox root
	 * cannot traverse root's home); otherwise the path is ours to reach */
	snprintf(p, sizeof(p), "%s/root", s->dir);
	if (!s->n_layers && rootfd < 0 && (rootfd = local_clone_tree(p)) < 0)
		init_fail("cannot open the sandbox root '%s'", p);
	/* volume sources, detached now (before R hides the host's /tmp), attached after the
	 * pivot */
	for (size_t i = 0; i < s->n_volumes; i++)
		if (volfds[i] < 0 && (volfds[i] = local_clone_tree(s->volumes[i].host)) < 0)
			init_fail("cannot open volume '%s'", s->volumes[i].host);
	if (s->n_layers) {
		mount_image_root(s, layerfds);
	} else {
		if (attach_tree(rootfd, R) < 0)
			init_fail("cannot attach the sandbox root");
		close(rootfd);
	}
	if (mount(NULL, R, NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		init_fail("cannot make the sandbox root private");

	/* the host's system view, read-only (an image brings its own) */
	static const char *const sys[] = { "usr",   "bin",   "sbin",   "lib",
					   "lib32", "lib64", "libx32", "etc" };
	for (size_t i = 0; i < (s->image ? 0 : ARRAY_SIZE(sys)); i++) {
		char host[64], dst[64];
		struct stat st;

		snprintf(host, sizeof(host), "/%s", sys[i]);
		snprintf(dst, sizeof(dst), R "/%s", sys[i]);
		if (lstat(host, &st) < 0 || S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode))
			continue; /* symlinks were copied into the root at create */
		ensure_dir(dst, 0755);
		bind_ro(host, dst);
	}
	/* /proc and /sys are whole, with nothing mounted over a file or directory of theirs: the
	 * kernel lets a user namespace made inside (--nested) mount a proc or sysfs of its own
	 * only while one fully visible is in its mount namespace (mnt_already_visible), and no
	 * more writable than that one (sysfs: read-only). So no path of theirs is masked (a
	 * mask would have to be left out for s->nested); what docker masks is unreadable to a
	 * user namespace other than the initial one (kmsg, timer_list, kcore, sysrq-trigger) or
	 * shows only what the reader may see (keys) */
	ensure_dir(R "/proc", 0555);
	if (mount("proc", R "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		init_fail("cannot mount /proc");
	setup_dev();
	ensure_dir(R "/sys", 0555);
	if (mount("sysfs", R "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL) <
	    0)
		(void)0; /* no sysfs: an empty /sys, as under bubblewrap */
	else
		mount_cgroups(s);

	if (sethostname(s->hostname, strlen(s->hostname)) < 0)
		init_fail("cannot set the hostname");
	if (!s->net_host)
		loopback_up();

	if (chdir(R) < 0)
		init_fail("cannot enter the sandbox root");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		init_fail("cannot pivot into the sandbox root");
	if (umount2(".", MNT_DETACH) < 0)
		init_fail("cannot detach the host's root");
	if (chdir("/") < 0)
		init_fail("cannot enter /");

	/* the sandbox's own /etc/hostname and /etc/hosts over the host's read-only
	 * /etc, after the pivot: paths resolve inside the sandbox only */
	static const char *const etc[] = { "hostname", "hosts" };
	for (size_t i = 0; i < ARRAY_SIZE(etc); i++) {
		char src[64], dst[64];
		struct stat st;
		snprintf(src, sizeof(src), "/run/sbx/%s", etc[i]);
		snprintf(dst, sizeof(dst), "/etc/%s", etc[i]);
		/* an image without them gets empty ones to bind over (its root is writable) */
		if (s->image && lstat(dst, &st) < 0 && errno == ENOENT) {
			(void)mkdir("/etc", 0755);
			int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				      0644);
			if (fd >= 0)
				close(fd);
		}
		if (lstat(src, &st) < 0 || !S_ISREG(st.st_mode) || lstat(dst, &st) < 0 ||
		    !S_ISREG(st.st_mode))
			continue; /* a planted symlink is never followed */
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			init_fail("cannot bind /etc/%s", etc[i]);
	}
	if (s->ca_pem)
		trust_ca(s->ca_pem);
	/* volumes, after the pivot: destinations resolve inside the sandbox only */
	for (size_t i = 0; i < s->n_volumes; i++) {
		const struct sbx_volume *v = &s->volumes[i];
		struct stat st;

		if (fstat(volfds[i], &st) < 0)
			init_fail("cannot use volume '%s'", v->host);
		if (S_ISDIR(st.st_mode)) {
			mkdir_p_inside(v->dest);
		} else {
			_cleanup_free_ char *parent = xstrdup(v->dest);
			*strrchr(parent, '/') = 0;
			if (*parent)
				mkdir_p_inside(parent);
			/* a file already there is the mount point (/etc/hosts in a read-only /etc) */
			struct stat ds;
			if (stat(v->dest, &ds) < 0 || S_ISDIR(ds.st_mode)) {
				int fd = open(v->dest, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
				if (fd < 0)
					init_fail("cannot create mount point '%s'", v->dest);
				close(fd);
			}
		}
		if (attach_tree(volfds[i], v->dest) < 0)
			init_fail("cannot mount volume '%s' on '%s'", v->host, v->dest);
		if (v->ro && make_readonly(v->dest) < 0)
			init_fail("cannot make volume '%s' read-only", v->dest);
		close(volfds[i]);
	}
	mkdir_p_inside(s->workdir);

	if (sbx_seccomp_install(s->bpf, s->bpf_len) < 0)
		init_fail("cannot install the seccomp filter");

	sbx_test_hook("init-ready");
	if (sbx_proc_report(ready_fd, "", 1) < 0)
		_exit(1);
	close(ready_fd);
	/* nothing of the host stays open in PID 1 but the lifeline */
	if (sync_fd != 0) {
		dup2(sync_fd, 0);
		sync_fd = 0;
	}
	syscall(SYS_close_range, 1, ~0U, 0);

	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	int sfd = signalfd(-1, &all, SFD_CLOEXEC);
	struct pollfd pf[2] = { { .fd = sync_fd, .events = POLLIN },
				{ .fd = sfd, .events = POLLIN } };
	bool stopping = false;
	for (;;) {
		if (poll(pf, sfd >= 0 ? 2 : 1, stopping ? 20 : -1) < 0 && errno != EINTR)
			_exit(1);
		if (pf[0].revents & POLLIN) {
			char peek;
			ssize_t pr = recv(sync_fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT);
			if (pr > 0)
				serve_factory(sync_fd);
			else if (pr == 0 || (errno != EAGAIN && errno != EINTR))
				_exit(0); /* the supervisor is gone: so is the sandbox (every
					   * process in the pid namespace dies with its init) */
			else
				continue;
		} else if (pf[0].revents) {
			_exit(0);
		}
		struct signalfd_siginfo si;
		if (sfd >= 0 && pf[1].revents && read(sfd, &si, sizeof(si)) == sizeof(si) &&
		    (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) && !stopping) {
			/* a graceful stop: pass it on; leave once every other process ended (whoever
			 * sent it sends SIGKILL when its grace period is over) */
			kill(-1, SIGTERM);
			stopping = true;
		}
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (stopping && alone())
			_exit(0);
	}
}
