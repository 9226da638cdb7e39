/* sbx image build: images of the steps so far, RUN's sandboxes, the build's lease and its sweep. */
#define _GNU_SOURCE
#include "core/build-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/image-int.h"
#include "core/json.h"
#include "core/log.h"
#include "core/net.h"
#include "core/sandbox.h"
#include "core/store.h"
#include "core/util.h"

#define LEASE_MAX (1 << 20)
#define QUIET_KEEP (64 << 10)
#define EGRESS_MAX (4 << 20)
#define EGRESS_SHOW 50

/* --- the lease: what a build made that outlives it only when it is killed -------------------- */

static char *builds_dir(const struct sbx_store *st)
{
	return xasprintf("%s/images/builds", st->root);
}

/* a process's lock (fcntl's, not flock's): what the build forks (a sandbox's supervisor)
 * does not hold it, so it ends with the build's process */
static int lock_file(int fd, bool wait)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	return fcntl(fd, wait ? F_SETLKW : F_SETLK, &fl);
}

int build_lease_open(struct build *b, struct sbx_err *err)
{
	char rnd[SBX_ID_LEN + 1];
	_cleanup_free_ char *dir = builds_dir(&b->ctx->store);

	if (img_ensure_dirs(&b->ctx->store, err) < 0 || sbx_id_generate(rnd, err) < 0)
		return -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sbx_err_errno(err, "cannot create '%s'", dir);
	/* locked before it has its name: a sweep never sees it unlocked */
	_cleanup_free_ char *tmp = xasprintf("%s/.new-%s", dir, rnd);
	b->lease = xasprintf("%s/%s", dir, rnd);
	b->lease_fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (b->lease_fd < 0)
		return sbx_err_errno(err, "cannot create '%s'", tmp);
	if (lock_file(b->lease_fd, true) < 0 || rename(tmp, b->lease) < 0) {
		(void)unlink(tmp);
		return sbx_err_errno(err, "cannot lock '%s'", b->lease);
	}
	return 0;
}

void build_lease_close(struct build *b)
{
	if (b->lease_fd >= 0) {
		(void)unlink(b->lease);
		close(b->lease_fd);
	}
	b->lease_fd = -1;
}

static const char *lease_name(const struct build *b)
{
	const char *s = strrchr(b->lease, '/');
	return s ? s + 1 : b->lease;
}

/* an unnamed ref (the id itself) of the store dropped; a named image stays */
static void drop_unnamed(struct sbx_store *st, const char *id)
{
	struct sbx_err err = { 0 };
	_cleanup_close_ int lk = img_lock_images(st, true, &err);
	if (lk < 0)
		return;
	json_t *refs = img_refs_load(st, &err);
	if (!refs)
		return;
	json_t *e = json_object_get(refs, id);
	if (e && streq(sbx_json_str(e, "config") ?: "", id)) {
		json_object_del(refs, id);
		(void)img_refs_save(st, refs, &err);
	}
	json_decref(refs);
}

void build_unref(struct build *b, const char *id)
{
	drop_unnamed(&b->ctx->store, id);
}

static bool has_label(const struct sbx_record *rec, const char *want)
{
	for (char **l = rec->config.labels; l && *l; l++)
		if (streq(*l, want))
			return true;
	return false;
}

/* a lease nobody holds: its sandboxes and unnamed images go, then the lease */
static void sweep_one(struct sbx_ctx *ctx, const char *dir, const char *name)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
	_cleanup_close_ int fd = open(p, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || lock_file(fd, false) < 0)
		return; /* its build still runs */
	sbx_debug("build: sweeping what build %s left", name);
	_cleanup_free_ char *label = xasprintf("sbx.build=%s", name);
	struct sbx_listing l = { 0 };
	struct sbx_err err = { 0 };
	if (sbx_sandbox_list(ctx, &l, &err) == 0) {
		for (size_t i = 0; i < l.n; i++)
			if (has_label(l.recs[i], label)) {
				struct sbx_err e2 = { 0 };
				(void)sbx_sandbox_rm(ctx, l.recs[i]->id, true, &e2);
			}
		sbx_listing_release(&l);
	}
	size_t len = 0;
	_cleanup_free_ char *text = sbx_read_fd(fd, LEASE_MAX, &len);
	char *save = NULL;
	for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		if (startswith(line, "ref ") && sbx_digest_valid(line + 4))
			drop_unnamed(&ctx->store, line + 4);
	(void)unlink(p);
}

