/* DOCKER_HOST=ssh://[USER@]HOST[:PORT]: one ssh process per connection, running
 * `docker system dial-stdio` on the remote host (which splices its stdin and stdout to the
 * remote engine's socket), its stdin and stdout one end of the connection sbx uses: a
 * socketpair's (sbx_dial_open), or the accepted end of libcurl's connection to a loopback
 * listener of sbx's (sbx_dial_curl, which says why). ssh is /usr/bin/ssh (never looked up in
 * PATH), in a session of its own (no terminal to prompt on; BatchMode too), with a few of the
 * caller's variables and none of sbx's other descriptors; its stderr is kept so that a
 * failure can be told in ssh's own words.
 *
 * One login per call: the connections of a shared dial (every request and stream of one sbx
 * call: an exec's API requests and its hijacked stream) are sessions of one ssh connection.
 * The first one's ssh logs in and leaves a master in the background (ControlMaster=auto,
 * ControlPersist), the next ones' open their sessions through its control socket. That socket
 * is in a directory made for the call (mkdtemp: new, 0700, the caller's own), so a master
 * another user planted is never used, and the user's config's sharing is overridden
 * (ControlPath=none where sbx shares nothing). The master ends with the call: sbx_dial_free
 * asks it its pid over its socket (ssh's multiplexing protocol), ends it by that pid, waits for
 * it and removes the directory. sbx killed, it ends by itself a second after its last session
 * (each connection's ssh ends with its input, a socket of the dead process's); the empty
 * directory stays. */
#define _GNU_SOURCE
#include "core/dial.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "core/http.h"
#include "core/log.h"
#include "core/util.h"

extern char **environ;

/* the caller's variables ssh may need: its agent, Kerberos, the PATH a ProxyCommand of the
 * user's config runs with; nothing else of sbx's environment reaches it */
static const char *const pass_env[] = {
	"HOME", "USER", "LOGNAME", "PATH", "SSH_AUTH_SOCK", "KRB5CCNAME", "LANG", "LC_ALL",
};

bool sbx_dial_is_ssh(const char *url)
{
	return url && startswith(url, "ssh://");
}

/* a copy of s fit for a message: what is not printable ASCII becomes '?' */
static char *printable(const char *s, size_t n)
{
	char *c = xstrndup(s, n);
	for (char *p = c; *p; p++)
		if ((unsigned char)*p < 32 || (unsigned char)*p > 126)
			*p = '?';
	return c;
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		c == '.' || c == '-' || c == '_';
}

/* a user name, a host name or an alias of the ssh config: name characters only, and never a
 * leading '-' (ssh would read an option) */
static bool valid_name(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n > max || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i]))
			return false;
	return true;
}

