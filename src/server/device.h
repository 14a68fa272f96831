// SPDX-License-Identifier: MIT
/*
 * The server's devices (see device.c).
 */
#ifndef MPS_SERVER_DEVICE_H
#define MPS_SERVER_DEVICE_H

/* cuInit, every device's identity and attributes into mps_srv.dev, and each
 * device's primary context retained: 0, or -ENODEV with the reason logged
 * and in why. */
int mps_devices_init(char *why, size_t size);

/* Releases the primary contexts. */
void mps_devices_release(void);

#endif
