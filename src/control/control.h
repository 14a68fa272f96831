// SPDX-License-Identifier: MIT
/*
 * openmps-control's shared declarations: the daemon's state (its sockets,
 * the servers it started, the settings it hands them) and the functions its
 * files provide each other. The daemon is one thread around one epoll loop;
 * nothing here is locked.
 *
 * Files: main.c (command line and modes), daemon.c (set-up, files, the event
 * loop), conn.c (connections: telling CUDA clients from control UIs, reading
 * commands, sending replies, replies that wait for a server), servers.c
 * (server lifecycle: start, follow their state, stop them), routing.c (which
 * server a client goes to: pending clients, the exclusive and multi-user
 * modes; routing.h joins the two), settings.c (the values the setters
 * take: parsing, showing, handing them to servers), commands.c (the control
 * language and who may use what), listings.c (ps, get_device_client_list,
 * device_query), cdi.c (the CDI spec of the devices), ui.c (the
 * stdin-to-daemon client that `openmps-control` with no flag is).
 */
#ifndef MPS_CONTROL_CONTROL_H
#define MPS_CONTROL_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/channel.h"
#include "common/memvalue.h"
#include "common/reply.h"
#include "common/wire.h"

#define MPS_CMD_MAX         1024        /* longest command line */
#define MPS_PRIV_SOCKET     "openmps-privileged.sock"
#define MPS_MEMLIMITS_MAX   32          /* pinned memory limits kept per setting set */

/* A reply on the daemon's socket is the reply's text, in packets
 * (common/reply.h); an error's starts with "Error". */

enum mps_server_state {
	MPS_SERVER_INITIALIZING = 0,
	MPS_SERVER_ACTIVE,
	MPS_SERVER_FAULT,
	MPS_SERVER_STOPPING,
};

/* A server's key besides its user: a fault domain's name, and for clients
 * in another network namespace than the daemon's, that namespace. */
#define MPS_DOMAIN_KEY 112

/* A CUDA client's connection not yet handed to a server. */
struct mps_pending_client {
	struct mps_pending_client *next;
	int fd;
	pid_t pid;
	uid_t uid;
	char comm[64];
	char domain[MPS_DOMAIN_KEY];  /* its fault domain and trust scope (routing.c) */
};

/* A client a server reported connected. */
struct mps_server_client {
	struct mps_server_client *next;
	pid_t pid;
	uid_t uid;
	uint32_t id;                /* its id on the server ("Context ID") */
	uint64_t devmask;           /* devices it made contexts on */
	char comm[64];
};

struct mps_memlimit {
	char dev[64];               /* ordinal, or a UUID as given (upper-cased prefix) */
	uint64_t bytes;             /* 0: no limit */
};

/* What a server hands its new clients. */
struct mps_settings {
	int thread_pct;             /* active thread percentage, hundredths (1..10000) */
	int priority;               /* 0 normal, 1 below normal */
	int nmem;
	struct mps_memlimit mem[MPS_MEMLIMITS_MAX];
};

/* An SM partition: SMs of one device that only its clients use (the
 * server chooses which, in whole groups). */
#define MPS_PARTITIONS_MAX 32
#define MPS_PARTITION_NAME 32
struct mps_partition {
	char name[MPS_PARTITION_NAME];
	char dev[64];               /* as mps_parse_device gives it */
	int sms;
	bool lend;                  /* its SMs serve other clients while it has none */
};

/* A virtual device: a slice of one GPU (SMs as a partition of its own, a
 * memory limit, a UUID made from the GPU's and the name). */
#define MPS_VDEVICES_MAX 16
struct mps_vdevice {
	char name[MPS_PARTITION_NAME];
	char dev[64];
	int sms;                    /* 0: a 1/parts slice */
	int parts;
	uint64_t mem;
};

struct mps_device_info {
	char uuid[64];
	char name[256];
	uint64_t total_mem;
	int sm_groups;              /* groups SM partitions and virtual devices take (0: no shares) */
	int group_sms;              /* SMs in a group */
	uint64_t failures;          /* servers failed that had it: a GPU fault there, a crash, a kill */
};

/* What an epoll tag points at: each struct so tagged starts with its kind. */
enum { MPS_TAG_CONN = 1, MPS_TAG_SERVER, MPS_TAG_OTHER };

enum mps_stop {
	MPS_STOP_NONE = 0,
	MPS_STOP_DRAIN,             /* exit once its clients have left */
	MPS_STOP_FORCE,             /* disconnect everyone now */
};

