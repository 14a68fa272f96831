// SPDX-License-Identifier: MIT
/*
 * Finding and loading NVIDIA's real driver library. Both the server (which
 * runs everything on it) and the client library (which passes calls to it
 * when no daemon is running) need it, and the client library is itself named
 * libcuda.so.1: a candidate that turns out to be an openmps client library
 * (it exports mps_driver_marker()'s symbol) is skipped, so we never load
 * ourselves.
 */
#ifndef MPS_COMMON_DRIVER_PATH_H
#define MPS_COMMON_DRIVER_PATH_H

#include <stddef.h>

/* The symbol every openmps client library exports. */
#define MPS_CLIENT_MARKER "openmps_client_library"

/* dlopen()s the driver: the file OPENMPS_DRIVER names if set (nothing else
 * is tried then), else libcuda.so.1 in LD_LIBRARY_PATH's folders, the usual
 * system folders, and the loader's own search. Returns the handle, or NULL
 * with a reason in err. Where it was found goes to path if not NULL. */
void *mps_driver_open(char *err, size_t errlen, char *path, size_t pathlen);

#endif