void sbx_build_sweep(struct sbx_ctx *ctx)
{
	_cleanup_free_ char *dir = builds_dir(&ctx->store);
	DIR *dp = opendir(dir);
	if (!dp)
		return;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;
	while ((de = readdir(dp)) && n < 1024)
		if (de->d_name[0] != '.') {
			names = xrealloc(names, (n + 1) * sizeof(char *));
			names[n++] = xstrdup(de->d_name);
		}
	closedir(dp);
	for (size_t i = 0; i < n; i++) {
		sweep_one(ctx, dir, names[i]);
		free(names[i]);
	}
	free(names);
}

/* --- images of the steps so far ------------------------------------------------------------- */

int build_image_of(struct build *b, struct build_state *s, bool *ret_added, struct sbx_err *err)
{
	struct sbx_store *st = &b->ctx->store;
	struct sbx_image img = { 0 };
	char manifest[72];

	*ret_added = false;
	if (sbx_image_find(st, s->id, &img, err) == 0) {
		sbx_image_release(&img);
		return 0;
	}
	if (err->kind != SBX_E_NOTFOUND)
		return -1;
	*err = (struct sbx_err){ 0 };
	_cleanup_free_ char *note = xasprintf("ref %s\n", s->id);
	if (sbx_write_all(b->lease_fd, note, strlen(note)) < 0)
		return sbx_err_errno(err, "cannot write '%s'", b->lease);
	if (img_make_manifest(st, s->id, s->layers, s->n_layers, manifest, err) < 0 ||
	    img_add_ref(st, s->id, manifest, s->id, s->layers, s->n_layers, "built", err) < 0)
		return -1;
	*ret_added = true;
	return 0;
}

int build_sandbox(struct build *b, struct build_state *s, char **ret_sb, bool *ret_added,
		  struct sbx_err *err)
{
	struct sbx_create_opts co = { 0 };
	struct sbx_record *rec = NULL;
	char msg[300];

	*ret_sb = NULL;
	if (build_image_of(b, s, ret_added, err) < 0)
		return -1;
	sbx_config_init(&co.config);
	co.config.image.ref = xstrdup(s->id);
	co.config.env = xcalloc(1, sizeof(char *));
	co.config.labels = xcalloc(2, sizeof(char *));
	co.config.labels[0] = xasprintf("sbx.build=%s", lease_name(b));
	int r = 0;
	if (b->o->net) {
		if (sbx_net_parse_mode(b->o->net, &co.config.net, msg, sizeof(msg)) < 0)
			r = sbx_err_set(err, SBX_E_USAGE, "%s", msg);
		co.config.net.set = true;
	}
	if (r == 0)
		r = sbx_sandbox_create(b->ctx, &co, &rec, err);
	sbx_config_release(&co.config);
	if (r < 0) {
		if (*ret_added)
			build_unref(b, s->id);
		return -1;
	}
	*ret_sb = xstrdup(rec->id);
	sbx_record_free(rec);
	return 0;
}

void build_sandbox_rm(struct build *b, struct build_state *s, const char *sb, bool added)
{
	struct sbx_err err = { 0 };
	if (sb && sbx_sandbox_rm(b->ctx, sb, true, &err) < 0)
		sbx_warn("cannot remove the build's sandbox %s: %s", sb, err.msg);
	if (added)
		build_unref(b, s->id);
}

/* --- RUN ------------------------------------------------------------------------------------ */

struct run_out {
	struct build *b;
	char *buf; /* -q: what the command wrote, kept for its failure */
	size_t len;
};

static void run_take(struct sbx_exec_result *r, int stream, const char *buf, size_t n)
{
	struct run_out *o = r->begin_arg;
	if (!o->b->o->quiet) {
		fwrite(buf, 1, n, o->b->o->out);
		fflush(o->b->o->out);
		return;
	}
	size_t keep = n < QUIET_KEEP - o->len ? n : QUIET_KEEP - o->len;
	if (keep) {
		o->buf = xrealloc(o->buf, o->len + keep);
		memcpy(o->buf + o->len, buf, keep);
		o->len += keep;
	}
}