struct mps_server_rec {
	int tag;                    /* MPS_TAG_SERVER */
	struct mps_server_rec *next;
	pid_t pid;
	uid_t uid;
	int chan;                   /* our end of its channel; -1 once it is gone */
	enum mps_server_state state;
	enum mps_stop stop;         /* how it was asked to stop */
	bool stop_sent;             /* the DRAIN or QUIT went out */
	uint64_t kill_at;           /* QUIT sent: SIGKILL if still there then (ms) */
	bool ready;                 /* it reported READY */
	bool probe;                 /* started only to learn the devices */
	bool reaped;                /* waitpid() has collected it: its pid may be reused */
	bool failed;                /* counted in mps_daemon.server_failures */
	bool chan_full;             /* the channel's buffer is full: clients wait in pending */
	struct mps_pending_client *pending, **pending_tail;
	struct mps_server_client *clients;
	struct mps_settings settings;
	char domain[MPS_DOMAIN_KEY];  /* the fault domain and trust scope it serves ("": the default) */
};

struct mps_daemon {
	const char *pipe_dir;
	const char *log_dir;
	char sock_path[4096];
	char priv_path[4096];
	char pid_path[4096];
	char lock_path[4096];
	int lock_fd;
	int listen_fd;
	int priv_fd;                /* the privileged socket; -1 unless running as root */
	int epfd;
	int spare_fd;               /* given up to accept-and-close when out of fds */
	bool foreground;
	bool multiuser;             /* -multiuser-server: one root server for every uid */
	bool exclusive;             /* one user's server at a time, as NVIDIA's daemon */
	bool quitting;
	uint64_t quit_deadline;     /* quit -t: when to force (ms, monotonic); 0: none */
	struct mps_server_rec *servers;         /* in start order */
	struct mps_pending_client *waiting, **waiting_tail; /* exclusive mode: other users */
	struct mps_settings defaults;
	struct mps_partition part[MPS_PARTITIONS_MAX];   /* every server's */
	int npart;
	struct mps_vdevice vdev[MPS_VDEVICES_MAX];       /* every server's */
	int nvdev;
	char default_domain[32];    /* the fault domain of clients that name none ("": shared) */
	bool share_namespaces;      /* clients of other network namespaces may share servers (routing.c) */
	char own_netns[32];         /* the daemon's network namespace, as /proc shows it */
	bool devices_known;
	int ndev;
	struct mps_device_info dev[MPS_MAX_DEVICES];
	uint32_t next_req;
	char server_exe[4096];
	int server_log_fd;          /* server.log, inherited as the servers' stderr */
	char cdi_path[4096];        /* the CDI spec the daemon keeps up to date ("": none; cdi.c) */
	char cdi_version[8];        /* its cdiVersion (OPENMPS_CDI_VERSION, cdi_spec; MPS_CDI_VERSION) */
	uint64_t server_failures;   /* servers that reported a GPU fault, or ended while not asked to stop */
};

extern struct mps_daemon mps_daemon;

/* A command being run: who asked, and its reply. A command that must wait
 * for a server (terminate_client, device_query before any server) sets wait
 * and done and returns; done() then makes the reply from the server's answer
 * (answer NULL and failure set when the server went away or took too long). */
enum mps_wait {
	MPS_WAIT_NONE = 0,
	MPS_WAIT_REPLY,             /* a REPLY packet numbered wait_req from wait_server */
	MPS_WAIT_DEVICES,           /* the device list */
	MPS_WAIT_READY,             /* wait_server to report READY */
	MPS_WAIT_REPLIES,           /* a REPLY numbered wait_req from each of wait_pids */
};

#define MPS_WAIT_SERVERS_MAX 64

struct mps_cmd {
	uid_t uid;                  /* the caller, from SO_PEERCRED */
	bool privileged;            /* came through the privileged socket as root */
	bool foreign;               /* from another PID namespace than the daemon's */
	unsigned long long pidns;   /* then: the inode of its PID namespace (0: unknown; pidview.c) */
	char *out;                  /* the reply text (grows up to MPS_REPLY_CAP) */
	size_t outlen, outused;     /* its buffer's size, and the text's length */
	bool cut;                   /* it reached MPS_REPLY_CAP: nothing more is added */
	enum mps_wait wait;
	pid_t wait_server;
	uint32_t wait_req;
	uint32_t wait_ms;           /* how long to wait */
	void (*done)(struct mps_cmd *cmd, const struct mps_chan *answer, const char *failure);
	/* MPS_WAIT_REPLIES: the servers still to answer; each answer (or the
	 * server's end: answer NULL, failure why) goes to partial, with the
	 * fd that came with it (-1: none; partial closes it); done comes last. */
	pid_t wait_pids[MPS_WAIT_SERVERS_MAX];
	int nwait;
	void (*partial)(struct mps_cmd *cmd, const struct mps_chan *answer, int fd, const char *failure);
	char *acc;                  /* what partial gathered (malloc'ed; freed with the command) */
	size_t acc_len;
};

