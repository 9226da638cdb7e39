/* exec -u USER[:GROUP]: users and groups resolved in the sandbox's own /etc/passwd and
 * /etc/group, read by the exec CLI once it has joined the sandbox, or for an exec that does not
 * join it (gVisor's) by cp's confined helper inside it (never the host's, never through NSS
 * modules a sandbox could plant). */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define DB_MAX (4 << 20) /* a passwd or group file bigger than this is not read */

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* an id field: digits only, within what a uid or gid can be */
static bool id_of(const char *s, long long *ret)
{
	return all_digits(s) && sbx_parse_int(s, 0, 0x7fffffff, ret) == 0;
}

bool local_user_entry(const char *text, const char *name, long long id, char *line, size_t len,
		      char **fields, int nf)
{
	for (const char *l = text; l && *l;) {
		const char *nl = strchrnul(l, '\n');
		size_t n = (size_t)(nl - l);
		const char *next = *nl ? nl + 1 : nl;
		if (n >= len) { /* longer than any entry sbx reads: not one */
			l = next;
			continue;
		}
		memcpy(line, l, n);
		line[n] = 0;
		l = next;
		int k = 0;
		for (char *p = line; p && k < nf; k++) {
			fields[k] = p;
			p = strchr(p, ':');
			if (p)
				*p++ = 0;
		}
		if (k < 3)
			continue;
		for (int m = k; m < nf; m++)
			fields[m] = (char *)""; /* a short entry: the fields it lacks are empty */
		long long v;
		if (name ? streq(fields[0], name) : id_of(fields[2], &v) && v == id)
			return true;
	}
	return false;
}

/* the sandbox's file, read whole: only a regular file (a FIFO or a device planted there would
 * hang or flood exec), and not past DB_MAX */
static char *read_db(const char *file)
{
	_cleanup_close_ int fd = open(file, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > DB_MAX)
		return NULL;
	return sbx_read_fd(fd, DB_MAX, NULL);
}

static bool find_entry(const char *file, const char *name, long long id, char *buf, size_t n,
		       char **fields, int nf)
{
	_cleanup_free_ char *text = read_db(file);

	return text && local_user_entry(text, name, id, buf, n, fields, nf);
}

int local_user_resolve(const char *spec, const char *label, struct local_user *u,
		       struct sbx_err *err)
{
	_cleanup_free_ char *s = xstrdup(spec);
	char *grp = strchr(s, ':');
	char buf[1024], *fl[7];
	long long v, w;

	if (grp)
		*grp++ = 0;
	u->home = NULL;
	if (all_digits(s)) {
		if (!id_of(s, &v))
			return sbx_err_set(err, SBX_E_USAGE, "invalid user '%s'", s);
		u->uid = (uid_t)v;
		u->gid = u->uid == 0 ? 0 : (gid_t)v;
		if (find_entry("/etc/passwd", NULL, v, buf, sizeof(buf), fl, 7)) {
			if (id_of(fl[3], &w))
				u->gid = (gid_t)w;
			u->home = xstrdup(*fl[5] ? fl[5] : "/");
		}
	} else {
		if (!find_entry("/etc/passwd", s, -1, buf, sizeof(buf), fl, 7) ||
		    !id_of(fl[2], &v) || !id_of(fl[3], &w))
			return sbx_err_set(
				err, SBX_E_USAGE,
				"no user '%s' in the /etc/passwd of sandbox '%s' (give a "
				"number instead)",
				s, label);
		u->uid = (uid_t)v;
		u->gid = (gid_t)w;
		u->home = xstrdup(*fl[5] ? fl[5] : "/");
	}
	if (grp) {
		if (all_digits(grp)) {
			if (!id_of(grp, &v))
				return sbx_err_set(err, SBX_E_USAGE, "invalid group '%s'", grp);
			u->gid = (gid_t)v;
		} else {
			if (!find_entry("/etc/group", grp, -1, buf, sizeof(buf), fl, 4) ||
			    !id_of(fl[2], &v))
				return sbx_err_set(
					err, SBX_E_USAGE,
					"no group '%s' in the /etc/group of sandbox '%s'", grp,
					label);
			u->gid = (gid_t)v;
		}
	}
	if (!u->home)
		u->home = xstrdup(u->uid == 0 ? "/root" : "/");
	return 0;
}

struct confined_user_arg {
	const char *spec, *label;
};

struct confined_user_res {
	uid_t uid;
	gid_t gid;
	char home[PATH_MAX];
};

