/* State store: records as JSON files, name links, id claims, per-sandbox locks. */
#define _GNU_SOURCE
#include "core/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "core/json.h"
#include "core/log.h"
#include "core/test-hook.h"

static const char *const state_names[] = {
	[SBX_STATE_UNKNOWN] = "unknown",   [SBX_STATE_CREATING] = "starting",
	[SBX_STATE_RUNNING] = "running",   [SBX_STATE_PAUSED] = "paused",
	[SBX_STATE_RELEASED] = "released", [SBX_STATE_STOPPED] = "stopped",
	[SBX_STATE_ERROR] = "error",	   [SBX_STATE_MISSING] = "missing",
};

const char *sbx_state_name(enum sbx_state s)
{
	if ((size_t)s >= ARRAY_SIZE(state_names))
		return "unknown";
	return state_names[s];
}

enum sbx_state sbx_state_parse(const char *s)
{
	for (size_t i = 0; s && i < ARRAY_SIZE(state_names); i++)
		if (streq(s, state_names[i]))
			return (enum sbx_state)i;
	if (s && streq(s, "creating"))
		return SBX_STATE_CREATING; /* the name records had before "starting" */
	return SBX_STATE_UNKNOWN;
}

struct sbx_record *sbx_record_new(void)
{
	struct sbx_record *rec = xcalloc(1, sizeof(struct sbx_record));
	sbx_config_init(&rec->config);
	return rec;
}

void sbx_record_free(struct sbx_record *rec)
{
	if (!rec)
		return;
	free(rec->id);
	free(rec->name);
	free(rec->provider);
	free(rec->provider_id);
	free(rec->state_reason);
	free(rec->dir);
	sbx_config_release(&rec->config);
	if (rec->extra)
		json_decref(rec->extra);
	if (rec->live)
		json_decref(rec->live);
	free(rec);
}

json_t *sbx_record_to_json(const struct sbx_record *rec)
{
	_cleanup_free_ char *created = sbx_time_rfc3339(rec->created);
	json_t *j = json_object();

	json_object_set_new(j, "version", json_integer(1));
	json_object_set_new(j, "id", json_string(rec->id));
	json_object_set_new(j, "name", rec->name ? json_string(rec->name) : json_null());
	json_object_set_new(j, "provider", json_string(rec->provider));
	if (rec->provider_id)
		json_object_set_new(j, "provider_id", json_string(rec->provider_id));
	json_object_set_new(j, "state", json_string(sbx_state_name(rec->state)));
	if (rec->state_reason)
		json_object_set_new(j, "state_reason", json_string(rec->state_reason));
	json_object_set_new(j, "created", json_string(created));
	json_object_set_new(j, "created_unix", json_integer(rec->created));
	json_object_set_new(j, "options", sbx_config_to_json(&rec->config));
	if (rec->extra)
		json_object_set(j, "extra", rec->extra);
	return j;
}

int sbx_record_from_json(const json_t *j, struct sbx_record **ret, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = sbx_record_new();
	const char *s;

	if (!json_is_object(j))
		return sbx_err_set(err, SBX_E_CONFIG, "record is not a JSON object");
	if (sbx_json_int(j, "version", 0) != 1)
		return sbx_err_set(err, SBX_E_CONFIG, "unsupported record version");
	if (sbx_json_get_str(j, "id", &s, err) < 0)
		return -1;
	if (!sbx_id_valid(s))
		return sbx_err_set(err, SBX_E_CONFIG, "invalid id '%.40s' in record", s);
	rec->id = xstrdup(s);
	if ((s = sbx_json_str(j, "name")))
		rec->name = xstrdup(s);
	if (sbx_json_get_str(j, "provider", &s, err) < 0)
		return -1;
	rec->provider = xstrdup(s);
	if ((s = sbx_json_str(j, "provider_id")))
		rec->provider_id = xstrdup(s);
	rec->state = sbx_state_parse(sbx_json_str(j, "state"));
	if ((s = sbx_json_str(j, "state_reason")))
		rec->state_reason = xstrdup(s);
	rec->created = sbx_json_int(j, "created_unix", 0);
	if (sbx_config_from_json(json_object_get(j, "options"), &rec->config, err) < 0)
		return -1;
	json_t *o = json_object_get(j, "extra");
	if (json_is_object(o))
		rec->extra = json_incref(o);
	*ret = TAKE_PTR(rec);
	return 0;
}

