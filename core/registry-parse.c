/* The network-free half of the registry client: references, media types, the JSON depth guard,
 * WWW-Authenticate, docker's credentials, platforms. */
#define _GNU_SOURCE
#include "core/registry.h"

#include <errno.h>
#include <pwd.h>
#include <strings.h>

#include "core/digest.h"
#include "core/json.h"
#include "core/log.h"
#include "core/strbuf.h"

/* --- references ------------------------------------------------------------------------------- */

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool alnum(char c)
{
	return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* a path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static bool path_component_ok(const char *s, size_t n)
{
	size_t i = 0;

	if (n == 0 || !lower_alnum(s[0]))
		return false;
	while (i < n) {
		if (lower_alnum(s[i])) {
			i++;
			continue;
		}
		size_t j = i + 1;
		if (s[i] == '_' && j < n && s[j] == '_')
			j++;
		else if (s[i] == '-')
			while (j < n && s[j] == '-')
				j++;
		else if (s[i] != '.' && s[i] != '_')
			return false;
		if (j >= n || !lower_alnum(s[j]))
			return false;
		i = j;
	}
	return true;
}

static bool port_ok(const char *s, size_t n)
{
	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* host[:port], host being dot-separated labels or a bracketed IPv6 address */
static bool domain_ok(const char *s, size_t n)
{
	size_t hn = n;

	if (n == 0)
		return false;
	if (s[0] == '[') {
		const char *close = memchr(s, ']', n);
		if (!close || close == s + 1)
			return false;
		for (const char *p = s + 1; p < close; p++)
			if (!strchr("0123456789abcdefABCDEF:.", *p))
				return false;
		hn = (size_t)(close - s) + 1;
		return hn == n || (s[hn] == ':' && port_ok(s + hn + 1, n - hn - 1));
	}
	const char *colon = memchr(s, ':', n);
	if (colon) {
		hn = (size_t)(colon - s);
		if (!port_ok(colon + 1, n - hn - 1))
			return false;
	}
	/* labels: [a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])? */
	size_t start = 0;
	for (size_t i = 0; i <= hn; i++) {
		if (i < hn && s[i] != '.')
			continue;
		size_t len = i - start;
		if (len == 0 || !alnum(s[start]) || !alnum(s[i - 1]))
			return false;
		for (size_t k = start; k < i; k++)
			if (!alnum(s[k]) && s[k] != '-')
				return false;
		start = i + 1;
	}
	return true;
}

/* [A-Za-z0-9_][A-Za-z0-9_.-]{0,127} */
static bool tag_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 128 || !(alnum(s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!alnum(s[i]) && !strchr("_.-", s[i]))
			return false;
	return true;
}

static bool hex64(const char *s)
{
	if (strlen(s) != 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

static int bad_ref(struct sbx_err *err, const char *s, const char *why)
{
	return sbx_err_set(err, SBX_E_USAGE, "invalid image reference '%s': %s", s, why);
}

int sbx_ref_parse(const char *s, struct sbx_ref *ret, struct sbx_err *err)
{
	if (!*s)
		return bad_ref(err, s, "it is empty");
	if (hex64(s))
		return bad_ref(err, s, "a 64-digit hex string is an image id, not a name");
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return bad_ref(err, s, "it contains a space or a control character");

	_cleanup_free_ char *name = NULL, *tag = NULL, *digest = NULL;
	const char *at = strchr(s, '@');
	if (at) {
		if (!sbx_digest_valid(at + 1))
			return bad_ref(err, s, "a digest is 'sha256:' and 64 lowercase hex digits");
		digest = xstrdup(at + 1);
		name = xstrndup(s, (size_t)(at - s));
	} else {
		name = xstrdup(s);
	}
	char *slash = strrchr(name, '/'), *colon = strrchr(name, ':');
	if (colon && (!slash || colon > slash)) {
		*colon = 0;
		if (!tag_ok(colon + 1))
			return bad_ref(err, s,
				       "a tag is up to 128 letters, digits, '_', '.' and '-', "
				       "not starting with '.' or '-'");
		tag = xstrdup(colon + 1);
	}
	if (!*name)
		return bad_ref(err, s, "the repository name is empty");

	/* the first component names a registry when it looks like a host */
	_cleanup_free_ char *registry = NULL, *repo = NULL;
	char *first = strchr(name, '/');
	bool has_domain = false;
	if (first) {
		size_t n = (size_t)(first - name);
		bool upper = false;
		for (size_t i = 0; i < n; i++)
			upper |= name[i] >= 'A' && name[i] <= 'Z';
		has_domain = memchr(name, '.', n) || memchr(name, ':', n) ||
			(n == 9 && strncmp(name, "localhost", 9) == 0) || upper;
	}
	if (has_domain) {
		size_t n = (size_t)(first - name);
		if (!domain_ok(name, n))
			return bad_ref(err, s, "the registry is not a valid host[:port]");
		registry = xstrndup(name, n);
		repo = xstrdup(first + 1);
		if (streq(registry, "index.docker.io")) {
			free(registry);
			registry = xstrdup("docker.io");
		}
	} else {
		registry = xstrdup("docker.io");
		repo = xstrdup(name);
	}
	if (streq(registry, "docker.io") && !strchr(repo, '/')) {
		char *r = xasprintf("library/%s", repo);
		free(repo);
		repo = r;
	}
	for (const char *p = repo;;) {
		const char *e = strchrnul(p, '/');
		if (!path_component_ok(p, (size_t)(e - p))) {
			for (const char *q = p; q < e; q++)
				if (*q >= 'A' && *q <= 'Z')
					return bad_ref(err, s, "repository names are lowercase");
			return bad_ref(err, s,
				       "each part of a repository name is lowercase letters "
				       "and digits, joined by '.', '_', '__' or '-'");
		}
		if (!*e)
			break;
		p = e + 1;
	}
	if (strlen(registry) + 1 + strlen(repo) > 255)
		return bad_ref(err, s, "the name is longer than 255 characters");

	if (digest) {
		free(tag);
		tag = NULL;
	} else if (!tag) {
		tag = xstrdup("latest");
	}
	ret->host = xstrdup(streq(registry, "docker.io") ? "registry-1.docker.io" : registry);
	ret->name = digest ? xasprintf("%s/%s@%s", registry, repo, digest)
			   : xasprintf("%s/%s:%s", registry, repo, tag);
	ret->registry = TAKE_PTR(registry);
	ret->repo = TAKE_PTR(repo);
	ret->tag = TAKE_PTR(tag);
	ret->digest = TAKE_PTR(digest);
	return 0;
}

void sbx_ref_release(struct sbx_ref *r)
{
	free(r->registry);
	free(r->host);
	free(r->repo);
	free(r->tag);
	free(r->digest);
	free(r->name);
	memset(r, 0, sizeof(*r));
}

/* does a name whose first component is s[0..n) name a registry (docker's rule, as in parse) */
static bool names_registry(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '.' || s[i] == ':' || (s[i] >= 'A' && s[i] <= 'Z'))
			return true;
	return n == 9 && strncmp(s, "localhost", 9) == 0;
}

char *sbx_ref_familiar(const char *n)
{
	if (startswith(n, "docker.io/library/")) {
		const char *rest = n + strlen("docker.io/library/");
		if (!strchr(rest, '/'))
			return xstrdup(rest);
	}
	if (startswith(n, "docker.io/")) {
		/* not when what is left would read as another registry: docker.io/l.com/a is not
		 * l.com/a */
		const char *rest = n + strlen("docker.io/"), *slash = strchr(rest, '/');
		if (!slash || !names_registry(rest, (size_t)(slash - rest)))
			return xstrdup(rest);
	}
	return xstrdup(n);
}

/* --- media types ------------------------------------------------------------------------------ */

static const char *const layer_types[] = {
	"application/vnd.oci.image.layer.v1.tar",
	"application/vnd.oci.image.layer.v1.tar+gzip",
	"application/vnd.oci.image.layer.v1.tar+zstd",
	"application/vnd.docker.image.rootfs.diff.tar",
	"application/vnd.docker.image.rootfs.diff.tar.gzip",
	"application/vnd.docker.image.rootfs.diff.tar.zstd",
	"application/vnd.oci.image.layer.nondistributable.v1.tar",
	"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
	"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
	"application/vnd.docker.image.rootfs.foreign.diff.tar",
	"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
};

bool sbx_layer_media_type_known(const char *mt)
{
	for (size_t i = 0; mt && i < ARRAY_SIZE(layer_types); i++)
		if (streq(mt, layer_types[i]))
			return true;
	return false;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && streq(s + n - m, suffix);
}

bool sbx_layer_is_gzip(const char *mt)
{
	return mt && (ends_with(mt, "tar+gzip") || ends_with(mt, "tar.gzip"));
}

bool sbx_layer_is_zstd(const char *mt)
{
	return mt && (ends_with(mt, "tar+zstd") || ends_with(mt, "tar.zstd"));
}

bool sbx_layer_is_foreign(const char *mt)
{
	return mt && (strstr(mt, "nondistributable") || strstr(mt, "foreign"));
}

/* --- JSON with a depth guard ------------------------------------------------------------------ */

int sbx_registry_json_depth(const char *t, size_t n)
{
	int depth = 0, max = 0;
	bool in_str = false, esc = false;

	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '[' || c == '{') {
			if (++depth > max)
				max = depth;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return max;
}

json_t *sbx_registry_json_parse(const char *text, size_t len, const char *what, struct sbx_err *err)
{
	if (sbx_registry_json_depth(text, len) > SBX_REGISTRY_MAX_JSON_DEPTH) {
		sbx_err_set(err, SBX_E_REMOTE, "cannot parse %s: it nests deeper than %d levels",
			    what, SBX_REGISTRY_MAX_JSON_DEPTH);
		return NULL;
	}
	json_t *j = sbx_json_parse(text, len, what, err);
	if (!j)
		err->kind = SBX_E_REMOTE;
	return j;
}

/* --- WWW-Authenticate ------------------------------------------------------------------------- */

static bool tchar(char c)
{
	return alnum(c) || (c && strchr("!#$%&'*+.^_`|~-", c));
}

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

int sbx_registry_parse_challenge(const char *h, struct sbx_challenge *ret)
{
	struct sbx_challenge c = { 0 };
	const char *p = skip_ws(h), *start = p;

	while (tchar(*p))
		p++;
	if (p == start || (*p && *p != ' ' && *p != '\t'))
		return -1;
	c.scheme = xstrndup(start, (size_t)(p - start));
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p)
			break;
		const char *k = p;
		while (tchar(*p))
			p++;
		size_t kn = (size_t)(p - k);
		p = skip_ws(p);
		if (kn == 0 || *p != '=') {
			if (kn > 0)
				break; /* the scheme of a next challenge */
			sbx_challenge_release(&c);
			return -1;
		}
		p = skip_ws(p + 1);
		struct strbuf v = STRBUF_INIT;
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++) {
				if (*p == '\\' && p[1])
					p++;
				strbuf_addch(&v, *p);
			}
			if (*p != '"') {
				strbuf_release(&v);
				sbx_challenge_release(&c);
				return -1;
			}
			p++;
		} else {
			const char *vs = p;
			while (tchar(*p) || *p == '/' || *p == ':' || *p == '=')
				p++;
			strbuf_add(&v, vs, (size_t)(p - vs));
		}
		char **slot = kn == 5 && !strncasecmp(k, "realm", 5) ? &c.realm
			: kn == 7 && !strncasecmp(k, "service", 7)   ? &c.service
			: kn == 5 && !strncasecmp(k, "scope", 5)     ? &c.scope
								     : NULL;
		if (slot && !*slot)
			*slot = strbuf_detach(&v);
		strbuf_release(&v);
		p = skip_ws(p);
		if (*p && *p != ',') {
			sbx_challenge_release(&c);
			return -1;
		}
	}
	*ret = c;
	return 0;
}

