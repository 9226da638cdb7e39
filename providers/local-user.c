/* exec -u USER[:GROUP]: users and groups resolved in the sandbox's own /etc/passwd and
 * /etc/group, read by the exec CLI once it has joined the sandbox (never the host's, never
 * through NSS modules a sandbox could plant). */
#define _GNU_SOURCE
#include "providers/local.h"

#include <stdio.h>

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* field 0 = name; returns the line's fields split on ':' (into buf) or NULL */
static bool find_entry(const char *file, const char *name, long id, char *buf, size_t n,
		       char **fields, int nf)
{
	FILE *f = fopen(file, "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(buf, (int)n, f)) {
		buf[strcspn(buf, "\n")] = 0;
		int i = 0;
		char *save = NULL;
		char *line = buf;
		for (char *p = line; i < nf; i++) {
			fields[i] = p;
			char *c = strchr(p, ':');
			if (!c) {
				i++;
				break;
			}
			*c = 0;
			p = c + 1;
		}
		(void)save;
		if (i < 3)
			continue;
		if (name && streq(fields[0], name))
			found = true;
		else if (!name && id >= 0 && all_digits(fields[2]) && atol(fields[2]) == id)
			found = true;
	}
	fclose(f);
	return found;
}

int local_user_resolve(const char *spec, const char *label, struct local_user *u,
		       struct sbx_err *err)
{
	_cleanup_free_ char *s = xstrdup(spec);
	char *grp = strchr(s, ':');
	char buf[1024], *fl[7];
	long long v;

	if (grp)
		*grp++ = 0;
	u->home = NULL;
	if (all_digits(s)) {
		if (sbx_parse_int(s, 0, 0x7fffffff, &v) < 0)
			return sbx_err_set(err, SBX_E_USAGE, "invalid user '%s'", s);
		u->uid = (uid_t)v;
		u->gid = u->uid == 0 ? 0 : (gid_t)v;
		if (find_entry("/etc/passwd", NULL, (long)v, buf, sizeof(buf), fl, 7)) {
			u->gid = (gid_t)atol(fl[3]);
			u->home = xstrdup(fl[5] ? fl[5] : "/");
		}
	} else {
		if (!find_entry("/etc/passwd", s, -1, buf, sizeof(buf), fl, 7) || !all_digits(fl[2]) ||
		    !all_digits(fl[3]))
			return sbx_err_set(err, SBX_E_USAGE,
					   "no user '%s' in the /etc/passwd of sandbox '%s' (give a "
					   "number instead)", s, label);
		u->uid = (uid_t)atol(fl[2]);
		u->gid = (gid_t)atol(fl[3]);
		u->home = xstrdup(fl[5] ? fl[5] : "/");
	}
	if (grp) {
		if (all_digits(grp)) {
			if (sbx_parse_int(grp, 0, 0x7fffffff, &v) < 0)
				return sbx_err_set(err, SBX_E_USAGE, "invalid group '%s'", grp);
			u->gid = (gid_t)v;
		} else {
			if (!find_entry("/etc/group", grp, -1, buf, sizeof(buf), fl, 4) ||
			    !all_digits(fl[2]))
				return sbx_err_set(err, SBX_E_USAGE,
						   "no group '%s' in the /etc/group of sandbox '%s'",
						   grp, label);
			u->gid = (gid_t)atol(fl[2]);
		}
	}
	if (!u->home)
		u->home = xstrdup(u->uid == 0 ? "/root" : "/");
	return 0;
}
