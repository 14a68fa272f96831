// SPDX-License-Identifier: MIT
/*
 * See shm.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/shm.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

int mps_shm_create(const char *name, size_t size)
{
	int fd, r;

	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0)
		goto err;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto err;
	return fd;
err:
	r = -errno;
	close(fd);
	return r;
}

void *mps_shm_map(int fd, size_t size, void *hint)
{
	int flags = MAP_SHARED | (hint ? MAP_FIXED_NOREPLACE : 0);
	void *p = mmap(hint, size, PROT_READ | PROT_WRITE, flags, fd, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (hint && p != hint) {
		/* Old kernels ignore MAP_FIXED_NOREPLACE and treat it as a hint. */
		munmap(p, size);
		errno = EEXIST;
		return NULL;
	}
	return p;
}

long long mps_shm_sealed_size(int fd)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0)
		return -errno;
	if (!(seals & F_SEAL_SHRINK))
		return -EPERM;
	if (fstat(fd, &st) < 0)
		return -errno;
	return (long long)st.st_size;
}