/* the exec runs in a child: the local provider's exec joins the sandbox's namespaces */
static int exec_child(struct build *b, const char *sb, struct sbx_exec_opts *eo,
		      struct run_out *out, int *ret_status, struct sbx_err *err)
{
	int *shared = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	int ep[2];
	if (shared == MAP_FAILED)
		return sbx_err_errno(err, "cannot map memory");
	if (pipe2(ep, O_CLOEXEC) < 0) {
		munmap(shared, sizeof(int));
		return sbx_err_errno(err, "cannot create a pipe");
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(ep[0]);
		close(ep[1]);
		munmap(shared, sizeof(int));
		return sbx_err_errno(err, "cannot fork");
	}
	if (pid == 0) {
		struct sbx_err e = { 0 };
		close(ep[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		int r = sbx_sandbox_exec(b->ctx, sb, eo, shared, &e);
		if (r == 0 && *shared != 0 && out->len) {
			fwrite(out->buf, 1, out->len, stderr);
			fflush(stderr);
		}
		fflush(NULL);
		sbx_err_send(ep[1], r == 0 ? NULL : &e);
		_exit(r == 0 ? 0 : 1);
	}
	close(ep[1]);
	int r = sbx_err_recv(ep[0], pid, "running the step", err);
	close(ep[0]);
	*ret_status = *shared;
	munmap(shared, sizeof(int));
	return r;
}

/* what the RUN's sandbox reached or was refused, from its egress log, one line each (at most
 * EGRESS_SHOW): the build's output says what left */
static void egress_report(struct build *b, const char *sb)
{
	_cleanup_free_ char *path = NULL, *id = NULL;
	struct sbx_err err = { 0 };
	if (b->o->quiet || sbx_sandbox_egress_log_path(b->ctx, sb, &path, &id, &err) < 0)
		return;
	size_t len = 0;
	_cleanup_free_ char *text = sbx_read_file(path, EGRESS_MAX, &len);
	size_t n = 0;
	char *save = NULL;
	for (char *l = text ? strtok_r(text, "\n", &save) : NULL; l;
	     l = strtok_r(NULL, "\n", &save)) {
		json_error_t je;
		json_t *e = json_loads(l, 0, &je);
		const char *dom = sbx_json_str(e, "domain"), *verdict = sbx_json_str(e, "verdict");
		if (dom && verdict && n++ < EGRESS_SHOW) {
			_cleanup_free_ char *d = sbx_term_safe(dom);
			_cleanup_free_ char *why = sbx_term_safe(sbx_json_str(e, "reason") ?: "");
			fprintf(b->o->out, "#%d egress: %s %s:%lld (%s)\n", b->step, verdict, d,
				(long long)json_integer_value(json_object_get(e, "port")), why);
		}
		if (e)
			json_decref(e);
	}
	if (n > EGRESS_SHOW)
		fprintf(b->o->out, "#%d egress: %zu more connections\n", b->step, n - EGRESS_SHOW);
	fflush(b->o->out);
}

int build_run(struct build *b, struct build_state *s, char **argv, char **env, const char *user,
	      struct sbx_layer *ret, int *ret_status, struct sbx_err *err)
{
	_cleanup_free_ char *sb = NULL;
	bool added = false;

	if (build_sandbox(b, s, &sb, &added, err) < 0)
		return -1;
	struct run_out out = { .b = b };
	struct sbx_exec_result res = { .out_fd = -1,
				       .err_fd = -1,
				       .cpu_ms = -1,
				       .peak_memory = -1,
				       .take = run_take,
				       .begin_arg = &out };
	struct sbx_exec_opts eo = {
		.argv = argv, .env = env, .user = user && *user ? user : NULL, .result = &res
	};
	int r = exec_child(b, sb, &eo, &out, ret_status, err);
	egress_report(b, sb);
	if (r == 0 && *ret_status == 0)
		r = sbx_sandbox_layer(b->ctx, sb, ret, err);
	build_sandbox_rm(b, s, sb, added);
	return r;
}