static bool valid_v6(const char *s)
{
	size_t n = strlen(s);
	if (n < 2 || n > 45 || !strchr(s, ':'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdefABCDEF:.", s[i]))
			return false;
	return true;
}

/* HOME's ssh config, when HOME is not the home directory ssh itself reads (the passwd entry's):
 * sbx honours the caller's HOME as the docker client does for its own files */
static char *home_config(void)
{
	const char *home = getenv("HOME");
	struct passwd *pw = getpwuid(getuid());
	struct stat st;

	if (!home || home[0] != '/')
		return NULL;
	if (pw && pw->pw_dir && streq(pw->pw_dir, home))
		return NULL;
	char *f = xasprintf("%s/.ssh/config", home);
	if (stat(f, &st) < 0 || !S_ISREG(st.st_mode)) {
		free(f);
		return NULL;
	}
	return f;
}

static void conn_reset(struct sbx_dial_conn *c)
{
	c->fd = c->errfd = -1;
	c->pid = 0;
	c->last[0] = 0;
	c->curlen = 0;
	c->bound = false;
}

int sbx_dial_new(const char *url, struct sbx_dial **ret, struct sbx_err *err)
{
	_cleanup_free_ char *shown = printable(url, strlen(url));
	_cleanup_(sbx_dial_freep) struct sbx_dial *d = NULL;
	const char *p, *end, *at;
	long long port;

	if (!sbx_dial_is_ssh(url))
		return sbx_err_set(err, SBX_E_CONFIG, "DOCKER_HOST '%s' is not an ssh:// URL",
				   shown);
	p = url + strlen("ssh://");
	end = p + strcspn(p, "/?#");
	if (*end && !streq(end, "/"))
		return sbx_err_set(err, SBX_E_CONFIG,
				   "DOCKER_HOST '%s': nothing may follow the host of an ssh:// URL",
				   shown);
	d = xcalloc(1, sizeof(*d));
	for (size_t i = 0; i < SBX_DIAL_MAX_CONNS; i++)
		conn_reset(&d->conns[i]);
	d->lfd = -1;
	at = memrchr(p, '@', (size_t)(end - p));
	if (at) {
		d->user = xstrndup(p, (size_t)(at - p));
		if (strchr(d->user, ':'))
			return sbx_err_set(
				err, SBX_E_CONFIG,
				"DOCKER_HOST: a password in an ssh:// URL is not supported "
				"(use an ssh key or agent)");
		if (!valid_name(d->user, 64))
			return sbx_err_set(
				err, SBX_E_CONFIG,
				"DOCKER_HOST '%s': the user name must be letters, digits, "
				"'.', '_' or '-', and not begin with '-'",
				shown);
		p = at + 1;
	}
	const char *colon;
	if (*p == '[') {
		const char *close = memchr(p, ']', (size_t)(end - p));
		if (!close)
			return sbx_err_set(err, SBX_E_CONFIG, "DOCKER_HOST '%s': no ']' after '['",
					   shown);
		d->host = xstrndup(p + 1, (size_t)(close - p - 1));
		if (!valid_v6(d->host))
			return sbx_err_set(
				err, SBX_E_CONFIG,
				"DOCKER_HOST '%s': not an IPv6 address between '[' and ']'", shown);
		colon = close + 1 < end ? close + 1 : NULL;
		if (colon && *colon != ':')
			return sbx_err_set(err, SBX_E_CONFIG,
					   "DOCKER_HOST '%s': only ':PORT' may follow ']'", shown);
	} else {
		colon = memchr(p, ':', (size_t)(end - p));
		d->host = xstrndup(p, (size_t)((colon ? colon : end) - p));
		if (!*d->host)
			return sbx_err_set(err, SBX_E_CONFIG, "DOCKER_HOST '%s' names no host",
					   shown);
		if (!valid_name(d->host, 253))
			return sbx_err_set(
				err, SBX_E_CONFIG,
				"DOCKER_HOST '%s': the host must be a name or an address "
				"(letters, digits, '.', '_' or '-', not beginning with '-')",
				shown);
	}
	if (colon) {
		d->port = xstrndup(colon + 1, (size_t)(end - colon - 1));
		if (!*d->port || strspn(d->port, "0123456789") != strlen(d->port) ||
		    sbx_parse_int(d->port, 1, 65535, &port) < 0)
			return sbx_err_set(
				err, SBX_E_CONFIG,
				"DOCKER_HOST '%s': the port must be a number from 1 to 65535",
				shown);
	}
	d->config = home_config();
	d->session = xcalloc(1, sizeof(*d->session));
	d->owner = getpid();
	*ret = TAKE_PTR(d);
	return 0;
}

#define SHARED_MAX 4
static struct sbx_dial *shared[SHARED_MAX];
static char *shared_url[SHARED_MAX];

static void shared_end(void)
{
	for (size_t i = 0; i < SHARED_MAX; i++) {
		sbx_dial_free(shared[i]);
		free(shared_url[i]);
		shared[i] = NULL;
		shared_url[i] = NULL;
	}
}

int sbx_dial_shared(const char *url, struct sbx_dial **ret, struct sbx_err *err)
{
	static bool registered;
	size_t i;

	for (i = 0; i < SHARED_MAX && shared[i]; i++)
		if (streq(shared_url[i], url)) {
			*ret = shared[i];
			return 0;
		}
	if (i == SHARED_MAX)
		return sbx_err_set(err, SBX_E_CONFIG, "more than %d ssh:// engines in one call",
				   SHARED_MAX);
	if (sbx_dial_new(url, &shared[i], err) < 0)
		return -1;
	shared[i]->share = true; /* every connection of the call through one login */
	shared_url[i] = xstrdup(url);
	if (!registered && atexit(shared_end) == 0)
		registered = true;
	*ret = shared[i];
	return 0;
}

void sbx_dial_forward(struct sbx_dial *d, int port)
{
	free(d->forward);
	d->forward = xasprintf("127.0.0.1:%d", port);
}

void sbx_dial_shared_forget(void)
{
	/* sbx_dial_free leaves a forked child's copies' ssh processes to the parent */
	for (size_t i = 0; i < SHARED_MAX; i++) {
		sbx_dial_free(shared[i]);
		free(shared_url[i]);
		shared[i] = NULL;
		shared_url[i] = NULL;
	}
}

char **sbx_dial_argv(const struct sbx_dial *d, const char *ctl)
{
	char **v = xcalloc(26, sizeof(char *));
	size_t n = 0;

	v[n++] = xstrdup(SBX_DIAL_SSH);
	if (d->config) {
		v[n++] = xstrdup("-F");
		v[n++] = xstrdup(d->config);
	}
	v[n++] = xstrdup("-o");
	v[n++] = xstrdup("BatchMode=yes");
	v[n++] = xstrdup("-o");
	v[n++] = xstrdup("ConnectTimeout=10");
	/* one login shared through ctl, or none; never the config's sharing (its socket may be
	 * one another user made in /tmp, its master may stay long after the call). The master
	 * ends a second after its last session when sbx_dial_free could not end it */
	v[n++] = xstrdup("-o");
	v[n++] = ctl ? xasprintf("ControlPath=%s", ctl) : xstrdup("ControlPath=none");
	v[n++] = xstrdup("-o");
	v[n++] = xstrdup(ctl ? "ControlMaster=auto" : "ControlMaster=no");
	if (ctl) {
		v[n++] = xstrdup("-o");
		v[n++] = xstrdup("ControlPersist=1");
	}
	if (d->user) {
		v[n++] = xstrdup("-l");
		v[n++] = xstrdup(d->user);
	}
	if (d->port) {
		v[n++] = xstrdup("-p");
		v[n++] = xstrdup(d->port);
	}
	if (d->forward) {
		/* a TCP port on the remote host: ssh's own channel to it */
		v[n++] = xstrdup("-W");
		v[n++] = xstrdup(d->forward);
		v[n++] = xstrdup("--");
		v[n++] = xstrdup(d->host);
		return v;
	}
	v[n++] = xstrdup("--");
	v[n++] = xstrdup(d->host);
	v[n++] = xstrdup("docker");
	v[n++] = xstrdup("system");
	v[n++] = xstrdup("dial-stdio");
	return v;
}

void sbx_dial_argv_free(char **argv)
{
	for (char **p = argv; p && *p; p++)
		free(*p);
	free(argv);
}

/* the caller's variables of pass_env, as "NAME=value" (the strings are environ's own) */
static void child_env(const char **env, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < ARRAY_SIZE(pass_env); i++) {
		size_t k = strlen(pass_env[i]);
		for (char **e = environ; e && *e && n + 1 < max; e++)
			if (!strncmp(*e, pass_env[i], k) && (*e)[k] == '=') {
				env[n++] = *e;
				break;
			}
	}
	env[n] = NULL;
}

static struct sbx_dial_conn *conn_of(struct sbx_dial *d, int fd)
{
	for (size_t i = 0; i < SBX_DIAL_MAX_CONNS; i++)
		if (d->conns[i].fd == fd && fd >= 0)
			return &d->conns[i];
	return NULL;
}

static void fail(struct sbx_dial *d, const char *fmt, ...) _printf_(2, 3);
static void fail(struct sbx_dial *d, const char *fmt, ...)
{
	va_list ap;
	if (d->failed[0])
		return;
	va_start(ap, fmt);
	(void)vsnprintf(d->failed, sizeof(d->failed), fmt, ap);
	va_end(ap);
}

static struct sbx_dial_conn *free_conn(struct sbx_dial *d, struct sbx_err *err)
{
	for (size_t i = 0; i < SBX_DIAL_MAX_CONNS; i++)
		if (d->conns[i].fd < 0)
			return &d->conns[i];
	sbx_err_set(err, SBX_E_SYSTEM, "more than %d connections through ssh to %s at once",
		    SBX_DIAL_MAX_CONNS, d->host);
	return NULL;
}

/* whether dir may hold the directory of a control socket: no other user can move an entry of
 * it aside and put one of theirs in its place (the caller's or root's, and if others may write
 * in it, sticky, as /tmp is) */
static bool safe_base(const char *dir)
{
	struct stat st;

	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
		(st.st_uid == geteuid() || st.st_uid == 0) &&
		(!(st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_mode & S_ISVTX));
}

/* the control socket of d's shared login, in a directory of its own: in TMPDIR when that is a
 * plain absolute path short enough for a socket's address (ssh binds a name 17 bytes longer
 * first), else in /tmp; made by mkdtemp (so new, the caller's, mode 0700) in a directory where
 * no other user can swap it for theirs. NULL when d shares nothing, or no directory can be
 * made (then each connection logs in) */
static char *ctl_path(struct sbx_dial *d)
{
	const char *t = getenv("TMPDIR");
	bool plain = t && t[0] == '/' && strlen(t) <= 48;

	if (!d->share || d->forward)
		return NULL;
	for (const char *p = t; plain && *p; p++)
		plain = name_char(*p) || *p == '/';
	const char *base[] = { plain ? t : NULL, "/tmp" };
	for (size_t i = 0; i < ARRAY_SIZE(base) && !d->ctl_dir; i++) {
		if (!base[i] || !safe_base(base[i]))
			continue;
		char *dir = xasprintf("%s/sbx-ssh-XXXXXX", base[i]);
		if (mkdtemp(dir)) {
			d->ctl_dir = dir;
			break;
		}
		sbx_debug("cannot make a directory for ssh's control socket in %s: %s", base[i],
			  strerror(errno));
		free(dir);
	}
	if (!d->ctl_dir) {
		d->share = false;
		return NULL;
	}
	return xasprintf("%s/m", d->ctl_dir);
}

/* starts ssh for connection c, with io as its stdin and stdout (io stays the caller's) */
static int spawn(struct sbx_dial *d, struct sbx_dial_conn *c, int io, struct sbx_err *err)
{
	int ep[2] = { -1, -1 }, r;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	const char *env[ARRAY_SIZE(pass_env) + 1];
	pid_t pid;

	if (pipe2(ep, O_CLOEXEC) < 0) {
		sbx_err_errno(err, "cannot make a pipe for ssh");
		fail(d, "%s", err->msg);
		return -1;
	}
	_cleanup_free_ char *ctl = ctl_path(d);
	char **argv = sbx_dial_argv(d, ctl);
	child_env(env, ARRAY_SIZE(env));
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, io, 0);
	posix_spawn_file_actions_adddup2(&fa, io, 1);
	posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(
		&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	r = posix_spawn(&pid, SBX_DIAL_SSH, &fa, &at, argv, (char *const *)env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	sbx_dial_argv_free(argv);
	(void)close(ep[1]);
	if (r != 0) {
		(void)close(ep[0]);
		errno = r;
		sbx_err_errno(err, "cannot run %s for DOCKER_HOST=ssh://%s", SBX_DIAL_SSH, d->host);
		fail(d, "%s", err->msg);
		return -1;
	}
	(void)fcntl(ep[0], F_SETFL, O_NONBLOCK);
	c->errfd = ep[0];
	c->pid = pid;
	c->last[0] = 0;
	c->curlen = 0;
	sbx_debug("ssh to %s started (pid %d, fd %d)", d->host, (int)pid, c->fd);
	return 0;
}

int sbx_dial_open(struct sbx_dial *d, int *ret_fd, struct sbx_err *err)
{
	struct sbx_dial_conn *c = free_conn(d, err);
	int sv[2];

	if (!c)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return sbx_err_errno(err, "cannot make a socket pair for ssh");
	c->fd = sv[0];
	c->bound = false;
	int r = spawn(d, c, sv[1], err);
	(void)close(sv[1]);
	if (r < 0) {
		(void)close(sv[0]);
		conn_reset(c);
		return -1;
	}
	*ret_fd = c->fd;
	return 0;
}

/* a line of ssh's stderr is whole: the last one with more than blanks is kept */
static void line_done(struct sbx_dial_conn *c)
{
	c->cur[c->curlen] = 0;
	if (c->cur[strspn(c->cur, " \t")]) {
		_cleanup_free_ char *p = printable(c->cur, c->curlen);
		snprintf(c->last, sizeof(c->last), "%s", p);
	}
	c->curlen = 0;
}

/* what ssh wrote on stderr so far (ssh is ending or ended: it writes no more meanwhile) */
static void drain(struct sbx_dial_conn *c, bool at_end)
{
	char buf[4096];
	ssize_t n;

	if (c->errfd < 0)
		return;
	while ((n = read(c->errfd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n' || buf[i] == '\r')
				line_done(c);
			else if (c->curlen < sizeof(c->cur) - 1)
				c->cur[c->curlen++] = buf[i];
		}
	if (at_end && c->curlen)
		line_done(c);
}

/* waits up to ms for pid to end: 1 ended (status in *st), 0 not */
static int wait_ms(pid_t pid, int ms, int *st)
{
	for (int t = 0;; t += 10) {
		pid_t r = waitpid(pid, st, WNOHANG);
		if (r == pid || (r < 0 && errno != EINTR))
			return 1;
		if (t >= ms)
			return 0;
		usleep(10000);
	}
}

/* ssh ended by itself: a status other than 0 is the connection's failure */
static void judge(struct sbx_dial *d, struct sbx_dial_conn *c, int st)
{
	drain(c, true);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return;
	if (c->last[0])
		fail(d, "ssh to %s failed: %s", d->host, c->last);
	else if (WIFEXITED(st))
		fail(d, "ssh to %s failed: ssh exited with status %d", d->host, WEXITSTATUS(st));
	else
		fail(d, "ssh to %s failed: ssh was killed by signal %d", d->host, WTERMSIG(st));
}

/* whether the peer of fd (ssh's stdin and stdout) is closed: ssh is ending */
static bool hung_up(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP));
}

int sbx_dial_close(struct sbx_dial *d, int fd)
{
	struct sbx_dial_conn *c = conn_of(d, fd);
	int st = 0;

	if (!c) {
		errno = EBADF;
		return -1;
	}
	bool ending = hung_up(c->fd);
	(void)close(c->fd);
	c->fd = -1;
	if (c->pid <= 0) {
		/* reaped already (sbx_dial_check) */
	} else if (ending && wait_ms(c->pid, 2000, &st)) {
		judge(d, c, st);
	} else {
		/* done with it (or it hangs): ssh is ended, not judged */
		(void)kill(c->pid, SIGTERM);
		if (!wait_ms(c->pid, 1000, &st)) {
			(void)kill(c->pid, SIGKILL);
			(void)wait_ms(c->pid, 5000, &st);
		}
	}
	sbx_debug("ssh to %s ended (pid %d)", d->host, (int)c->pid);
	if (c->errfd >= 0)
		(void)close(c->errfd);
	conn_reset(c);
	return 0;
}

int sbx_dial_check(struct sbx_dial *d, struct sbx_err *err)
{
	for (size_t i = 0; i < SBX_DIAL_MAX_CONNS && !d->failed[0]; i++) {
		struct sbx_dial_conn *c = &d->conns[i];
		int st;
		if (c->fd >= 0 && c->pid > 0 && hung_up(c->fd) && wait_ms(c->pid, 2000, &st)) {
			judge(d, c, st);
			c->pid = 0;
		}
	}
	if (!d->failed[0])
		return 0;
	return sbx_err_set(err, SBX_E_NETWORK, "%s", d->failed);
}

/* --- the master of a shared login ------------------------------------------------------- */

/* ssh's multiplexing protocol (OpenSSH's PROTOCOL.mux): packets of a 32-bit length and as many
 * bytes, numbers big-endian; both sides say hello first */
#define MUX_MSG_HELLO 0x00000001u
#define MUX_C_ALIVE_CHECK 0x10000004u
#define MUX_S_ALIVE 0x80000005u
#define MUX_VERSION 4u
#define MUX_PACKET_MAX 4096

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool read_all(int fd, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

/* one packet's payload into buf (at least 4 bytes: its type first): its length, or -1 */
static ssize_t mux_read(int fd, uint8_t *buf)
{
	uint8_t h[4];
	if (!read_all(fd, h, 4))
		return -1;
	uint32_t n = get32(h);
	if (n < 4 || n > MUX_PACKET_MAX || !read_all(fd, buf, n))
		return -1;
	return (ssize_t)n;
}

/* the pid of the master listening on ctl (ours: the socket's owner is this uid), or 0 */
static pid_t master_pid(const char *ctl)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	struct timeval tv = { 2, 0 };
	uint8_t buf[MUX_PACKET_MAX], out[24];
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	if (fd < 0 || strlen(ctl) >= sizeof(a.sun_path))
		return 0;
	memcpy(a.sun_path, ctl, strlen(ctl) + 1);
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid())
		return 0;
	/* hello (version 4, no extensions), then an alive check (request 1) */
	put32(out, 8);
	put32(out + 4, MUX_MSG_HELLO);
	put32(out + 8, MUX_VERSION);
	put32(out + 12, 8);
	put32(out + 16, MUX_C_ALIVE_CHECK);
	put32(out + 20, 1);
	if (sbx_write_all(fd, out, sizeof(out)) < 0)
		return 0;
	if ((n = mux_read(fd, buf)) < 8 || get32(buf) != MUX_MSG_HELLO ||
	    get32(buf + 4) != MUX_VERSION)
		return 0;
	if ((n = mux_read(fd, buf)) < 12 || get32(buf) != MUX_S_ALIVE || get32(buf + 4) != 1)
		return 0;
	uint32_t pid = get32(buf + 8);
	return pid > 1 && pid <= INT32_MAX ? (pid_t)pid : 0;
}

/* ends the master of d's shared login (its sessions are over): by its pid, through a pidfd
 * (the pid cannot have gone to another process meanwhile); waited for, as it is not a child */
static void end_master(struct sbx_dial *d)
{
	_cleanup_free_ char *ctl = xasprintf("%s/m", d->ctl_dir);
	struct stat st;

	if (lstat(ctl, &st) < 0)
		return; /* none ran, or it ended */
	pid_t pid = master_pid(ctl);
	int pfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	if (pfd < 0) {
		sbx_debug("no ssh master answers on %s", ctl);
		return;
	}
	for (int sig = SIGTERM, k = 0; k < 2; k++, sig = SIGKILL) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		if (syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0) < 0 ||
		    poll(&p, 1, k ? 5000 : 2000) == 1)
			break;
	}
	(void)close(pfd);
	sbx_debug("ssh master to %s ended (pid %d)", d->host, (int)pid);
}

