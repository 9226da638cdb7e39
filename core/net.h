/* --net, --net-allow-private, --add-host, --host-port: parsing, validation and the stored
 * form of a sandbox's network policy (options.net in its record). */
#ifndef SBX_CORE_NET_H
#define SBX_CORE_NET_H

#include <jansson.h>
#include <stdbool.h>

#include "providers/provider.h"

/* the default preset: package registries and code hosts, as "PATTERN:PORT" */
extern const char *const sbx_net_preset[];

/* "example.com", "*.example.com", optionally ":PORT" (port 0: any); -1 when invalid */
int sbx_net_parse_allow(const char *s, char **ret_pattern, int *ret_port);
/* "NAME:ADDR" (ADDR an IPv4 or IPv6 address); -1 when invalid */
int sbx_net_parse_add_host(const char *s, char **ret_name, char **ret_addr);
/* "PORT[:INSIDE]"; -1 when invalid */
int sbx_net_parse_host_port(const char *s, int *ret_host, int *ret_inside);
/* validates --net and its companions; a usage message in msg on failure */
int sbx_net_validate(const struct sbx_create_opts *o, char *msg, size_t len);
/* the stored form: {"mode", "allow": [...], "preset", "allow_private", "add_hosts":
 * [{name, addr}], "host_ports": [{host, inside}]} (o validated) */
json_t *sbx_net_json(const struct sbx_create_opts *o);
/* does host (lowercase) match a pattern ("*.x" matches subdomains of x only) */
bool sbx_net_match(const char *pattern, const char *host);

#endif