int sbx_record_parse(const char *text, size_t len, const char *path, struct sbx_record **ret,
		     struct sbx_err *err)
{
	_cleanup_json_ json_t *j = sbx_json_parse(text, len, path, err);

	if (!j)
		return -1;
	if (sbx_record_from_json(j, ret, err) < 0)
		return sbx_err_prefix(err, "bad record '%s'", path);
	return 0;
}

bool sbx_id_valid(const char *s)
{
	if (strlen(s) != SBX_ID_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

static bool name_char(char c, bool first)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return !first && (c == '_' || c == '.' || c == '-');
}

bool sbx_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SBX_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i], i == 0))
			return false;
	return true;
}

int sbx_id_generate(char ret[SBX_ID_LEN + 1], struct sbx_err *err)
{
	unsigned char b[SBX_ID_LEN / 2];
	static const char hex[] = "0123456789abcdef";

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return sbx_err_errno(err, "cannot generate a sandbox id");
	for (size_t i = 0; i < sizeof(b); i++) {
		ret[2 * i] = hex[b[i] >> 4];
		ret[2 * i + 1] = hex[b[i] & 15];
	}
	ret[SBX_ID_LEN] = 0;
	return 0;
}

int sbx_store_open(struct sbx_store *st, bool create, struct sbx_err *err)
{
	const char *home = getenv("SBX_HOME");
	_cleanup_free_ char *root = NULL;

	if (home && *home) {
		root = xstrdup(home);
	} else {
		const char *h = getenv("HOME");
		if (!h || !*h) {
			struct passwd *pw = getpwuid(getuid());
			h = pw ? pw->pw_dir : NULL;
		}
		if (!h)
			return sbx_err_set(err, SBX_E_CONFIG,
					   "cannot find a home directory; set SBX_HOME");
		root = xasprintf("%s/.sbx", h);
	}
	if (root[0] != '/')
		return sbx_err_set(err, SBX_E_CONFIG, "SBX_HOME must be an absolute path, not '%s'",
				   root);
	_cleanup_free_ char *sd = xasprintf("%s/sandboxes", root);
	_cleanup_free_ char *nd = xasprintf("%s/names", root);
	if (create && (access(sd, W_OK) < 0 || access(nd, W_OK) < 0)) {
		mode_t old = umask(077);
		int r = sbx_mkdir_p(sd, 0700);
		if (r == 0)
			r = sbx_mkdir_p(nd, 0700);
		umask(old);
		if (r < 0 || access(sd, W_OK) < 0)
			return sbx_err_errno(err,
					     "cannot use state directory '%s' (set SBX_HOME to a "
					     "writable directory)",
					     root);
	}
	st->root = TAKE_PTR(root);
	return 0;
}

void sbx_store_release(struct sbx_store *st)
{
	free(st->root);
	st->root = NULL;
}

char *sbx_store_dir(const struct sbx_store *st, const char *id)
{
	return xasprintf("%s/sandboxes/%s", st->root, id);
}

