// SPDX-License-Identifier: MIT
/*
 * See driver_path.h.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/driver_path.h"

static const char *const system_dirs[] = {
	"/usr/local/nvidia/lib64",
	"/usr/local/nvidia/lib",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/usr/lib",
	"/lib/x86_64-linux-gnu",
	"/lib64",
	"/usr/lib/wsl/lib",
};

/* Loads one candidate; NULL if it is missing or is an openmps library. */
static void *try_open(const char *file, char *path, size_t pathlen)
{
	void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		return NULL;
	if (dlsym(h, MPS_CLIENT_MARKER)) {
		dlclose(h);
		return NULL;
	}
	if (path)
		snprintf(path, pathlen, "%s", file);
	return h;
}

static void *try_dir(const char *dir, size_t len, char *path, size_t pathlen)
{
	char file[4096];

	if (len == 0 || len + sizeof("/libcuda.so.1") > sizeof(file))
		return NULL;
	memcpy(file, dir, len);
	strcpy(file + len, "/libcuda.so.1");
	if (access(file, R_OK) != 0)
		return NULL;
	return try_open(file, path, pathlen);
}

void *mps_driver_open(char *err, size_t errlen, char *path, size_t pathlen)
{
	const char *forced = getenv("OPENMPS_DRIVER");
	const char *llp = getenv("LD_LIBRARY_PATH");
	void *h;

	if (forced && *forced) {
		h = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			snprintf(err, errlen, "cannot load OPENMPS_DRIVER=%s: %s", forced, dlerror());
			return NULL;
		}
		if (dlsym(h, MPS_CLIENT_MARKER)) {
			dlclose(h);
			snprintf(err, errlen, "OPENMPS_DRIVER=%s is an openmps client library, not a driver", forced);
			return NULL;
		}
		if (path)
			snprintf(path, pathlen, "%s", forced);
		return h;
	}
	while (llp && *llp) {
		size_t len = strcspn(llp, ":");

		h = try_dir(llp, len, path, pathlen);
		if (h)
			return h;
		llp += len + (llp[len] == ':');
	}
	for (size_t i = 0; i < sizeof(system_dirs) / sizeof(system_dirs[0]); i++) {
		h = try_dir(system_dirs[i], strlen(system_dirs[i]), path, pathlen);
		if (h)
			return h;
	}
	h = try_open("libcuda.so.1", path, pathlen);
	if (h)
		return h;
	snprintf(err, errlen, "no CUDA driver (libcuda.so.1) found; set OPENMPS_DRIVER");
	return NULL;
}
