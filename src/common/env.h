// SPDX-License-Identifier: MIT
/*
 * Numbers from the environment, read one way everywhere: a whole decimal
 * number within bounds, or the default with a warning that names the
 * variable, what it held and what it may hold.
 */
#ifndef OPENMPS_COMMON_ENV_H
#define OPENMPS_COMMON_ENV_H

/* $name as a number from lo to hi; `def` when it is unset or empty, and,
 * with a warning, when it is not such a number. */
long mps_env_long(const char *name, long def, long lo, long hi);

#endif