static bool sandbox_exists(const struct sbx_store *st, const char *id)
{
	_cleanup_free_ char *d = sbx_store_dir(st, id);
	return access(d, F_OK) == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int sbx_store_list_ids(struct sbx_store *st, char ***ret_ids, size_t *ret_n, struct sbx_err *err)
{
	_cleanup_free_ char *sd = xasprintf("%s/sandboxes", st->root);
	DIR *d = opendir(sd);
	char **v = NULL;
	size_t n = 0;
	struct dirent *de;

	if (!d)
		return sbx_err_errno(err, "cannot read '%s'", sd);
	while ((de = readdir(d))) {
		if (!sbx_id_valid(de->d_name))
			continue;
		v = xrealloc(v, (n + 2) * sizeof(char *));
		v[n++] = xstrdup(de->d_name);
		v[n] = NULL;
	}
	closedir(d);
	if (!v)
		v = xcalloc(1, sizeof(char *));
	qsort(v, n, sizeof(char *), cmp_str);
	*ret_ids = v;
	*ret_n = n;
	return 0;
}

static char *name_target(const struct sbx_store *st, const char *name)
{
	_cleanup_free_ char *link = xasprintf("%s/names/%s", st->root, name);
	char buf[64];
	ssize_t n = readlink(link, buf, sizeof(buf) - 1);

	if (n <= 0)
		return NULL;
	buf[n] = 0;
	return sbx_id_valid(buf) ? xstrdup(buf) : NULL;
}

int sbx_store_resolve(struct sbx_store *st, const char *sb, char **ret_id, struct sbx_err *err)
{
	if (!*sb)
		return sbx_err_set(err, SBX_E_USAGE, "empty sandbox name");
	sbx_debug("resolving '%s' in %s", sb, st->root);
	if (sbx_id_valid(sb) && sandbox_exists(st, sb)) {
		*ret_id = xstrdup(sb);
		return 0;
	}
	if (sbx_name_valid(sb)) {
		_cleanup_free_ char *id = name_target(st, sb);
		if (id && sandbox_exists(st, id)) {
			*ret_id = TAKE_PTR(id);
			return 0;
		}
	}
	/* unique id prefix */
	bool hex = strlen(sb) < SBX_ID_LEN;
	for (const char *p = sb; *p && hex; p++)
		hex = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f');
	if (hex) {
		char **ids;
		size_t n, hits = 0;
		char *match = NULL;
		struct strbuf_list {
			char s[400];
		} list = { "" };

		if (sbx_store_list_ids(st, &ids, &n, err) < 0)
			return -1;
		for (size_t i = 0; i < n; i++) {
			if (!startswith(ids[i], sb))
				continue;
			hits++;
			match = ids[i];
			size_t l = strlen(list.s);
			if (l < sizeof(list.s) - 20)
				snprintf(list.s + l, sizeof(list.s) - l, "%s%s", l ? ", " : "",
					 ids[i]);
		}
		if (hits == 1) {
			*ret_id = xstrdup(match);
			sbx_strv_free(ids);
			return 0;
		}
		sbx_strv_free(ids);
		if (hits > 1)
			return sbx_err_set(err, SBX_E_USAGE,
					   "'%s' is ambiguous: it matches %s; give more of the id",
					   sb, list.s);
	}
	return sbx_err_set(err, SBX_E_NOTFOUND, "no such sandbox: '%s' (run 'sbx ls' to list them)",
			   sb);
}

static int store_lock(struct sbx_store *st, struct sbx_err *err)
{
	_cleanup_free_ char *p = xasprintf("%s/lock", st->root);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		return sbx_err_errno(err, "cannot open '%s'", p);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			close(fd);
			return sbx_err_errno(err, "cannot lock '%s'", p);
		}
	}
	return fd;
}

