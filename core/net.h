/* --net, --net-allow-private, --add-host, --host-port: parsed into a sandbox's typed network
 * policy (struct sbx_net_config in core/config.h), checked, and matched. */
#ifndef SBX_CORE_NET_H
#define SBX_CORE_NET_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"
#include "core/options.h"

/* the default preset: package registries and code hosts, as "PATTERN:PORT" */
extern const char *const sbx_net_preset[];

/* "example.com", "*.example.com", optionally ":PORT" (port 0: any); -1 when invalid */
int sbx_net_parse_allow(const char *s, char **ret_pattern, int *ret_port);
/* "NAME:ADDR" (ADDR an IPv4 or IPv6 address); -1 when invalid */
int sbx_net_parse_add_host(const char *s, char **ret_name, char **ret_addr);
/* "PORT[:INSIDE]"; -1 when invalid */
int sbx_net_parse_host_port(const char *s, int *ret_host, int *ret_inside);

/* the flags, each parsed once into n; -1 with a usage message in msg */
int sbx_net_parse_mode(const char *arg, struct sbx_net_config *n, char *msg, size_t len);
int sbx_net_add_host_arg(struct sbx_net_config *n, const char *arg, char *msg, size_t len);
int sbx_net_host_port_arg(struct sbx_net_config *n, const char *arg, char *msg, size_t len);
/* --net-rate "[DOMAIN=]LIMIT[,LIMIT]" with LIMIT "Nr/s", "Nr/m", "Nr/h" (requests) or
 * "SIZE/s" (bytes a second, each way: 512k/s, 10MiB/s), or "[DOMAIN=]none" (no limit): into
 * *r (r->pattern malloc'd or NULL); -1 when invalid */
int sbx_net_parse_rate(const char *s, struct sbx_net_rate *r);
/* the flag, parsed into n: it replaces the limit of the same DOMAIN (none: removes it) */
int sbx_net_rate_arg(struct sbx_net_config *n, const char *arg, char *msg, size_t len);
/* "20r/s,10MiB/s", "none" (malloc'd) */
char *sbx_net_rate_text(const struct sbx_net_rate *r);

/* sbx update's net flags (o) applied to n, in the order --net, --net-preset, --net-allow,
 * --net-deny, --net-rate; -1 with a usage message in msg */
int sbx_net_update(struct sbx_net_config *n, const struct sbx_update_opts *o, char *msg,
		   size_t len);

/* what goes together, once every flag is in */
int sbx_net_validate(const struct sbx_net_config *n, char *msg, size_t len);
/* does host (lowercase) match a pattern ("*.x" matches subdomains of x only) */
bool sbx_net_match(const char *pattern, const char *host);

#endif