void sbx_challenge_release(struct sbx_challenge *c)
{
	free(c->scheme);
	free(c->realm);
	free(c->service);
	free(c->scope);
	memset(c, 0, sizeof(*c));
}

/* --- credentials ------------------------------------------------------------------------------ */

/* an auths key ("https://index.docker.io/v1/", "ghcr.io") as a bare host[:port] */
static char *auth_key_host(const char *k)
{
	if (!strncasecmp(k, "https://", 8))
		k += 8;
	else if (!strncasecmp(k, "http://", 7))
		k += 7;
	return xstrndup(k, strcspn(k, "/"));
}

static bool key_matches(const char *key, const char *registry)
{
	_cleanup_free_ char *h = auth_key_host(key);

	if (!strcasecmp(h, registry))
		return true;
	return streq(registry, "docker.io") &&
		(!strcasecmp(h, "index.docker.io") || !strcasecmp(h, "registry-1.docker.io"));
}

static char *docker_config_path(void)
{
	const char *dir = getenv("DOCKER_CONFIG");
	if (dir && *dir)
		return xasprintf("%s/config.json", dir);
	const char *home = getenv("HOME");
	if (!home || !*home) {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	return home ? xasprintf("%s/.docker/config.json", home) : NULL;
}

/* the auths entry of config.json J for REGISTRY, or NULL */
static json_t *auths_entry(json_t *j, const char *registry)
{
	json_t *auths = json_object_get(j, "auths"), *v;
	const char *k;

	if (!json_is_object(auths))
		return NULL;
	v = json_object_get(auths, registry);
	if (json_is_object(v))
		return v;
	json_object_foreach (auths, k, v) {
		if (json_is_object(v) && key_matches(k, registry))
			return v;
	}
	return NULL;
}

int sbx_registry_credentials(const char *registry, struct sbx_registry_creds *ret,
			     struct sbx_err *err)
{
	_cleanup_free_ char *path = docker_config_path();
	_cleanup_free_ char *text = NULL, *what = NULL;
	_cleanup_json_ json_t *j = NULL;
	size_t len;

	if (!path)
		return 0;
	if (!(text = sbx_read_file(path, 1 << 20, &len))) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return sbx_err_errno(err, "cannot read the registry credentials in '%s'", path);
	}
	what = xasprintf("the registry credentials in '%s'", path);
	j = sbx_registry_json_parse(text, len, what, err);
	explicit_bzero(text, len);
	if (!j) {
		err->kind = SBX_E_CONFIG;
		return -1;
	}
	if (!json_is_object(j))
		return sbx_err_set(err, SBX_E_CONFIG, "cannot read %s: not a JSON object", what);
	json_t *entry = auths_entry(j, registry);
	if (!entry) {
		if (json_object_get(j, "credsStore") || json_object_get(j, "credHelpers"))
			sbx_debug("'%s' names a credential helper, which sbx does not run", path);
		return 0;
	}

	struct sbx_registry_creds c = { 0 };
	const char *auth = sbx_json_str(entry, "auth");
	if (auth && *auth) {
		size_t n;
		_cleanup_free_ char *plain = sbx_base64_decode(auth, &n);
		char *colon = plain ? memchr(plain, ':', n) : NULL;
		if (!colon || strlen(plain) != n) {
			if (plain)
				explicit_bzero(plain, n);
			return sbx_err_set(err, SBX_E_CONFIG,
					   "cannot read %s: the 'auth' of '%s' "
					   "is not base64 of user:password (run 'docker login %s' "
					   "again)",
					   what, registry, registry);
		}
		c.username = xstrndup(plain, (size_t)(colon - plain));
		c.password = xstrdup(colon + 1);
		explicit_bzero(plain, n);
	} else if (sbx_json_str(entry, "username") && sbx_json_str(entry, "password")) {
		c.username = xstrdup(sbx_json_str(entry, "username"));
		c.password = xstrdup(sbx_json_str(entry, "password"));
	}
	const char *it = sbx_json_str(entry, "identitytoken");
	if (it && *it)
		c.identity_token = xstrdup(it);
	if (!c.username && !c.identity_token)
		return 0;
	sbx_debug("using the credentials for %s in '%s'", registry, path);
	*ret = c;
	return 1;
}