/* daemon.c */
int mps_daemon_run(bool foreground);
void mps_daemon_watch(int fd, void *tag, uint32_t events);
void mps_daemon_unwatch(int fd);
uint64_t mps_now_ms(void);

/* conn.c */
void mps_conn_accept(int lfd, bool privileged);
void mps_conn_event(void *conn, uint32_t events);
/* A server answered request req. */
void mps_conn_answer(pid_t server, const struct mps_chan *m, int fd);
/* A server is gone: every command waiting on it fails with why. */
void mps_conn_server_gone(pid_t server, const char *why);
/* The device list became known (or cannot be: why). */
void mps_conn_devices(const char *why);
/* Server `server` is serving: commands waiting for that are answered. */
void mps_conn_ready(pid_t server);
/* Fails waits past their time; returns ms until the next one is due (-1: none). */
int mps_conn_tick(void);
void mps_conn_close_all(void);
/* Frees the connections closed during this turn of the event loop. */
void mps_conn_collect(void);

/* servers.c */
struct mps_server_rec *mps_server_for_uid(uid_t uid);
/* A server's key as ps -v and get_metrics show it: "shared" for the
 * default domain, the rest as it is, any byte but a letter, digit or one
 * of _.:@[]+=- (names come from clients) as '_'. */
void mps_domain_label(const char *key, char *out, size_t size);

/* The server of a fault domain of uid's (domain "": the default one). */
struct mps_server_rec *mps_server_for(uid_t uid, const char *domain);
struct mps_server_rec *mps_server_by_pid(pid_t pid);
int mps_server_start(uid_t uid, struct mps_server_rec **out);
/* Hands every running server the reopened server.log. */
void mps_servers_send_log(void);
/* Takes a CUDA client's connection to its user's server, starting the
 * server if there is none; queues it while the server starts (or, in
 * exclusive mode, while another user's server runs); refuses it if none of
 * that can be done. */
void mps_server_route_client(int fd, const struct ucred *cred, const struct mps_hello *h);
void mps_server_channel_event(struct mps_server_rec *s, uint32_t events);
void mps_server_reaped(pid_t pid, int status);
/* Frees the servers reaped during this turn of the event loop. */
void mps_servers_collect(void);
/* Asks a server to stop: DRAIN (when its clients have left) or FORCE. */
void mps_server_stop(struct mps_server_rec *s, enum mps_stop how);
void mps_servers_stop_all(enum mps_stop how);
int mps_servers_running(void);
const char *mps_server_state_name(enum mps_server_state st);
/* Sends one packet to a server. 0 or -errno. */
int mps_server_send(struct mps_server_rec *s, struct mps_chan *m);
/* Starts a server only to learn the devices, unless one is on its way. */
int mps_servers_probe_devices(void);
/* Called every loop turn: forces the servers at quit -t's deadline, kills
 * servers that ignored a QUIT. Returns ms until it is next needed (-1: not). */
int mps_servers_tick(void);

/* settings.c */
void mps_settings_init(struct mps_settings *s);
/* Reads CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
 * into the defaults. Returns 0, or -EINVAL with why filled in. */
int mps_settings_from_env(struct mps_settings *s, char *why, size_t whylen);
/* Parsers: 0 or -EINVAL. A percentage is a plain decimal number from
 * 0.01 to 100, kept in hundredths. */
int mps_parse_percentage(const char *text, int *hundredths);
int mps_parse_priority(const char *text, int *prio);
/* Checks and normalises a device given as ordinal or UUID into out. */
int mps_parse_device(const char *text, char *out, size_t outlen);
void mps_format_percentage(char *buf, size_t len, int hundredths);
void mps_format_mem_value(char *buf, size_t len, uint64_t bytes);
/* The limit for a device (0 if none), and setting one. */
uint64_t mps_settings_memlimit(const struct mps_settings *s, const char *dev);
int mps_settings_set_memlimit(struct mps_settings *s, const char *dev, uint64_t bytes);
/* Hands settings to a server: all of them, or one kind. */
void mps_settings_send_all(struct mps_server_rec *srv);
/* SM partitions (every server has them all): defined or redefined, removed
 * (-ENOENT if there is none of that name), sent. A name is letters, digits,
 * '-' and '_' (-EINVAL otherwise); -ENOSPC when the list is full. */