void sbx_dial_free(struct sbx_dial *d)
{
	if (!d)
		return;
	/* a forked child's copy: its ssh processes are the parent's to end */
	if (d->owner != getpid()) {
		for (size_t i = 0; i < SBX_DIAL_MAX_CONNS; i++)
			d->conns[i].pid = 0;
	}
	/* the session's connection first: closing it ends its ssh through d */
	if (d->session) {
		if (d->owner == getpid())
			sbx_http_session_release(d->session);
		free(d->session);
	}
	for (size_t i = 0; i < SBX_DIAL_MAX_CONNS; i++)
		if (d->conns[i].fd >= 0)
			(void)sbx_dial_close(d, d->conns[i].fd);
	if (d->ctl_dir && d->owner == getpid()) {
		end_master(d);
		/* a master removes its socket as it ends; one killed outright leaves it */
		_cleanup_free_ char *ctl = xasprintf("%s/m", d->ctl_dir);
		(void)unlink(ctl);
		if (rmdir(d->ctl_dir) < 0)
			sbx_debug("cannot remove %s: %s", d->ctl_dir, strerror(errno));
	}
	free(d->ctl_dir);
	if (d->lfd >= 0)
		(void)close(d->lfd);
	free(d->connect_to);
	free(d->connect_list);
	free(d->forward);
	free(d->host);
	free(d->user);
	free(d->port);
	free(d->config);
	free(d);
}