void sbx_registry_free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void sbx_registry_creds_release(struct sbx_registry_creds *c)
{
	sbx_registry_free_secret(c->username);
	sbx_registry_free_secret(c->password);
	sbx_registry_free_secret(c->identity_token);
	memset(c, 0, sizeof(*c));
}

/* --- platforms -------------------------------------------------------------------------------- */

static bool word_ok(const char *s, size_t n)
{
	if (n == 0 || n >= 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!lower_alnum(s[i]) && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

const char *sbx_platform_norm_arch(const char *a)
{
	if (streq(a, "x86_64") || streq(a, "x86-64"))
		return "amd64";
	if (streq(a, "aarch64"))
		return "arm64";
	if (streq(a, "i386") || streq(a, "i686"))
		return "386";
	return a;
}

/* the variant an architecture means without one (containerd's defaults) */
static const char *default_variant(const char *arch)
{
	if (streq(arch, "arm64"))
		return "v8";
	if (streq(arch, "arm"))
		return "v7";
	return streq(arch, "amd64") ? "v1" : "";
}

int sbx_platform_parse(const char *s, struct sbx_platform *p, struct sbx_err *err)
{
	const char *a = strchr(s, '/'), *v = a ? strchr(a + 1, '/') : NULL;
	size_t on = a ? (size_t)(a - s) : 0;
	size_t an = a ? (v ? (size_t)(v - a - 1) : strlen(a + 1)) : 0;

	memset(p, 0, sizeof(*p));
	if (!a || !word_ok(s, on) || !word_ok(a + 1, an) || (v && !word_ok(v + 1, strlen(v + 1))))
		return sbx_err_set(err, SBX_E_USAGE,
				   "invalid platform '%s' (use OS/ARCH[/VARIANT], "
				   "like linux/amd64 or linux/arm64/v8)",
				   s);
	memcpy(p->os, s, on);
	char arch[32] = { 0 };
	memcpy(arch, a + 1, an);
	snprintf(p->arch, sizeof(p->arch), "%s", sbx_platform_norm_arch(arch));
	if (v) {
		snprintf(p->variant, sizeof(p->variant), "%s", v + 1);
		p->has_variant = true;
	}
	return 0;
}

static const char *variant_or_default(const char *arch, const char *variant)
{
	return variant && *variant ? variant : default_variant(arch);
}

int sbx_registry_select_platform(const json_t *index, const char *platform, char **ret_digest,
				 char **ret_media_type, struct sbx_err *err)
{
	struct sbx_platform want;
	json_t *ms = json_object_get(index, "manifests"), *m;
	size_t i;
	json_t *best = NULL;
	int best_score = 0;

	if (sbx_platform_parse(platform, &want, err) < 0)
		return -1;
	const char *want_v = variant_or_default(want.arch, want.variant);
	struct strbuf have = STRBUF_INIT;
	json_array_foreach (ms, i, m) {
		json_t *p = json_object_get(m, "platform");
		const char *os = sbx_json_str(p, "os"), *arch = sbx_json_str(p, "architecture");
		const char *var = sbx_json_str(p, "variant");
		const char *rt = sbx_json_str(json_object_get(m, "annotations"),
					      "vnd.docker.reference.type");
		if (!os || !arch || (rt && streq(rt, "attestation-manifest")) ||
		    streq(os, "unknown"))
			continue;
		strbuf_addf(&have, "%s%s/%s%s%s", have.len ? ", " : "", os, arch, var ? "/" : "",
			    var ? var : "");
		if (!sbx_digest_valid(sbx_json_str(m, "digest")))
			continue;
		if (!streq(os, want.os) || !streq(sbx_platform_norm_arch(arch), want.arch))
			continue;
		int score = streq(variant_or_default(want.arch, var), want_v) ? 2
			: want.has_variant				      ? 0
					   : 1; /* another variant only when none was asked */
		if (score > best_score) {
			best = m;
			best_score = score;
		}
	}
	if (!best) {
		sbx_err_set(err, SBX_E_NOTFOUND,
			    "the image has no variant for %s (it has: %s); "
			    "choose one with --platform",
			    platform, have.len ? have.buf : "none");
		strbuf_release(&have);
		return -1;
	}
	strbuf_release(&have);
	*ret_digest = xstrdup(sbx_json_str(best, "digest"));
	if (ret_media_type) {
		const char *mt = sbx_json_str(best, "mediaType");
		*ret_media_type = mt ? xstrdup(mt) : NULL;
	}
	return 0;
}
