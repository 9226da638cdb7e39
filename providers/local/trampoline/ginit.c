/* sbx-ginit: the first process of a gVisor sandbox (--runtime gvisor), PID 1 inside gVisor. A
 * program of sbx's own (static, no libc), bound read-only into the sandbox from outside its
 * files, so that a sandbox on an image without /bin/sleep boots too and nothing of the
 * sandbox's runs as its init. It reaps the orphans the sandbox leaves, and with a memory limit
 * it is the sandbox's out-of-memory killer: gVisor (runsc 20221219) keeps no limit of its own
 * on what its processes hold, and the host's cgroup, reached, kills gVisor as a whole.
 *
 * argv: sbx-ginit [KIB]   KIB: the limit in KiB on what the sandbox's processes hold (gVisor's
 * AnonPages: anonymous memory and tmpfs). Past it, the process with the most resident memory
 * is killed (SIGKILL) and a line saying so goes to stdout (runsc's log of the sandbox). */

#if defined(__x86_64__)
#define NR_READ 0
#define NR_WRITE 1
#define NR_PREAD64 17
#define NR_CLOSE 3
#define NR_RT_SIGPROCMASK 14
#define NR_WAIT4 61
#define NR_KILL 62
#define NR_RT_SIGTIMEDWAIT 128
#define NR_GETDENTS64 217
#define NR_OPENAT 257
static long sys4(long n, long a, long b, long c, long d)
{
	long r;
	register long r10 __asm__("r10") = d;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return r;
}
__asm__(".text\n.global _start\n_start:\n\txor %rbp,%rbp\n\tmov %rsp,%rdi\n\tand $-16,%rsp\n"
	"\tcall ginit_main\n\thlt\n");
#elif defined(__aarch64__)
#define NR_READ 63
#define NR_WRITE 64
#define NR_PREAD64 67
#define NR_CLOSE 57
#define NR_RT_SIGPROCMASK 135
#define NR_WAIT4 260
#define NR_KILL 129
#define NR_RT_SIGTIMEDWAIT 137
#define NR_GETDENTS64 61
#define NR_OPENAT 56
static long sys4(long n, long a, long b, long c, long d)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
	return x0;
}
__asm__(".text\n.global _start\n_start:\n\tmov x0, sp\n\tbl ginit_main\n\tbrk #0\n");
#else
#error "sbx-ginit: add this architecture's system call convention"
#endif

#define AT_FDCWD -100
#define O_RDONLY 0
#define O_DIRECTORY 0200000
#define O_CLOEXEC 02000000
#define SIG_BLOCK 0
#define SIGKILL 9
#define SIGCHLD 17
#define WNOHANG 1

struct ts {
	long sec, nsec;
};

__attribute__((noreturn, used)) void ginit_main(long *sp);

static char buf[8192];

/* the decimal number after key ("AnonPages:", "VmRSS:") in the n bytes of buf, or -1 */
static long find(long n, const char *key)
{
	buf[n > 0 ? n : 0] = 0;
	for (char *l = buf; *l;) {
		const char *k = key;
		char *p = l;
		while (*k && *p == *k)
			p++, k++;
		if (!*k) {
			long v = 0;
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p < '0' || *p > '9')
				return -1;
			while (*p >= '0' && *p <= '9')
				v = v * 10 + (*p++ - '0');
			return v;
		}
		while (*l && *l != '\n')
			l++;
		if (*l)
			l++;
	}
	return -1;
}

/* the same in the file at path */
static long field(const char *path, const char *key)
{
	long fd = sys4(NR_OPENAT, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0);
	long n = 0, got;

	if (fd < 0)
		return -1;
	while (n < (long)sizeof(buf) - 1 &&
	       (got = sys4(NR_READ, fd, (long)(buf + n), (long)sizeof(buf) - 1 - n, 0)) > 0)
		n += got;
	sys4(NR_CLOSE, fd, 0, 0, 0);
	return find(n, key);
}

