/* A Docker Engine reached through ssh, as docker's own client reaches DOCKER_HOST=ssh://…: each
 * connection is `ssh … HOST docker system dial-stdio` talking over one end of a socketpair, and
 * libcurl (or a raw stream) is handed the other end. The connections of one sbx call share one
 * ssh login (sbx_dial_shared; dial.c says how). */
#ifndef SBX_CORE_DIAL_H
#define SBX_CORE_DIAL_H

#include <stdbool.h>
#include <netinet/in.h>
#include <sys/types.h>

#include "core/err.h"

#define SBX_DIAL_SSH "/usr/bin/ssh"
/* connections of one dial open at once (each is an ssh process) */
#define SBX_DIAL_MAX_CONNS 8

struct sbx_dial_conn {
	int fd;	   /* sbx's end of the connection (-1: a free slot) */
	pid_t pid; /* the ssh process (0: not started yet) */
	/* libcurl's socket: its own address, by which its accepted end is known */
	struct sockaddr_in local;
	bool bound;
	int errfd;	/* the read end of ssh's stderr */
	char last[256]; /* ssh's last line on stderr so far */
	char cur[256];	/* the line it is writing */
	size_t curlen;
};

struct sbx_http_session;

/* made once per sbx call from DOCKER_HOST; holds the ssh processes of its open connections */
struct sbx_dial {
	char *host;   /* as given: a name (or an alias of ~/.ssh/config), an address, [v6] */
	char *user;   /* NULL: ssh's choice */
	char *port;   /* NULL: ssh's choice */
	char *config; /* an ssh config to read instead of the passwd entry's (see dial.c), or NULL */
	/* "127.0.0.1:PORT": its connections are ssh's channels to that port on the remote host
	 * (ssh -W) rather than docker system dial-stdio; NULL: the engine */
	char *forward;
	struct sbx_dial_conn conns[SBX_DIAL_MAX_CONNS];
	int lfd;	    /* the listening socket libcurl's connections reach (-1: none yet) */
	char *connect_to;   /* "::127.0.0.1:PORT" of it, for CURLOPT_CONNECT_TO */
	void *connect_list; /* a struct curl_slist of it */
	/* one connection kept for the requests of the call (core/http.h): one ssh serves them */
	struct sbx_http_session *session;
	pid_t owner; /* the process that made it (a forked child never ends its ssh processes) */
	/* one ssh login for all its connections (sbx_dial_shared's dials): ssh's connection
	 * sharing, through the control socket ctl_dir/m of a directory this dial made */
	bool share;
	char *ctl_dir; /* NULL: not made yet, or it could not be (then each connection logs in) */
	/* the first failure of a connection (ssh ended by itself with a status other than 0, or
	 * could not be started), worded for the user; empty: none */
	char failed[512];
};

/* whether DOCKER_HOST's value is an ssh:// URL */
bool sbx_dial_is_ssh(const char *url);
/* parses "ssh://[USER@]HOST[:PORT]" (nothing after the host but one '/'); a host or user that
 * ssh could take for an option, or with characters outside a name's, is refused (SBX_E_CONFIG) */
int sbx_dial_new(const char *url, struct sbx_dial **ret, struct sbx_err *err);
/* the dial of url for this whole process (sbx call): made on first use, the same one after
 * (so that every request of the call can share its session's connection, and all of its
 * connections one ssh login), ended at exit */
int sbx_dial_shared(const char *url, struct sbx_dial **ret, struct sbx_err *err);
/* connections of d (sbx_dial_open) reach TCP port on the remote host's loopback, through ssh's
 * own channel (ssh -W; the remote sshd must allow TCP forwarding), not the engine */
void sbx_dial_forward(struct sbx_dial *d, int port);
/* the shared dials are dropped: their ssh processes ended where this process started them, left
 * alone where it did not (a forked child's copies: the parent's), so that later calls make
 * dials of their own */
void sbx_dial_shared_forget(void);
/* ends every connection (its ssh reaped) and the master of its shared login, removes the
 * directory of its control socket, and frees; NULL is fine */
void sbx_dial_free(struct sbx_dial *d);
static inline void sbx_dial_freep(struct sbx_dial **d)
{
	sbx_dial_free(*d);
}

/* the argument vector of ssh for one connection, NULL-terminated, malloc'd (each string too):
 * sharing one login through the control socket ctl, or nothing (NULL); for the unit tests */
char **sbx_dial_argv(const struct sbx_dial *d, const char *ctl);
void sbx_dial_argv_free(char **argv);

/* a new connection: ret_fd is a connected stream socket to the remote engine (close-on-exec;
 * closed only through sbx_dial_close); -1 with err when ssh cannot be started */
int sbx_dial_open(struct sbx_dial *d, int *ret_fd, struct sbx_err *err);
/* closes fd (from sbx_dial_open) and ends its ssh: -1 with errno EBADF for another fd */
int sbx_dial_close(struct sbx_dial *d, int fd);
/* -1 with err (SBX_E_NETWORK, "ssh to HOST failed: <ssh's last line>") when a connection's ssh
 * failed, after a transfer over it did; 0 when none did (looks at every open one first) */
int sbx_dial_check(struct sbx_dial *d, struct sbx_err *err);

/* sets a libcurl handle (a CURL *) to open its connections through d. The one way any libcurl
 * transfer of sbx goes over ssh; -1 when libcurl refuses an option. libcurl connects to a
 * listening socket of d on 127.0.0.1 (whatever host the URL names), from a socket of d's own
 * making whose port tells its accepted end from any other process's connection (closed at
 * once); the accepted end becomes ssh's stdin and stdout once libcurl has connected
 * (CURLOPT_PREREQFUNCTION, or sbx_dial_attach). Why not a socketpair handed over as already
 * connected: libcurl 7.88 (Debian 12's) calls connect() on such a socket all the same and
 * fails (fixed in curl 8.0); and why not a unix socket: libcurl 7.88 reuses no connection
 * whose peer has no name it can print (an abstract one), which would make every request
 * start an ssh. */
int sbx_dial_curl(void *curl_handle, struct sbx_dial *d);
/* starts ssh for each connection libcurl has made through d since (a transfer with
 * CURLOPT_CONNECT_ONLY calls it after curl_easy_perform; others need not); -1 with err when
 * ssh cannot be started */
int sbx_dial_attach(struct sbx_dial *d, struct sbx_err *err);

#endif
