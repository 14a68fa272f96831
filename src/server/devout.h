// SPDX-License-Identifier: MIT
/*
 * What kernels print (device printf, failed device asserts): the driver
 * writes it to the server's stdout and stderr, which become pipes kept for
 * the clients whose modules print (devout.c; the op is MPS_OP_DEVOUT).
 */
#ifndef MPS_SERVER_DEVOUT_H
#define MPS_SERVER_DEVOUT_H

struct mps_client;

/* Takes over stdout and stderr (the log moves to another descriptor) and
 * starts the thread that drains them: 0, or -1 with them left as they were
 * and a warning logged. Early in main, before the driver is loaded. */
int mps_devout_init(void);

/* A client that printed leaves: with no one left to take it, what is
 * queued goes to the log. */
void mps_devout_client_gone(struct mps_client *c);

/* A GPU fault ends every client: what the kernels printed up to it (a
 * failed assert's message among it) is gathered (mps_devout_fault), sent
 * to each client whose work was running, ahead of the refusal that ends it
 * (mps_devout_fault_send, on its socket, never waiting: what is queued,
 * after what went to the log since since_ns), then written to the log
 * (mps_devout_fault_log). */
void mps_devout_fault(void);
void mps_devout_fault_send(struct mps_client *c, uint64_t since_ns);
void mps_devout_fault_log(void);

/* From a fatal signal's handler: what the pipes still hold, raw, to fd
 * (only read(2) and write(2)). */
void mps_devout_crash(int fd);

#endif
