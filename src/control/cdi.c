// SPDX-License-Identifier: MIT
/*
 * The CDI spec (Container Device Interface) of the daemon's devices, so a
 * container engine gives a container an openmps device by name: `podman run
 * --device openmps.io/gpu=vgpu0-1`, or a Kubernetes device plugin's
 * cdi_devices. Kind `openmps.io/gpu`; one device per GPU the daemon knows
 * (named by its ordinal and again by its UUID) and one per virtual device
 * (its name).
 *
 * What a device does to the container: the spec's own edits, made once
 * whatever devices are asked for, bind-mount the pipe directory (where the
 * daemon's socket is) and the directory of openmps's libcuda.so.1, each at
 * its host path, and set CUDA_MPS_PIPE_DIRECTORY, LD_LIBRARY_PATH (ours
 * first, then our NVML's, nvml/ in it, which answers as the devices the
 * container sees; then /usr/local/nvidia/lib and lib64, which CUDA images set, so
 * theirs goes on working) and NVIDIA_VISIBLE_DEVICES=void (NVIDIA's runtime
 * then adds neither its device nodes nor its libcuda). LD_LIBRARY_PATH is
 * searched before the loader's cache, where NVIDIA's hooks put their
 * libcuda, and a mount at a path of our own replaces nothing in the image.
 * Each device adds one variable of its own, OPENMPS_CDI_DEVICE_<UUID in
 * hex>=GPU-<UUID>, so that the devices of one container add up (an engine
 * keeps the last value of a variable two devices set); the client library
 * reads them all (common/visible.h, mps_visible_select_given). No device
 * node: a container reaches the GPU only through openmps.
 *
 * cdiVersion is 0.6.0 unless the daemon is told 0.5.0 (OPENMPS_CDI_VERSION,
 * or cdi_spec's second argument) for engines that read no later version:
 * podman before 4.7 (Debian 12's 4.3), containerd before 1.7.12, CRI-O
 * before 1.28 (each vendors CDI's Go library 0.5.x, which refuses a spec
 * of a version it does not know). 0.6.0 adds annotations, and each device
 * carries what the daemon knows of it, for device plugins and people to
 * read without asking the daemon: openmps.io/uuid (what the container's
 * client sees), openmps.io/memory-bytes (a GPU's total, a virtual device's
 * share), and for a virtual device openmps.io/gpu (its GPU's UUID) and
 * openmps.io/sms (its SMs, whole groups as the server gives them) where the
 * daemon knows its GPU's layout. No SM count for a GPU: the servers tell
 * the daemon its shares' groups, not its SMs. A 0.5.0 spec is the same
 * without the annotations, which that version does not have.
 *
 * The file is written whole to a temporary file beside it and renamed over
 * the old one, mode 0644, so an engine reading the directory never sees half
 * a spec; the temporary's name does not end in .json, which engines skip.
 * Where the daemon keeps a spec (cdi_spec, OPENMPS_CDI_SPEC) it writes it
 * again when the devices become known and whenever a virtual device is
 * defined or removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/visible.h"
#include "control/control.h"

/* The versions the spec may say: MPS_CDI_VERSION (control.h), with the
 * annotations, or the oldest with every other feature it uses. */
#define CDI_VERSION_PLAIN "0.5.0"
#define CDI_KIND "openmps.io/gpu"
#define SMI_PATH "/usr/bin/nvidia-smi"   /* openmps's nvidia-smi in the container */

/* s as a JSON string: quotes, backslashes and control bytes escaped; other
 * bytes as they are (paths and names are taken to be UTF-8). */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* The directory holding openmps's libcuda.so.1, found from the daemon's own
 * program: PREFIX/bin -> PREFIX/lib/openmps (make install), or build/bin ->
 * build/lib (the build tree). 0, or -ENOENT. */
static int find_libdir(char *out, size_t len)
{
	static const char *const rel[] = { "../lib/openmps", "../lib" };
	char self[PATH_MAX], try[PATH_MAX + 32], lib[PATH_MAX + 48];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return -ENOENT;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char real[PATH_MAX];

		snprintf(try, sizeof(try), "%s/%s", self, rel[i]);
		snprintf(lib, sizeof(lib), "%s/libcuda.so.1", try);
		if (access(lib, R_OK) == 0 && realpath(try, real) && strlen(real) < len) {
			snprintf(out, len, "%s", real);
			return 0;
		}
	}
	return -ENOENT;
}

/* What a device's annotations tell of it: figures the daemon has, 0 or
 * NULL where it has none. */
struct facts {
	const char *gpu;            /* a virtual device's GPU's UUID; NULL for a GPU */
	uint64_t mem;               /* bytes */
	int sms;
};

static void annotation(FILE *f, bool *first, const char *key, const char *value)
{
	fprintf(f, "%s\n        \"openmps.io/%s\": ", *first ? "" : ",", key);
	json_str(f, value);
	*first = false;
}

