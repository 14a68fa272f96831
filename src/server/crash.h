// SPDX-License-Identifier: MIT
/*
 * What the server leaves in server.log if it ever crashes: the signal, the
 * faulting address, the client whose work the crashing thread was doing,
 * and a backtrace. Every server thread gets its own signal stack, so even a
 * stack overflow is reported.
 */
#ifndef MPS_SERVER_CRASH_H
#define MPS_SERVER_CRASH_H

#include <sys/types.h>

/* 1 in a build under AddressSanitizer or ThreadSanitizer, whose runtime
 * owns the fatal signals and writes its reports to stderr. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* Installs the handlers (once, in main). */
void mps_crash_install(void);

/* Gives the calling thread its signal stack and names the client it works
 * for (0: none). Call at the start of every server thread. */
void mps_crash_thread(pid_t client);

/* Names the client whose work the calling thread does from now on (a
 * service thread, each time it takes a client). */
void mps_crash_client(pid_t client);

#endif