/* local_user_resolve_in's work, in cp's confined helper inside the sandbox */
static int confined_user_work(void *arg, int fd, struct sbx_err *err)
{
	const struct confined_user_arg *a = arg;
	struct confined_user_res res = { 0 };
	struct local_user u = { 0, 0, NULL };

	if (local_user_resolve(a->spec, a->label, &u, err) < 0) {
		free(u.home);
		return -1;
	}
	res.uid = u.uid;
	res.gid = u.gid;
	snprintf(res.home, sizeof(res.home), "%s", u.home ? u.home : "/");
	free(u.home);
	if (sbx_write_all(fd, &res, sizeof(res)) < 0)
		return sbx_err_errno(err, "cannot report user '%s'", a->spec);
	return 0;
}

int local_user_resolve_in(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *spec,
			  struct local_user *u, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct confined_user_arg a = { spec, label };
	struct confined_user_res res;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	int r = local_confined(ctx, rec, p[1], confined_user_work, NULL, &a, err);
	close(p[1]);
	size_t got = 0;
	while (r == 0 && got < sizeof(res)) {
		ssize_t n = read(p[0], (char *)&res + got, sizeof(res) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (r == 0 && got != sizeof(res))
		r = sbx_err_set(err, SBX_E_SYSTEM, "cannot look up user '%s' in sandbox '%s'", spec,
				label);
	close(p[0]);
	if (r < 0)
		return -1;
	res.home[sizeof(res.home) - 1] = 0;
	u->uid = res.uid;
	u->gid = res.gid;
	u->home = xstrdup(res.home);
	return 0;
}

int local_user_check_mapped(const struct local_idmap *m, const struct local_user *u,
			    const char *advice, const char *label, struct sbx_err *err)
{
	bool uid_ok = local_idmap_has(m, u->uid);
	unsigned long id = uid_ok ? u->gid : u->uid;

	if (uid_ok && local_idmap_has(m, u->gid))
		return 0;
	if (m->kind == LOCAL_MAP_SELF)
		return sbx_err_set(
			err, SBX_E_STATE,
			"%s %lu is not mapped in sandbox '%s': only your uid is mapped; %s",
			uid_ok ? "gid" : "uid", id, label,
			advice ? advice : "give it subordinate ids and recreate it");
	return sbx_err_set(err, SBX_E_STATE, "%s %lu is not mapped in sandbox '%s' (it maps 0-%lu)",
			   uid_ok ? "gid" : "uid", id, label,
			   m->kind == LOCAL_MAP_RANGE ? LOCAL_UID_COUNT - 1ul : m->count);
}

/* the image's /etc/passwd: the top layer's that has one, read beneath the layer directory
 * without following a link (a layer is content a registry chose) */
static char *image_passwd(char *const *layers, size_t n)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };

	for (size_t i = n; i-- > 0;) {
		_cleanup_close_ int dir = open(layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dir < 0)
			return NULL;
		_cleanup_close_ int fd = (int)syscall(SYS_openat2, dir, "etc/passwd", &how,
						      sizeof(how));
		struct stat st;
		if (fd < 0 && errno == ENOENT)
			continue;
		/* a whiteout, a directory, a link: no passwd to read */
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
			return NULL;
		char p[64];
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		return read_db(p);
	}
	return NULL;
}

bool local_image_users(char *const *layers, size_t n, char *names, size_t len)
{
	_cleanup_free_ char *text = image_passwd(layers, n);
	size_t used = 0, found = 0;

	names[0] = 0;
	for (char *l = text; l && *l;) {
		char *nl = strchrnul(l, '\n');
		char *next = *nl ? nl + 1 : nl;
		*nl = 0;
		char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		long long v;
		if (c2) {
			*c1 = 0;
			char *c3 = strchr(c2 + 1, ':');
			if (c3)
				*c3 = 0;
			/* root, and the nobody of user namespaces (65534), need no id of their own */
			if (id_of(c2 + 1, &v) && v != 0 && v != 65534) {
				int w = snprintf(names + used, len - used, "%s%s",
						 found ? ", " : "", l);
				if (w > 0 && (size_t)w < len - used && found < 3)
					used += (size_t)w;
				else
					names[used] = 0;
				found++;
			}
		}
		l = next;
	}
	if (found > 3 && used + 5 < len)
		memcpy(names + used, ", ...", 6);
	return found > 0;
}