/* One device: its name, its annotations (facts NULL: none, a 0.5.0 spec),
 * and the edits it makes, its own variable. */
static void device_entry(FILE *f, bool *first, const char *name, const char *uuid, const struct facts *facts)
{
	char env[128], text[MPS_UUID_TEXT], id[MPS_UUID_TEXT + 4], num[24];
	bool first_note = true;
	uint8_t u[16];
	int k;

	if (mps_uuid_parse(uuid, u) < 0)
		return;   /* a virtual device whose GPU's UUID is not known */
	k = snprintf(env, sizeof(env), "OPENMPS_CDI_DEVICE_");
	for (int i = 0; i < 16; i++)
		k += snprintf(env + k, sizeof(env) - (size_t)k, "%02X", u[i]);
	mps_uuid_text(text, u);
	snprintf(id, sizeof(id), "GPU-%s", text);
	snprintf(env + k, sizeof(env) - (size_t)k, "=%s", id);
	fprintf(f, "%s\n    {\n      \"name\": ", *first ? "" : ",");
	json_str(f, name);
	if (facts) {
		fprintf(f, ",\n      \"annotations\": {");
		annotation(f, &first_note, "uuid", id);
		if (facts->gpu)
			annotation(f, &first_note, "gpu", facts->gpu);
		if (facts->sms > 0) {
			snprintf(num, sizeof(num), "%d", facts->sms);
			annotation(f, &first_note, "sms", num);
		}
		if (facts->mem) {
			snprintf(num, sizeof(num), "%llu", (unsigned long long)facts->mem);
			annotation(f, &first_note, "memory-bytes", num);
		}
		fprintf(f, "\n      }");
	}
	fprintf(f, ",\n      \"containerEdits\": {\n        \"env\": [");
	json_str(f, env);
	fprintf(f, "]\n      }\n    }");
	*first = false;
}

static void mount_at(FILE *f, const char *path, const char *at, const char *options, bool last)
{
	fprintf(f, "      {\n        \"hostPath\": ");
	json_str(f, path);
	fprintf(f, ",\n        \"containerPath\": ");
	json_str(f, at);
	fprintf(f, ",\n        \"type\": \"bind\",\n        \"options\": [%s]\n      }%s\n", options, last ? "" : ",");
}

static void mount_entry(FILE *f, const char *path, const char *options, bool last)
{
	mount_at(f, path, path, options, last);
}

/* The spec's text (malloc'ed, in *out), saying version (one that
 * mps_cdi_version_check takes). 0, or -errno with why. */
