// SPDX-License-Identifier: MIT
//
// What the real driver's own export-table functions need, for the tables
// the client library serves with them (src/client/exports/driver.c): the
// client process has the driver loaded and initialised but no context of
// its own. Prints one "probe:" line per question:
//
//   dlopen    how long loading the driver takes;
//   cuInit    how long initialising it takes;
//   1734dc26  whether slot 4 (two per-TPC maps) answers before cuInit,
//             after cuInit with no context, and with a context, and
//             whether the maps begin the same each way;
//   tables    the size of each table the client asks the driver for;
//   binding   whether the driver binds references to its own cu* functions
//             within itself (linked -Bsymbolic, or no such references): in
//             a client the openmps library, loaded first, exports the same
//             names, and an unbound reference would land in it.
//
// Each call that might crash runs in a child process. Exit 0 when the driver
// loads and initialises, whatever the answers.
//
//   cc -O2 -std=c11 -D_GNU_SOURCE -I/usr/local/cuda/include -o exports_probe tests/gpu/exports_probe.c -ldl
//   ./exports_probe /usr/local/nvidia/lib64/libcuda.so.1
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

static CUresult (*p_init)(unsigned int);
static CUresult (*p_export)(const void **, const CUuuid *);
static CUresult (*p_device_get)(CUdevice *, int);
static CUresult (*p_retain)(CUcontext *, CUdevice);
static CUresult (*p_set_current)(CUcontext);
static CUresult (*p_attr)(int *, CUdevice_attribute, CUdevice);

static const uint8_t ID_1734[16] = { 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45,
				     0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca };
static const uint8_t ID_69A2[16] = { 0x69, 0xa2, 0x8e, 0x9f, 0x24, 0x49, 0x8b, 0x47,
				     0xb0, 0x30, 0xc5, 0xda, 0x33, 0x0e, 0xa4, 0xe9 };
static const uint8_t ID_DA91[16] = { 0xda, 0x91, 0x51, 0xd3, 0x3a, 0xe6, 0xcc, 0x41,
				     0xa5, 0xc0, 0x4f, 0x26, 0xd5, 0x33, 0xe3, 0x28 };

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const void *const *table(const uint8_t id[16], CUresult *rc)
{
	const void *t = NULL;
	CUuuid u;

	memcpy(u.bytes, id, 16);
	*rc = p_export(&t, &u);
	return *rc == CUDA_SUCCESS ? t : NULL;
}

#define CMP_BYTES 16   /* of each map: fewer than the driver's maps hold */

/* Calls 1734dc26[4] then [13]; prints what it got. When [4] succeeds, the
 * maps' first CMP_BYTES bytes each go to the pipe fd, for comparing. */
static void maps(const char *when, int fd)
{
	typedef CUresult (*maps_fn)(uint8_t **, uint8_t **);
	typedef CUresult (*free_fn)(uint8_t *, uint8_t *);
	const void *const *t;
	uint8_t *a = NULL, *b = NULL, buf[2 * CMP_BYTES];
	CUresult rc;

	t = table(ID_1734, &rc);
	if (!t) {
		printf("probe: 1734dc26 %s: cuGetExportTable returned %d\n", when, (int)rc);
		return;
	}
	rc = ((maps_fn)(uintptr_t)t[4])(&a, &b);
	printf("probe: 1734dc26 %s: slot 4 returned %d", when, (int)rc);
	if (rc == CUDA_SUCCESS && a && b) {
		printf("; a:");
		for (int i = 0; i < CMP_BYTES; i++)
			printf("%s%u", i ? "," : " ", a[i]);
		printf(" b:");
		for (int i = 0; i < CMP_BYTES; i++)
			printf("%s%u", i ? "," : " ", b[i]);
		memcpy(buf, a, CMP_BYTES);
		memcpy(buf + CMP_BYTES, b, CMP_BYTES);
		rc = ((free_fn)(uintptr_t)t[13])(a, b);
		printf("; slot 13 returned %d", (int)rc);
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			perror("write");
	}
	printf("\n");
	fflush(stdout);
}

/* Runs maps() in a child; 1 and the first bytes in out if [4] succeeded. */
static int maps_in_child(const char *when, int init, int ctx, uint8_t out[2 * CMP_BYTES])
{
	int p[2], status = 0;
	pid_t pid;

	if (pipe(p) < 0)
		return 0;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (init && p_init(0) != CUDA_SUCCESS)
			_exit(2);
		if (ctx) {
			CUdevice d;
			CUcontext c;

			if (p_device_get(&d, 0) || p_retain(&c, d) || p_set_current(c))
				_exit(3);
		}
		maps(when, p[1]);
		_exit(0);
	}
	close(p[1]);
	ssize_t n = read(p[0], out, 2 * CMP_BYTES);
	close(p[0]);
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		printf("probe: 1734dc26 %s: the process %s %d\n", when, WIFSIGNALED(status) ? "died of signal" : "exited",
		       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		return 0;
	}
	return n == 2 * CMP_BYTES;
}

