/* sbx-exec: the last step of sbx exec, a program of its own (static, no libc, a few hundred
 * bytes of code) that sbx runs from a sealed memfd. The process that executes the sandbox's
 * file is then this sealed copy, never the sbx binary: whatever a sandbox makes resolve to
 * /proc/self/exe at that moment (a "#!/proc/self/exe" script, a link to it) reaches only the
 * memfd, which nobody can write (CVE-2019-5736).
 *
 * argv: sbx-exec FD FILE ARGV0 ARGS...   FD: where a failure is reported (as sbx's struct
 * exec_msg: stage 3, errno, 0), closed on a successful exec. FILE is run as execvp(3) would:
 * searched in the PATH of the environment when it has no '/', through /bin/sh when the kernel
 * does not know its format. */

#if defined(__x86_64__)
#define NR_WRITE 1
#define NR_FCNTL 72
#define NR_EXECVE 59
#define NR_EXIT 60
static long sys3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}
__asm__(".text\n.global _start\n_start:\n\txor %rbp,%rbp\n\tmov %rsp,%rdi\n\tand $-16,%rsp\n"
	"\tcall tramp_main\n\thlt\n");
#elif defined(__aarch64__)
#define NR_WRITE 64
#define NR_FCNTL 25
#define NR_EXECVE 221
#define NR_EXIT 93
static long sys3(long n, long a, long b, long c)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	return x0;
}
__asm__(".text\n.global _start\n_start:\n\tmov x0, sp\n\tbl tramp_main\n\tbrk #0\n");
#else
#error "sbx-exec: add this architecture's system call convention"
#endif

#define E_NOENT 2
#define E_NOEXEC 8
#define E_ACCES 13
#define E_NOTDIR 20
#define E_NAMETOOLONG 36
#define E_LOOP 40
#define E_STALE 116
#define F_SETFD 2
#define FD_CLOEXEC 1
#define STAGE_EXEC 3

struct exec_msg {
	int stage;
	int errnum;
	long pid;
};

__attribute__((noreturn, used)) void tramp_main(long *sp);

static long execve_(const char *file, char **argv, char **envp)
{
	return sys3(NR_EXECVE, (long)file, (long)argv, (long)envp);
}

/* execve, and for a file the kernel cannot run, the shell on it, as execvp does: cmd[-1] is a
 * slot of ours (FILE), room for "/bin/sh" */
static long run(char *path, char **cmd, char **envp)
{
	long r = execve_(path, cmd, envp);

	if (r == -E_NOEXEC) {
		char *argv0 = cmd[0];
		cmd[-1] = (char *)"/bin/sh";
		cmd[0] = path;
		r = execve_("/bin/sh", cmd - 1, envp);
		cmd[0] = argv0;
	}
	return r;
}

static int has_slash(const char *s)
{
	for (; *s; s++)
		if (*s == '/')
			return 1;
	return 0;
}

static const char *path_of(char **envp)
{
	for (; *envp; envp++) {
		const char *e = *envp;
		if (e[0] == 'P' && e[1] == 'A' && e[2] == 'T' && e[3] == 'H' && e[4] == '=')
			return e + 5;
	}
	return "/bin:/usr/bin";
}

__attribute__((noreturn, used)) void tramp_main(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1), **envp = argv + argc + 1;
	long err = E_NOENT;
	int fd = -1;

	if (argc < 4) {
		sys3(NR_EXIT, 127, 0, 0);
		__builtin_unreachable();
	}
	for (const char *p = argv[1]; *p >= '0' && *p <= '9'; p++)
		fd = (fd < 0 ? 0 : fd * 10) + (*p - '0');
	if (fd >= 0)
		sys3(NR_FCNTL, fd, F_SETFD, FD_CLOEXEC);
	char *file = argv[2], **cmd = argv + 3;
	if (!*file) {
		err = E_NOENT;
	} else if (has_slash(file)) {
		err = -run(file, cmd, envp);
	} else {
		static char buf[4096];
		int eacces = 0;
		const char *d = path_of(envp);
		for (;;) {
			const char *e = d;
			while (*e && *e != ':')
				e++;
			unsigned long dl = (unsigned long)(e - d), fl = 0, k = 0;
			while (file[fl])
				fl++;
			if (dl + fl + 2 <= sizeof(buf)) {
				for (; k < dl; k++)
					buf[k] = d[k];
				if (dl)
					buf[k++] = '/';
				for (unsigned long i = 0; i <= fl; i++)
					buf[k + i] = file[i];
				err = -run(buf, cmd, envp);
				if (err == E_ACCES)
					eacces = 1;
				else if (err != E_NOENT && err != E_NOTDIR && err != E_STALE &&
					 err != E_LOOP && err != E_NAMETOOLONG)
					break; /* found, but it would not run */
			}
			if (!*e) {
				if (eacces)
					err = E_ACCES;
				else if (err == E_NOTDIR || err == E_STALE || err == E_LOOP ||
					 err == E_NAMETOOLONG)
					err = E_NOENT;
				break;
			}
			d = e + 1;
		}
	}
	struct exec_msg m = { STAGE_EXEC, (int)err, 0 };
	if (fd >= 0)
		sys3(NR_WRITE, fd, (long)&m, sizeof(m));
	sys3(NR_EXIT, err == E_NOENT ? 127 : 126, 0, 0);
	__builtin_unreachable();
}
