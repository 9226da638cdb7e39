/* DOCKER_HOST=ssh:// URLs: what is taken, what is refused, and the ssh command made of them. */
#include "core/dial.h"

#include <stdlib.h>
#include <string.h>

#include "tests/unit/harness.h"

/* the words of ssh's argv for url, joined by spaces (the -F of a HOME config left out), for a
 * connection that shares a login through control socket ctl (NULL: none) */
static char *argv_ctl(const char *url, const char *ctl)
{
	struct sbx_dial *d = NULL;
	struct sbx_err err = { 0 };
	static char out[512];

	if (sbx_dial_new(url, &d, &err) < 0)
		return NULL;
	free(d->config);
	d->config = NULL;
	char **v = sbx_dial_argv(d, ctl);
	out[0] = 0;
	for (char **p = v; *p; p++) {
		if (p != v)
			strncat(out, " ", sizeof(out) - strlen(out) - 1);
		strncat(out, *p, sizeof(out) - strlen(out) - 1);
	}
	sbx_dial_argv_free(v);
	sbx_dial_free(d);
	return out;
}

static char *argv_of(const char *url)
{
	return argv_ctl(url, NULL);
}

static bool refused(const char *url, const char *why)
{
	struct sbx_dial *d = NULL;
	struct sbx_err err = { 0 };

	if (sbx_dial_new(url, &d, &err) == 0) {
		sbx_dial_free(d);
		return false;
	}
	return err.kind == SBX_E_CONFIG && strstr(err.msg, why);
}

static bool is(const char *got, const char *want)
{
	if (got && !strcmp(got, want))
		return true;
	printf("# got:  %s\n# want: %s\n", got ? got : "(refused)", want);
	return false;
}

#define SSH \
	"/usr/bin/ssh -o BatchMode=yes -o ConnectTimeout=10 -o ControlPath=none -o ControlMaster=no "

void test_dial(void)
{
	CHECK(sbx_dial_is_ssh("ssh://h"), "ssh:// is ssh");
	CHECK(!sbx_dial_is_ssh("unix:///var/run/docker.sock"), "unix:// is not");
	CHECK(!sbx_dial_is_ssh("tcp://h:2375"), "tcp:// is not");

	CHECK(is(argv_of("ssh://box"), SSH "-- box docker system dial-stdio"), "a host alone");
	CHECK(is(argv_of("ssh://box/"), SSH "-- box docker system dial-stdio"), "one '/' after");
	CHECK(is(argv_of("ssh://me@box.example.com:2222"),
		 SSH "-l me -p 2222 -- box.example.com docker system dial-stdio"),
	      "user, host, port");
	CHECK(is(argv_of("ssh://deploy.user_1@10.0.0.7"),
		 SSH "-l deploy.user_1 -- 10.0.0.7 docker system dial-stdio"),
	      "user and an address");
	CHECK(is(argv_of("ssh://[::1]:22"), SSH "-p 22 -- ::1 docker system dial-stdio"),
	      "an IPv6 address in brackets");
	CHECK(is(argv_of("ssh://a@[fe80::1]"), SSH "-l a -- fe80::1 docker system dial-stdio"),
	      "IPv6 with a user and no port");
	CHECK(is(argv_of("ssh://my-alias"), SSH "-- my-alias docker system dial-stdio"),
	      "an alias of the ssh config");

	/* one login per call: its control socket in the call's directory, never the config's;
	 * its master kept a second after the last session at most */
	CHECK(is(argv_ctl("ssh://me@box:2222", "/tmp/sbx-ssh-a1b2c3/m"),
		 "/usr/bin/ssh -o BatchMode=yes -o ConnectTimeout=10 "
		 "-o ControlPath=/tmp/sbx-ssh-a1b2c3/m -o ControlMaster=auto -o ControlPersist=1 "
		 "-l me -p 2222 -- box docker system dial-stdio"),
	      "a connection of a shared login");

	/* nothing may become an option of ssh */
	CHECK(refused("ssh://-oProxyCommand=touch%20x", "not beginning with '-'"), "host '-o…'");
	CHECK(refused("ssh://-box", "not beginning with '-'"), "a host beginning with '-'");
	CHECK(refused("ssh://-l@box", "not begin with '-'"), "a user beginning with '-'");
	CHECK(refused("ssh://a b@box", "user name"), "a space in the user");
	CHECK(refused("ssh://box;id", "host must be"), "a ';' in the host");
	CHECK(refused("ssh://box name", "host must be"), "a space in the host");
	CHECK(refused("ssh://bo\x01x", "host must be"), "a control character");
	CHECK(refused("ssh://[-1]", "IPv6"), "brackets without an address");
	CHECK(refused("ssh://[::1", "no ']'"), "no closing bracket");
	CHECK(refused("ssh://[::1]x", "only ':PORT'"), "text after ']'");

	CHECK(refused("ssh://", "names no host"), "no host");
	CHECK(refused("ssh://me@", "names no host"), "a user and no host");
	CHECK(refused("ssh://box:", "port must be"), "an empty port");
	CHECK(refused("ssh://box:0", "port must be"), "port 0");
	CHECK(refused("ssh://box:65536", "port must be"), "port 65536");
	CHECK(refused("ssh://box:+22", "port must be"), "a signed port");
	CHECK(refused("ssh://box:22x", "port must be"), "a port with letters");
	CHECK(refused("ssh://me:secret@box", "password"), "a password");
	CHECK(refused("ssh://box/var/run/docker.sock", "nothing may follow"), "a path");
	CHECK(refused("ssh://box?x=1", "nothing may follow"), "a query");
	CHECK(refused("ssh://box#f", "nothing may follow"), "a fragment");
	CHECK(refused("tcp://box:2375", "not an ssh:// URL"), "another scheme");
}