int sbx_store_claim(struct sbx_store *st, const char *name, char **ret_id, struct sbx_err *err)
{
	_cleanup_close_ int lk = store_lock(st, err);
	char id[SBX_ID_LEN + 1];

	if (lk < 0)
		return -1;
	if (name) {
		_cleanup_free_ char *cur = name_target(st, name);
		_cleanup_free_ char *link = xasprintf("%s/names/%s", st->root, name);
		if (cur && sandbox_exists(st, cur))
			return sbx_err_set(
				err, SBX_E_EXISTS,
				"a sandbox named '%s' already exists (%s); choose another "
				"--name or remove it with 'sbx rm %s'",
				name, cur, name);
		(void)unlink(link); /* stale: its sandbox is gone */
	}
	for (int tries = 0;; tries++) {
		if (sbx_id_generate(id, err) < 0)
			return -1;
		_cleanup_free_ char *dir = sbx_store_dir(st, id);
		if (mkdir(dir, 0700) == 0)
			break;
		if (errno != EEXIST || tries > 16)
			return sbx_err_errno(err, "cannot create '%s'", dir);
	}
	{
		_cleanup_free_ char *lockp = xasprintf("%s/sandboxes/%s/lock", st->root, id);
		int fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			sbx_err_errno(err, "cannot create '%s'", lockp);
			_cleanup_free_ char *dir = sbx_store_dir(st, id);
			(void)rmdir(dir);
			return -1;
		}
		close(fd);
	}
	sbx_test_hook("create-claimed");
	if (name) {
		_cleanup_free_ char *link = xasprintf("%s/names/%s", st->root, name);
		if (symlink(id, link) < 0) {
			int e = errno;
			_cleanup_free_ char *dir = sbx_store_dir(st, id);
			(void)rmdir(dir);
			errno = e;
			return sbx_err_errno(err, "cannot record name '%s'", name);
		}
	}
	*ret_id = xstrdup(id);
	return 0;
}

void sbx_store_unclaim_name(struct sbx_store *st, const char *name, const char *id)
{
	if (!name)
		return;
	_cleanup_free_ char *cur = name_target(st, name);
	if (cur && streq(cur, id)) {
		_cleanup_free_ char *link = xasprintf("%s/names/%s", st->root, name);
		(void)unlink(link);
	}
}

/* every name link pointing at id goes */
static void names_unlink(struct sbx_store *st, const char *id)
{
	_cleanup_free_ char *nd = xasprintf("%s/names", st->root);
	DIR *d = opendir(nd);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		_cleanup_free_ char *cur = name_target(st, de->d_name);
		if (cur && streq(cur, id))
			(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

int sbx_write_atomic(const char *path, const char *data, size_t len, bool sync, struct sbx_err *err)
{
	_cleanup_free_ char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return sbx_err_errno(err, "cannot write '%s'", tmp);
	if (sbx_write_all(fd, data, len) < 0 || (sync && fdatasync(fd) < 0)) {
		sbx_err_errno(err, "cannot write '%s'", tmp);
		close(fd);
		(void)unlink(tmp);
		return -1;
	}
	if (close(fd) < 0) {
		sbx_err_errno(err, "cannot write '%s'", tmp);
		(void)unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		sbx_err_errno(err, "cannot save '%s'", path);
		(void)unlink(tmp);
		return -1;
	}
	return 0;
}

int sbx_store_load(struct sbx_store *st, const char *id, struct sbx_record **ret,
		   struct sbx_err *err)
{
	_cleanup_free_ char *dir = sbx_store_dir(st, id);
	_cleanup_free_ char *path = xasprintf("%s/sandbox.json", dir);
	size_t len;
	_cleanup_free_ char *text = sbx_read_file(path, 1 << 20, &len);
	struct sbx_record *rec;

	if (!text) {
		if (errno == ENOENT)
			return sbx_err_set(err, SBX_E_NOTFOUND,
					   "sandbox '%s' has no record at '%s'", id, path);
		return sbx_err_errno(err, "cannot read '%s'", path);
	}
	if (sbx_record_parse(text, len, path, &rec, err) < 0)
		return -1;
	if (!streq(rec->id, id)) {
		sbx_record_free(rec);
		return sbx_err_set(err, SBX_E_CONFIG, "bad record '%s': its id does not match",
				   path);
	}
	rec->dir = TAKE_PTR(dir);
	*ret = rec;
	return 0;
}

int sbx_store_save(struct sbx_store *st, const struct sbx_record *rec, bool durable,
		   struct sbx_err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/sandboxes/%s/sandbox.json", st->root, rec->id);
	_cleanup_json_ json_t *j = sbx_record_to_json(rec);
	_cleanup_free_ char *text = sbx_json_dump(j, true);
	size_t n = strlen(text);

	text = xrealloc(text, n + 2);
	text[n] = '\n';
	text[n + 1] = 0;
	return sbx_write_atomic(path, text, n + 1, durable, err);
}

/* what an rm killed between moving a sandbox's directory aside and emptying it left
 * (sandboxes/.gone-ID, which no command names any more): emptied by a later rm */
static void sweep_gone(const struct sbx_store *st)
{
	_cleanup_free_ char *root = xasprintf("%s/sandboxes", st->root);
	DIR *d = opendir(root);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, ".gone-", 6) != 0)
			continue;
		_cleanup_free_ char *p = xasprintf("%s/%s", root, de->d_name);
		struct stat sb;
		/* one moved aside a minute ago or more: not another rm's at work (the move sets
		 * its ctime) */
		if (lstat(p, &sb) == 0 && time(NULL) - sb.st_ctime >= 60)
			(void)sbx_rm_rf(p);
	}
	closedir(d);
}

