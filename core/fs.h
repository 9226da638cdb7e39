/* sbx fs: the file verbs (read, write, ls, stat, rm, mkdir, mv) on a sandbox's files, the
 * operation a provider's fs slot carries out, and the entries ls and stat print. */
#ifndef SBX_CORE_FS_H
#define SBX_CORE_FS_H

#include <stdbool.h>
#include <stdio.h>

#include "core/err.h"
#include "core/options.h"

enum sbx_fs_verb {
	SBX_FS_READ,
	SBX_FS_WRITE,
	SBX_FS_LS,
	SBX_FS_STAT,
	SBX_FS_RM,
	SBX_FS_MKDIR,
	SBX_FS_MV,
};

/* one entry of ls or stat; strings are the sandbox's bytes (NUL-terminated, any encoding) */
struct sbx_fs_entry {
	const char *path;	 /* absolute, in the sandbox */
	const char *link_target; /* symlinks (NULL: none or unknown) */
	char type;		 /* 'f' file, 'd' dir, 'l' symlink, 'o' other */
	unsigned mode;		 /* permission bits (07777) */
	long long uid, gid;	 /* -1: unknown */
	long long size;
	long long mtime; /* unix seconds */
};

typedef int (*sbx_fs_entry_fn)(void *arg, const struct sbx_fs_entry *e, struct sbx_err *err);

/* what a provider's fs slot does; paths are absolute (cmd/ made them so) */
struct sbx_fs_op {
	enum sbx_fs_verb verb;
	const char *path;
	const char *dst; /* mv */
	int fd;		 /* read: where the bytes go; write: where they come from */
	int mode;	 /* write --mode (-1: 0644 for a new file, an existing one's kept) */
	bool recursive;	 /* ls -R, rm -r */
	bool force;	 /* rm -f: a missing path is no error */
	bool parents;	 /* mkdir -p (write always makes the parents) */
	/* ls, stat: each entry in turn (ls of a directory: its entries by name) */
	sbx_fs_entry_fn entry;
	void *arg;
};

/* runs op on SB, with its lock held shared as cp does; not_found for a missing path */
int sbx_sandbox_fs(struct sbx_ctx *ctx, const char *sb, const struct sbx_fs_op *op,
		   struct sbx_err *err);

/* the entry's object: {name, path, type, size, mode "0644", uid, gid, mtime RFC 3339,
 * link_target?}; bytes that are not UTF-8 become U+FFFD */
json_t *sbx_fs_entry_json(const struct sbx_fs_entry *e);
/* one line as ls -l's, names made terminal-safe (full: the path rather than the name) */
void sbx_fs_entry_print(FILE *f, const struct sbx_fs_entry *e, bool full);
/* the last component of a path ("/" for "/") */
const char *sbx_fs_basename(const char *path, char *buf, size_t size);
/* an RFC 3339 time ("2026-11-25T10:00:00.123Z", "...+01:00") as unix seconds; 0 when none */
long long sbx_fs_parse_time(const char *s);
/* sorts v by path, then hands each to op->entry */
int sbx_fs_emit_sorted(struct sbx_fs_entry *v, size_t n, const struct sbx_fs_op *op,
		       struct sbx_err *err);
/* "0644" as a mode, 07777 at most; -1 when it is not */
int sbx_fs_parse_mode(const char *s);

#endif
