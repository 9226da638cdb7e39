/* What the libFuzzer harnesses share: invariant checks that abort, inputs as strings, and a
 * scratch directory for the code that reads files. Each tests/fuzz/fuzz_*.c is one binary. */
#ifndef SBX_TESTS_FUZZ_FUZZ_H
#define SBX_TESTS_FUZZ_FUZZ_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* an invariant that failed is a crash libFuzzer keeps the input of */
#define FUZZ_CHECK(cond, ...)                                                                  \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "fuzz: %s:%d: check failed: %s: ", __FILE__, __LINE__, \
				#cond);                                                        \
			fprintf(stderr, __VA_ARGS__);                                          \
			fputc('\n', stderr);                                                   \
			abort();                                                               \
		}                                                                              \
	} while (0)

/* the input as a NUL-terminated string (what a reader of a file or a header gets) */
static inline char *fuzz_str(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1);
	memcpy(s, data, size);
	s[size] = 0;
	return s;
}

/* a directory of this process's own under $TMPDIR, made once, removed at exit */
static char fuzz_dir_path[256];

static inline void fuzz_dir_remove(void)
{
	if (fuzz_dir_path[0])
		(void)sbx_rm_rf(fuzz_dir_path);
}

static inline const char *fuzz_dir(void)
{
	if (!fuzz_dir_path[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/sbx-fuzz.XXXXXX",
			 t && *t ? t : "/tmp");
		if (!mkdtemp(fuzz_dir_path)) {
			perror("fuzz: mkdtemp");
			abort();
		}
		atexit(fuzz_dir_remove);
	}
	return fuzz_dir_path;
}

/* DIR/NAME holds exactly data (made, or replaced); data NULL: DIR/NAME is absent */
static inline void fuzz_file(const char *dir, const char *name, const void *data, size_t n)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (!data) {
		(void)unlink(p);
		return;
	}
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || sbx_write_all(fd, data, n) < 0 || close(fd) < 0) {
		perror(p);
		abort();
	}
}

/* splits the input at each "\n----\n" into up to max parts; the count found */
static inline size_t fuzz_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len,
				size_t max)
{
	static const char sep[] = "\n----\n";
	size_t n = 0, start = 0;

	for (size_t i = 0; n + 1 < max && i + sizeof(sep) - 1 <= size; i++) {
		if (memcmp(data + i, sep, sizeof(sep) - 1) != 0)
			continue;
		part[n] = data + start;
		len[n++] = i - start;
		start = i + sizeof(sep) - 1;
		i = start - 1;
	}
	part[n] = data + start;
	len[n++] = size - start;
	return n;
}

/* text printed to a terminal: no C0 control but newline, no DEL, no C1, valid UTF-8 */
static inline const char *fuzz_term_unsafe(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		if (p[i] == '\n') {
			i++;
			continue;
		}
		if (p[i] < 0x20 || p[i] == 0x7f)
			return "a control character";
		size_t l = sbx_utf8_seq_len(p + i, n - i);
		if (!l)
			return "invalid UTF-8";
		if (l == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0)
			return "a C1 control";
		i += l;
	}
	return NULL;
}

#endif
