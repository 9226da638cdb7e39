/* Process helpers shared by every process sbx runs: a process's state and start time from
 * /proc/PID/stat, the processes /proc lists, pidfds, a child's report to its parent (struct
 * sbx_err's too, sbx_err_send/recv), writes to /proc/PID files and a user namespace's id maps. */
#ifndef SBX_CORE_PROC_H
#define SBX_CORE_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* the state of a process from /proc/PID/stat ('R', 'S', 'T', 'Z', ...), 0 when it is gone */
char sbx_proc_state(pid_t pid);
/* its parent and process group (fields 4 and 5 of /proc/PID/stat); -1 when it is gone */
int sbx_proc_parent_group(pid_t pid, pid_t *ret_ppid, pid_t *ret_pgrp);
/* its start time (field 22 of /proc/PID/stat, clock ticks after boot); -1 when it is gone */
int sbx_proc_starttime(pid_t pid, unsigned long long *ret);
/* pid is the process that started at start, and alive: not a zombie, not another process on a
 * reused pid */
bool sbx_proc_alive(pid_t pid, unsigned long long start);
/* a SIGSTOP waits for thread tid of process pid (0: its main thread) to take it (pending to
 * the process or to the thread) */
bool sbx_proc_stop_pending(pid_t pid, pid_t tid);
/* the pids /proc lists (this pid namespace's, for the /proc mounted), malloc'd; -1 with errno
 * when /proc cannot be read */
int sbx_proc_list(pid_t **ret, size_t *ret_n);

/* pidfd_open(2), close-on-exec; -1 with errno */
int sbx_pidfd_open(pid_t pid);
/* pidfd_send_signal(2); -1 with errno */
int sbx_pidfd_signal(int pidfd, int sig);
/* waits up to ms (-1: forever) for the process to end: 0 it ended, -1 not (yet) */
int sbx_pidfd_wait(int pidfd, int ms);

/* A child's report to its parent, before it execs or exits: one message of len bytes, written
 * whole on a close-on-exec pipe (or socket) whose other end only the parent holds; the parent
 * reads until it has len bytes or the pipe closes, which says the child exec'd or ended
 * without a word. Every child sbx forks reports this way (an errno and a stage, a line of
 * text, a struct sbx_err). */
/* -1 with errno when the parent is gone */
int sbx_proc_report(int fd, const void *msg, size_t len);
/* the bytes read (len: a whole report; 0: none, the pipe closed), -1 with errno */
ssize_t sbx_proc_read_report(int fd, void *buf, size_t len);

/* writes text to /proc/PID/FILE; -1 with errno */
int sbx_proc_write(pid_t pid, const char *file, const char *text);
/* the id maps of pid's new user namespace, uids and gids alike: 0..count-1 inside as base..
 * outside; count 0: the caller's own uid and gid alone, as 0 (setgroups denied first, as the
 * kernel asks of a writer without CAP_SETGID outside); -1 with errno */
int sbx_proc_write_id_maps(pid_t pid, unsigned long base, unsigned long count);
/* runs prog (an absolute path: /usr/bin/newuidmap or /usr/bin/newgidmap, set-uid programs that
 * write the maps an ordinary user's /etc/subuid and /etc/subgid allow) for pid's user namespace
 * with n (at most 4) triples of maps (inside, outside, count), in an empty environment and
 * without our descriptors; waits for it. -1 with errno: ENOENT when it cannot be run, EPERM
 * when it refused */
int sbx_proc_run_idmap(const char *prog, pid_t pid, const unsigned long *maps, size_t n);

#endif