static char *put(char *o, const char *s)
{
	while (*s)
		*o++ = *s++;
	return o;
}

static char *put_num(char *o, long v)
{
	char d[24];
	int n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	while (n)
		*o++ = d[--n];
	return o;
}

struct dirent64 {
	unsigned long ino;
	long off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* the process holding the most resident memory, but this one; its pid, or 0 */
static long largest(long *ret_kib)
{
	static char dents[4096];
	static char path[64];
	long dfd = sys4(NR_OPENAT, AT_FDCWD, (long)"/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	long best = 0, best_kib = -1, n;

	if (dfd < 0)
		return 0;
	while ((n = sys4(NR_GETDENTS64, dfd, (long)dents, sizeof(dents), 0)) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64 *e = (struct dirent64 *)(dents + off);
			long pid = 0;
			const char *c = e->name;
			off += e->reclen;
			while (*c >= '0' && *c <= '9')
				pid = pid * 10 + (*c++ - '0');
			if (*c || pid <= 1)
				continue;
			char *o = put(path, "/proc/");
			o = put_num(o, pid);
			o = put(o, "/status");
			*o = 0;
			long kib = field(path, "VmRSS:");
			if (kib > best_kib) {
				best_kib = kib;
				best = pid;
			}
		}
	}
	sys4(NR_CLOSE, dfd, 0, 0, 0);
	*ret_kib = best_kib;
	return best;
}

__attribute__((noreturn, used)) void ginit_main(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	long limit = 0;
	unsigned long chld = 1UL << (SIGCHLD - 1);
	static char line[256];

	for (const char *p = argc > 1 ? argv[1] : ""; *p >= '0' && *p <= '9'; p++)
		limit = limit * 10 + (*p - '0');
	/* SIGCHLD is waited for, never delivered: no handler, so no signal from inside the
	 * sandbox ends this process (gVisor, as Linux, keeps those from a namespace's init) */
	sys4(NR_RT_SIGPROCMASK, SIG_BLOCK, (long)&chld, 0, 8);
	/* kept open: each look is one read (a system call costs gVisor's ptrace platform a
	 * round trip to its kernel) */
	long mi = limit ? sys4(NR_OPENAT, AT_FDCWD, (long)"/proc/meminfo", O_RDONLY | O_CLOEXEC, 0)
			: -1;
	long held = 0;
	for (;;) {
		/* with a limit, a look every 100 ms, every 10 ms past half of it; otherwise only
		 * when a child ended */
		struct ts t = { 0, (held > limit / 2 ? 10 : 100) * 1000 * 1000 };
		sys4(NR_RT_SIGTIMEDWAIT, (long)&chld, 0, limit ? (long)&t : 0, 8);
		while (sys4(NR_WAIT4, -1, 0, WNOHANG, 0) > 0)
			;
		if (!limit)
			continue;
		long n = mi >= 0 ? sys4(NR_PREAD64, mi, (long)buf, sizeof(buf) - 1, 0) : -1;
		held = n > 0 ? find(n, "AnonPages:") : field("/proc/meminfo", "AnonPages:");
		if (held <= limit)
			continue;
		long kib, pid = largest(&kib);
		if (pid <= 0)
			continue;
		sys4(NR_KILL, pid, SIGKILL, 0, 0);
		char *o = put(line, "sbx: out of memory: killed process ");
		o = put_num(o, pid);
		o = put(o, " (");
		o = put_num(o, kib);
		o = put(o, " KiB resident): the sandbox's processes held ");
		o = put_num(o, held);
		o = put(o, " KiB, its --memory is ");
		o = put_num(o, limit);
		o = put(o, " KiB\n");
		sys4(NR_WRITE, 1, (long)line, o - line, 0);
		/* the kill takes effect before the next look */
		struct ts pause = { 0, 50 * 1000 * 1000 };
		sys4(NR_RT_SIGTIMEDWAIT, (long)&chld, 0, (long)&pause, 8);
	}
}
