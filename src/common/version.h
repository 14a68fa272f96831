// SPDX-License-Identifier: MIT
/*
 * The release, as the binaries report it (--version) and the build and the
 * man pages take it (the Makefile reads the string from here).
 */
#ifndef MPS_COMMON_VERSION_H
#define MPS_COMMON_VERSION_H

#define OPENMPS_VERSION "0.6.0"

#endif