int sbx_store_remove(struct sbx_store *st, const char *id, const char *name, struct sbx_err *err)
{
	_cleanup_free_ char *dir = sbx_store_dir(st, id);
	_cleanup_free_ char *rec = xasprintf("%s/sandbox.json", dir);

	/* the record goes first: a half-removed directory is then plainly not a sandbox */
	if (unlink(rec) < 0 && errno != ENOENT)
		return sbx_err_errno(err, "cannot remove '%s'", rec);
	sbx_test_hook("rm-record-removed");
	sbx_store_unclaim_name(st, name, id);
	/* out of the way in one step, lock file and all: a racing rm then finds no directory to
	 * make a new lock file in (it would take it for one a crashed create left) */
	_cleanup_free_ char *gone = xasprintf("%s/sandboxes/.gone-%s", st->root, id);
	(void)sbx_rm_rf(gone);
	bool aside = rename(dir, gone) == 0;
	if (sbx_rm_rf(aside ? gone : dir) < 0) {
		int e = errno;
		if (aside)
			(void)rename(gone, dir); /* back where sbx rm -f finds it again */
		errno = e;
		return sbx_err_errno(err, "cannot remove '%s'", dir);
	}
	/* a name whose record is gone (an rm or a create killed half-way) is found by its link */
	names_unlink(st, id);
	sweep_gone(st);
	return 0;
}

int sbx_store_lock(struct sbx_store *st, const char *id, bool exclusive, struct sbx_err *err)
{
	_cleanup_free_ char *dir = sbx_store_dir(st, id);
	_cleanup_free_ char *p = xasprintf("%s/lock", dir);
	/* never O_CREAT here: a racing rm may be emptying the directory */
	int fd = open(p, O_RDWR | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT && access(dir, F_OK) == 0) {
		/* a directory left without its lock file (crash during create): make one */
		fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		if (errno == ENOENT)
			return sbx_err_set(err, SBX_E_NOTFOUND, "no such sandbox: '%s'", id);
		return sbx_err_errno(err, "cannot open '%s'", p);
	}
	while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0) {
		if (errno != EINTR) {
			close(fd);
			return sbx_err_errno(err, "cannot lock '%s'", p);
		}
	}
	/* removed while we waited? */
	struct stat a, b;
	if (fstat(fd, &a) < 0 || stat(p, &b) < 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
		close(fd);
		return sbx_err_set(err, SBX_E_NOTFOUND,
				   "no such sandbox: '%s' (it was just removed)", id);
	}
	return fd;
}