/* Counts the driver's relocations that name a cu* symbol it defines itself
 * and that the dynamic linker resolves by name (so the global scope, where
 * another libcuda.so.1 may come first, wins). */
static void binding(void *h)
{
	struct link_map *lm = NULL;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Rela) *rel[2] = { NULL, NULL };
	size_t relsz[2] = { 0, 0 };
	int symbolic = 0, count = 0;
	char first[256] = "";

	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm) {
		printf("probe: binding: dlinfo failed\n");
		return;
	}
#define ADDR(v) ((uintptr_t)(v) < lm->l_addr ? lm->l_addr + (uintptr_t)(v) : (uintptr_t)(v))
	for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: symtab = (const void *)ADDR(d->d_un.d_ptr); break;
		case DT_STRTAB: strtab = (const void *)ADDR(d->d_un.d_ptr); break;
		case DT_RELA: rel[0] = (const void *)ADDR(d->d_un.d_ptr); break;
		case DT_RELASZ: relsz[0] = d->d_un.d_val; break;
		case DT_JMPREL: rel[1] = (const void *)ADDR(d->d_un.d_ptr); break;
		case DT_PLTRELSZ: relsz[1] = d->d_un.d_val; break;
		case DT_SYMBOLIC: symbolic = 1; break;
		case DT_FLAGS: symbolic |= (d->d_un.d_val & DF_SYMBOLIC) != 0; break;
		}
	}
#undef ADDR
	for (int k = 0; k < 2 && symtab && strtab; k++) {
		for (size_t i = 0; rel[k] && i < relsz[k] / sizeof(ElfW(Rela)); i++) {
			const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rel[k][i].r_info)];
			const char *name = strtab + sym->st_name;

			if (!ELF64_R_SYM(rel[k][i].r_info) || sym->st_shndx == SHN_UNDEF || strncmp(name, "cu", 2))
				continue;
			if (!count++)
				snprintf(first, sizeof(first), "%s", name);
		}
	}
	printf("probe: binding: DF_SYMBOLIC %s; %d relocations name a cu* function the driver defines%s%s\n",
	       symbolic ? "set" : "not set", count, count ? ", the first " : "", first);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/usr/local/nvidia/lib64/libcuda.so.1";
	uint8_t noctx[2 * CMP_BYTES], withctx[2 * CMP_BYTES];
	int have_noctx, have_ctx, sms = 0;
	CUdevice d;
	double t0;
	void *h;
	CUresult rc;

	t0 = now_ms();
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("probe: dlopen %s failed: %s\n", path, dlerror());
		return 1;
	}
	printf("probe: dlopen %s took %.1f ms\n", path, now_ms() - t0);
	p_init = (CUresult(*)(unsigned int))dlsym(h, "cuInit");
	p_export = (CUresult(*)(const void **, const CUuuid *))dlsym(h, "cuGetExportTable");
	p_device_get = (CUresult(*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
	p_retain = (CUresult(*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
	p_set_current = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
	p_attr = (CUresult(*)(int *, CUdevice_attribute, CUdevice))dlsym(h, "cuDeviceGetAttribute");
	if (!p_init || !p_export || !p_device_get || !p_retain || !p_set_current || !p_attr) {
		printf("probe: the driver lacks a function this probe uses\n");
		return 1;
	}
	binding(h);

	maps_in_child("before cuInit", 0, 0, noctx);
	have_noctx = maps_in_child("after cuInit, no context", 1, 0, noctx);
	have_ctx = maps_in_child("with a context", 1, 1, withctx);
	if (have_noctx && have_ctx)
		printf("probe: 1734dc26 maps without and with a context are %s\n",
		       memcmp(noctx, withctx, sizeof(noctx)) ? "different" : "the same (first 16 bytes each)");

	t0 = now_ms();
	rc = p_init(0);
	printf("probe: cuInit returned %d and took %.1f ms\n", (int)rc, now_ms() - t0);
	if (rc != CUDA_SUCCESS)
		return 1;
	if (p_device_get(&d, 0) == CUDA_SUCCESS &&
	    p_attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d) == CUDA_SUCCESS)
		printf("probe: device 0 has %d SMs\n", sms);
	const struct {
		const uint8_t *id;
		const char *name;
	} ids[] = { { ID_1734, "1734dc26" }, { ID_69A2, "69a28e9f" }, { ID_DA91, "da9151d3" } };
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		const void *const *t = table(ids[i].id, &rc);

		printf("probe: table %s: rc %d, %zu bytes\n", ids[i].name, (int)rc, t ? (size_t)(uintptr_t)t[0] : 0);
	}
	return 0;
}