/* --- libcurl ------------------------------------------------------------------------------ */

static void loopback(struct sockaddr_in *a, unsigned short port)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a->sin_port = htons(port);
}

/* a TCP socket bound to 127.0.0.1 and a port of the kernel's choice (in *ret) */
static int bound_socket(int flags, struct sockaddr_in *ret)
{
	struct sockaddr_in a;
	socklen_t n = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);

	if (fd < 0)
		return -1;
	loopback(&a, 0);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)ret, &n) < 0) {
		int e = errno;
		(void)close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* the listening socket libcurl's connections of d reach */
static int listener(struct sbx_dial *d, struct sbx_err *err)
{
	struct sockaddr_in a;

	if (d->lfd >= 0)
		return 0;
	d->lfd = bound_socket(SOCK_NONBLOCK, &a);
	if (d->lfd < 0 || listen(d->lfd, SBX_DIAL_MAX_CONNS) < 0)
		return sbx_err_errno(err, "cannot listen for libcurl's connections through ssh");
	free(d->connect_to);
	d->connect_to = xasprintf("::127.0.0.1:%u", ntohs(a.sin_port));
	return 0;
}

int sbx_dial_attach(struct sbx_dial *d, struct sbx_err *err)
{
	struct sockaddr_in a;
	socklen_t n;
	int s = -1, one = 1;

	if (d->lfd < 0)
		return 0;
	/* bounded: another process connecting over and over cannot keep this call here */
	for (int k = 0; k < 4 * SBX_DIAL_MAX_CONNS; k++) {
		n = sizeof(a);
		s = accept4(d->lfd, (struct sockaddr *)&a, &n, SOCK_CLOEXEC);
		if (s < 0)
			break;
		struct sbx_dial_conn *c = NULL;

		/* the peer's address and port say whose it is: only a socket of this dial's (which
		 * holds that port) is taken, another process's connection is closed */
		for (size_t i = 0; i < SBX_DIAL_MAX_CONNS && !c; i++) {
			struct sbx_dial_conn *p = &d->conns[i];
			if (p->fd >= 0 && !p->pid && p->bound && n == sizeof(a) &&
			    p->local.sin_port == a.sin_port &&
			    p->local.sin_addr.s_addr == a.sin_addr.s_addr)
				c = p;
		}
		if (!c) {
			(void)close(s);
			continue;
		}
		(void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		int r = spawn(d, c, s, err);
		(void)close(s);
		if (r < 0)
			return -1;
	}
	if (s < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		return sbx_err_errno(err, "cannot accept a connection for ssh");
	return 0;
}

static curl_socket_t dial_opensocket(void *u, curlsocktype purpose, struct curl_sockaddr *addr)
{
	struct sbx_dial *d = u;
	struct sbx_err e = { 0 };
	struct sbx_dial_conn *c;

	if (purpose != CURLSOCKTYPE_IPCXN || addr->family != AF_INET) {
		fail(d, "ssh: not a connection libcurl may open");
		return CURL_SOCKET_BAD;
	}
	if (!(c = free_conn(d, &e))) {
		fail(d, "%s", e.msg);
		return CURL_SOCKET_BAD;
	}
	/* its own port tells its accepted end from another process's connection */
	int fd = bound_socket(0, &c->local);
	if (fd < 0) {
		sbx_err_errno(&e, "cannot make a socket for ssh");
		fail(d, "%s", e.msg);
		return CURL_SOCKET_BAD;
	}
	c->fd = fd;
	c->pid = 0;
	c->bound = true;
	return fd;
}

/* libcurl has connected (or reuses a connection): ssh is started for the new ones */
static int dial_prereq(void *u, char *ip, char *local_ip, int port, int local_port)
{
	struct sbx_dial *d = u;
	struct sbx_err e = { 0 };

	if (sbx_dial_attach(d, &e) < 0) {
		fail(d, "%s", e.msg);
		return CURL_PREREQFUNC_ABORT;
	}
	return CURL_PREREQFUNC_OK;
}

static int dial_closesocket(void *u, curl_socket_t fd)
{
	if (sbx_dial_close(u, fd) < 0)
		return close(fd);
	return 0;
}

int sbx_dial_curl(void *curl_handle, struct sbx_dial *d)
{
	CURL *h = curl_handle;
	CURLcode c = CURLE_OK;
	struct sbx_err e = { 0 };

	if (listener(d, &e) < 0) {
		fail(d, "%s", e.msg);
		return -1;
	}
	/* any host, any port: the listener (a number: no name is looked up) */
	if (!d->connect_list)
		d->connect_list = xcalloc(1, sizeof(struct curl_slist));
	((struct curl_slist *)d->connect_list)->data = d->connect_to;
	c |= sbx_curl.easy_setopt(h, CURLOPT_CONNECT_TO, d->connect_list);
	c |= sbx_curl.easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, dial_opensocket);
	c |= sbx_curl.easy_setopt(h, CURLOPT_OPENSOCKETDATA, d);
	c |= sbx_curl.easy_setopt(h, CURLOPT_PREREQFUNCTION, dial_prereq);
	c |= sbx_curl.easy_setopt(h, CURLOPT_PREREQDATA, d);
	c |= sbx_curl.easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, dial_closesocket);
	c |= sbx_curl.easy_setopt(h, CURLOPT_CLOSESOCKETDATA, d);
	return c == CURLE_OK ? 0 : -1;
}
