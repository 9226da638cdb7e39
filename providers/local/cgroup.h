/* cgroup.c's own view of a sandbox's cgroups, shared with cgroup-stat.c (nothing else uses it). */
#ifndef SBX_PROVIDERS_LOCAL_CGROUP_H
#define SBX_PROVIDERS_LOCAL_CGROUP_H

#include "providers/local/local.h"

/* the sandbox's directory in each hierarchy: the unified one (v2) and the v1 controllers */
enum {
	ROLE_V2,
	ROLE_MEMORY,
	ROLE_PIDS,
	ROLE_CPU,
	ROLE_FREEZER,
	N_ROLES
};

/* the sandbox's two leaves under sbx/ID */
#define LEAF_SANDBOX "sandbox"
#define LEAF_SUPERVISOR "supervisor"

struct cgroups {
	char *dir[N_ROLES]; /* NULL: none for that role */
};

/* the directories listed in SBDIR/cgroups */
void local_cg_load(const char *sbdir, struct cgroups *c);
void local_cg_release(struct cgroups *c);
/* the v2 directory when it has controller ctl enabled */
bool local_cg_v2_offers(const struct cgroups *c, const char *ctl);
/* DIR/FILE's text (NULL with errno) */
char *local_cg_read(const char *dir, const char *file);
/* "KEY N" in a flat keyed file (memory.events, cgroup.events, memory.oom_control); -1 absent */
long long local_cg_key(const char *dir, const char *file, const char *key);

#endif