int mps_partition_set(const char *name, const char *dev, int sms, bool lend);
int mps_partition_remove(const char *name);
bool mps_partition_name_ok(const char *name);
void mps_partition_send(struct mps_server_rec *srv, const struct mps_partition *p, bool remove);
/* Virtual devices, as partitions (their names are partition names too). */
int mps_vdevice_set(const struct mps_vdevice *v);
/* Whether `name` (an SM partition's or a virtual device's, being defined or
 * redefined) fits on its device beside the others there: SMS SMs and `mem`
 * bytes (virtual devices). 0, or -ENOSPC with why in `why`. A device whose
 * layout the daemon does not know passes. */
int mps_layout_check(const char *name, const char *dev, int sms, uint64_t mem, char *why, size_t len);
/* Whether `vdevice split DEV N` fits: N slices of whole groups, and nothing
 * else on the device but the slices it redefines. */
int mps_layout_check_split(const char *dev, int n, char *why, size_t len);
int mps_vdevice_remove(const char *name);
/* A virtual device's UUID as "GPU-…", if the daemon knows its GPU's; else "-". */
void mps_vdevice_uuid(const struct mps_vdevice *v, char *out, size_t len);
/* A virtual device's SMs (whole groups) and memory (all its GPU's where it
 * names none or more) as its server gives them; 0 where the daemon does not
 * know its GPU's layout (SMs) or memory. */
int mps_vdevice_sms(const struct mps_vdevice *v);
uint64_t mps_vdevice_mem(const struct mps_vdevice *v);
void mps_vdevice_send(struct mps_server_rec *srv, const struct mps_vdevice *v, bool remove);
/* True if a partition or a virtual device has that name. */
bool mps_partition_name_used(const char *name);
void mps_settings_send_threads(struct mps_server_rec *srv);
void mps_settings_send_priority(struct mps_server_rec *srv);
void mps_settings_send_memlimit(struct mps_server_rec *srv, const char *dev, uint64_t bytes);

/* cdi.c: the CDI spec of the daemon's devices (docs/CONTROL.md, "Containers").
 * Whether path may hold one (absolute, ending in .json, not too long): 0, or
 * -errno with why. */
int mps_cdi_path_check(const char *path, char *why, size_t len);
/* The cdiVersion the daemon writes unless told otherwise; the other it
 * takes is 0.5.0 (no annotations), for engines that read none later.
 * mps_cdi_version_check: whether version is one of the two: 0, or -EINVAL
 * with why. */
#define MPS_CDI_VERSION "0.6.0"
int mps_cdi_version_check(const char *version, char *why, size_t len);
/* Writes the spec to path, saying version, atomically, mode 0644 (the
 * devices must be known). 0, or -errno with why. */
int mps_cdi_write(const char *path, const char *version, char *why, size_t len);
/* Writes it again where the daemon keeps one (mps_daemon.cdi_path), once the
 * devices are known; a failure goes to control.log. */
void mps_cdi_refresh(void);

/* commands.c: runs one command line. */
void mps_command(const char *line, struct mps_cmd *cmd);
void mps_out(struct mps_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mps_err(struct mps_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* pidview.c: a caller of another PID namespace sees only its own
 * namespace's clients, under their PIDs there; one of the daemon's sees
 * every client under its host PID. */
void mps_pidview_init(struct mps_cmd *cmd, pid_t caller);
bool mps_pidview_sees(const struct mps_cmd *cmd, pid_t pid, pid_t *shown);
/* Writes a metrics text line (n bytes, no newline) as the caller may see it. */
void mps_pidview_metrics_line(struct mps_cmd *cmd, const char *l, size_t n);

/* listings.c */
void mps_list_ps(struct mps_cmd *cmd, struct mps_server_rec *only, const char *metrics);
void mps_list_device_clients(struct mps_cmd *cmd, struct mps_server_rec *only);
void mps_list_devices(struct mps_cmd *cmd);
/* The ordinal a device argument names, from the known device list; -1. */
int mps_device_ordinal(const char *dev);

/* ui.c */
int mps_ui_run(void);

#endif