static int render(char **out, const char *version, char *why, size_t len)
{
	char pipe[PATH_MAX], libdir[PATH_MAX], env[2 * PATH_MAX + 96], smi[PATH_MAX + 32];
	size_t size = 0;
	bool first = true, has_smi, notes = strcmp(version, CDI_VERSION_PLAIN) != 0;
	FILE *f;

	if (!realpath(mps_daemon.pipe_dir, pipe)) {
		snprintf(why, len, "cannot resolve the pipe directory %s: %s", mps_daemon.pipe_dir, strerror(errno));
		return -errno;
	}
	if (find_libdir(libdir, sizeof(libdir)) < 0) {
		snprintf(why, len, "cannot find openmps's libcuda.so.1 beside the daemon's program "
				   "(in ../lib/openmps or ../lib)");
		return -ENOENT;
	}
	f = open_memstream(out, &size);
	if (!f) {
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	fprintf(f, "{\n  \"cdiVersion\": ");
	json_str(f, version);
	fprintf(f, ",\n  \"kind\": \"" CDI_KIND "\",\n");
	fprintf(f, "  \"containerEdits\": {\n    \"env\": [\n      ");
	snprintf(env, sizeof(env), "CUDA_MPS_PIPE_DIRECTORY=%s", pipe);
	json_str(f, env);
	fprintf(f, ",\n      ");
	snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s:%s/nvml:/usr/local/nvidia/lib:/usr/local/nvidia/lib64", libdir,
		 libdir);
	json_str(f, env);
	fprintf(f, ",\n      \"NVIDIA_VISIBLE_DEVICES=void\"\n    ],\n    \"mounts\": [\n");
	mount_entry(f, pipe, "\"rw\", \"nosuid\", \"nodev\", \"bind\"", false);
	/* openmps's nvidia-smi (src/smi) where images and scripts look for it. */
	snprintf(smi, sizeof(smi), "%s/nvml/nvidia-smi", libdir);
	has_smi = access(smi, X_OK) == 0;
	mount_entry(f, libdir, "\"ro\", \"nosuid\", \"nodev\", \"bind\"", !has_smi);
	if (has_smi)
		mount_at(f, smi, SMI_PATH, "\"ro\", \"nosuid\", \"nodev\", \"bind\"", true);
	fprintf(f, "    ]\n  },\n  \"devices\": [");
	for (int i = 0; i < mps_daemon.ndev; i++) {
		struct facts gpu = { .mem = mps_daemon.dev[i].total_mem };
		char ord[16];

		snprintf(ord, sizeof(ord), "%d", i);
		device_entry(f, &first, ord, mps_daemon.dev[i].uuid, notes ? &gpu : NULL);
		device_entry(f, &first, mps_daemon.dev[i].uuid, mps_daemon.dev[i].uuid, notes ? &gpu : NULL);
	}
	for (int i = 0; i < mps_daemon.nvdev; i++) {
		const struct mps_vdevice *v = &mps_daemon.vdev[i];
		int ord = mps_device_ordinal(v->dev);
		struct facts slice = { .gpu = ord >= 0 && ord < mps_daemon.ndev ? mps_daemon.dev[ord].uuid : NULL,
				       .mem = mps_vdevice_mem(v), .sms = mps_vdevice_sms(v) };
		char uuid[48];

		mps_vdevice_uuid(v, uuid, sizeof(uuid));
		device_entry(f, &first, v->name, uuid, notes ? &slice : NULL);
	}
	fprintf(f, "\n  ]\n}\n");
	if (first) {
		fclose(f);
		free(*out);
		*out = NULL;
		snprintf(why, len, "the daemon knows no device to describe");
		return -ENODEV;
	}
	if (fclose(f) != 0 || !*out) {
		free(*out);
		*out = NULL;
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int mps_cdi_path_check(const char *path, char *why, size_t len)
{
	size_t n = strlen(path);

	if (path[0] != '/') {
		snprintf(why, len, "the CDI spec's path must be absolute: %s", path);
		return -EINVAL;
	}
	if (n >= sizeof(mps_daemon.cdi_path) - 8) {
		snprintf(why, len, "the CDI spec's path is too long (%zu bytes)", n);
		return -ENAMETOOLONG;
	}
	if (n < 6 || strcmp(path + n - 5, ".json") || path[n - 6] == '/') {
		snprintf(why, len, "the CDI spec's file name must end in .json (container engines read no other): %s",
			 path);
		return -EINVAL;
	}
	return 0;
}

int mps_cdi_version_check(const char *version, char *why, size_t len)
{
	if (!strcmp(version, MPS_CDI_VERSION) || !strcmp(version, CDI_VERSION_PLAIN))
		return 0;
	snprintf(why, len, "the CDI spec's version must be " MPS_CDI_VERSION " (the default) or " CDI_VERSION_PLAIN
			   " (engines that read none later: podman before 4.7, containerd before 1.7.12, CRI-O "
			   "before 1.28), not '%s'", version);
	return -EINVAL;
}

int mps_cdi_write(const char *path, const char *version, char *why, size_t len)
{
	char tmp[sizeof(mps_daemon.cdi_path) + 8], dir[sizeof(mps_daemon.cdi_path)];
	char *text = NULL, *slash;
	size_t n, done = 0;
	int fd, r;

	r = mps_cdi_path_check(path, why, len);
	if (r == 0)
		r = mps_cdi_version_check(version, why, len);
	if (r < 0)
		return r;
	r = render(&text, version, why, len);
	if (r < 0)
		return r;
	/* The directory engines read may not be there yet (/var/run/cdi). */
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			snprintf(why, len, "cannot write the CDI spec %s: %s", path, strerror(-r));
			goto free_text;
		}
	}
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(why, len, "cannot write the CDI spec %s: %s", path, strerror(-r));
		goto free_text;
	}
	n = strlen(text);
	while (done < n) {
		ssize_t w = write(fd, text + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r = w < 0 ? -errno : -EIO;
			goto unlink_tmp;
		}
		done += (size_t)w;
	}
	if (fchmod(fd, 0644) < 0 || fsync(fd) < 0) {
		r = -errno;
		goto unlink_tmp;
	}
	if (close(fd) < 0) {
		fd = -1;
		r = -errno;
		goto unlink_tmp;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		r = -errno;
		goto unlink_tmp;
	}
	free(text);
	return 0;

unlink_tmp:
	snprintf(why, len, "cannot write the CDI spec %s: %s", path, strerror(-r));
	if (fd >= 0)
		close(fd);
	unlink(tmp);
free_text:
	free(text);
	return r;
}

void mps_cdi_refresh(void)
{
	char why[PATH_MAX + 128];

	if (!mps_daemon.cdi_path[0] || !mps_daemon.devices_known)
		return;
	if (mps_cdi_write(mps_daemon.cdi_path, mps_daemon.cdi_version, why, sizeof(why)) < 0)
		mps_log_error("%s", why);
	else
		mps_log_info("CDI spec %s written to %s (%d devices, %d virtual devices)", mps_daemon.cdi_version,
			     mps_daemon.cdi_path, mps_daemon.ndev, mps_daemon.nvdev);
}
