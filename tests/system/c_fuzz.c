// SPDX-License-Identifier: MIT
/*
 * Hostile and careless peers of the control daemon's socket, then a check
 * that it still answers promptly. Phases:
 *
 *   silent   connections that never say anything stay open all along;
 *   crowd    200 UIs connect at once, each sends a command, then all read;
 *   noread   a UI sends 5000 commands and never reads a reply;
 *   random   3000 packets of random bytes, random lengths (up to 3000
 *            bytes), and random mixes of command words and arguments, on
 *            connections that are sometimes dropped without reading;
 *   hellos   packets that look almost like a CUDA client's hello.
 *
 * After each phase a fresh UI must get a well-formed answer to
 * get_default_active_thread_percentage within 5 seconds, and every reply
 * read along the way must be well formed (printable text, or one NUL for an
 * empty reply). The
 * random phase replays with the same seed.
 *
 *   usage: c_fuzz SOCKET_PATH [SEED]
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/wire.h"

#include "../check.h"

#define REPLY_MAX (64 * 1024 + 2)

static const char *sock_path;
static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static int dial(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Waits up to ms for one reply; returns its length, 0 at end of stream, -1
 * on timeout or error. A reply must be printable text, or one NUL. */
static ssize_t read_reply(int fd, char *buf, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, ms) != 1)
		return -1;
	n = recv(fd, buf, REPLY_MAX - 1, 0);
	/* An empty packet reads as the end of the stream: the daemon takes it
	 * for one and closes, and packets it had not read make the close a
	 * reset. Both end this connection. */
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return 0;
	if (n < 0)
		return -1;
	buf[n] = 0;
	if (n == 1 && buf[0] == 0)
		return n;   /* an empty reply */
	for (ssize_t i = 0; i < n; i++)
		if (!CHECK(buf[i] == '\n' || (buf[i] >= 0x20 && buf[i] <= 0x7e), "reply with byte 0x%02x",
			   (unsigned char)buf[i]))
			break;
	return n;
}

/* The daemon must still answer a well-formed command, promptly. */
static void check_alive(const char *after)
{
	static char buf[REPLY_MAX];
	const char *q = "get_default_active_thread_percentage";
	int fd = dial();
	ssize_t n;

	if (!CHECK(fd >= 0 && send(fd, q, strlen(q), MSG_NOSIGNAL) >= 0, "after %s: cannot reach the daemon: %s",
		   after, strerror(errno))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	n = read_reply(fd, buf, 5000);
	if (CHECK(n >= 2 && strstr(buf, ".") && strncmp(buf, "Error", 5),
		  "after %s: no proper answer (%zd bytes: %.40s)", after, n, n > 0 ? buf : ""))
		printf("c_fuzz: after %s the daemon answers %s", after, buf);
	close(fd);
}

static void crowd(int n)
{
	static char buf[REPLY_MAX];
	int *fds = calloc((size_t)n, sizeof(int)), got = 0;
	const char *q = "get_server_list";

	for (int i = 0; i < n; i++) {
		fds[i] = dial();
		if (fds[i] >= 0 && send(fds[i], q, strlen(q), MSG_NOSIGNAL) < 0) {
			close(fds[i]);
			fds[i] = -1;
		}
	}
	for (int i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		if (read_reply(fds[i], buf, 5000) >= 1 && strncmp(buf, "Error", 5))
			got++;
		close(fds[i]);
	}
	free(fds);
	printf("c_fuzz: crowd: %d of %d UIs answered\n", got, n);
	CHECK(got == n, "crowd: only %d of %d UIs got an answer", got, n);
}

static void noread(int count)
{
	const char *q = "get_server_list";
	int fd = dial(), sent = 0;

	if (!CHECK(fd >= 0, "noread: cannot connect: %s", strerror(errno)))
		return;
	for (int i = 0; i < count; i++)
		if (send(fd, q, strlen(q), MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
			sent++;
	printf("c_fuzz: noread: %d commands sent, no reply read\n", sent);
	check_alive("a UI that never reads (still connected)");
	close(fd);
}

static const char *words[] = {
	"quit", "get_server_list", "get_server_status", "start_server", "-uid", "shutdown_server", "-f",
	"get_client_list", "get_device_client_list", "ps", "-p", "terminate_client",
	"set_default_active_thread_percentage", "get_default_active_thread_percentage",
	"set_active_thread_percentage", "get_active_thread_percentage",
	"set_default_device_pinned_mem_limit", "get_default_device_pinned_mem_limit",
	"set_device_pinned_mem_limit", "get_device_pinned_mem_limit", "set_default_client_priority",
	"get_default_client_priority", "device_query", "0", "1", "-1", "100", "101", "0.0001", "1e308",
	"nan", "inf", "99999999999999999999", "10G", "512M", "0M", "7X", "GPU-", "GPU-00000000-0000",
	"65536", "2147483647", "-t", "", " ", "\t",
};

/* Commands that would change the daemon's state in ways that end the test
 * (quit) are never built; everything else is fair. */
static size_t random_packet(char *buf, size_t cap)
{
	size_t n = 0;

	if (rnd() % 3 == 0) {
		size_t len = rnd() % 3000;

		for (size_t i = 0; i < len && i < cap; i++)
			buf[i] = (char)rnd();
		return len < cap ? len : cap;
	}
	for (int w = 0, nw = 1 + (int)(rnd() % 6); w < nw; w++) {
		const char *word = words[rnd() % (sizeof(words) / sizeof(words[0]))];

		if (!strcmp(word, "quit") || !strcmp(word, "shutdown_server") || !strcmp(word, "start_server"))
			word = "get_server_list";
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", w ? " " : "", word);
		if (n >= cap)
			return cap;
	}
	if (rnd() % 4 == 0 && n + 1 < cap)
		buf[n++] = '\n';
	return n;
}

static void random_traffic(int count)
{
	static char buf[REPLY_MAX], pkt[3100];
	int fd = -1, answered = 0;

	for (int i = 0; i < count; i++) {
		size_t len;

		if (fd < 0 || rnd() % 16 == 0) {
			if (fd >= 0)
				close(fd);   /* sometimes with replies unread */
			fd = dial();
			if (!CHECK(fd >= 0, "random: cannot connect: %s", strerror(errno)))
				return;
		}
		len = random_packet(pkt, sizeof(pkt));
		if (send(fd, pkt, len, MSG_NOSIGNAL) < 0) {
			close(fd);
			fd = -1;
			continue;
		}
		/* Read most replies; a first packet of exactly a hello's size and
		 * magic would make us a CUDA client, which random bytes never are. */
		if (rnd() % 8) {
			ssize_t n = read_reply(fd, buf, 5000);

			if (!CHECK(n >= 0, "random: no reply to packet %d (%zu bytes): %s", i, len, strerror(errno))) {
				close(fd);
				fd = -1;
			} else if (n == 0) {
				close(fd);
				fd = -1;
			} else {
				answered++;
			}
		}
	}
	if (fd >= 0)
		close(fd);
	printf("c_fuzz: random: %d packets, %d replies read\n", count, answered);
}

static void hellos(void)
{
	static char buf[REPLY_MAX];
	struct mps_hello h;
	char big[sizeof(h) + 8];

	memset(&h, 0, sizeof(h));
	h.magic = MPS_HELLO_MAGIC ^ 1;   /* right size, wrong magic: a UI's garbage */
	for (int k = 0; k < 2; k++) {
		int fd = dial();
		ssize_t n;

		if (!CHECK(fd >= 0, "hellos: cannot connect: %s", strerror(errno)))
			return;
		if (k == 0) {
			n = send(fd, &h, sizeof(h), MSG_NOSIGNAL);
		} else {
			memset(big, 0, sizeof(big));
			h.magic = MPS_HELLO_MAGIC;   /* right magic, wrong size */
			memcpy(big, &h, sizeof(h));
			n = send(fd, big, sizeof(big), MSG_NOSIGNAL);
		}
		CHECK(n >= 0 && read_reply(fd, buf, 5000) >= 1 && !strncmp(buf, "Error", 5),
		      "hello look-alike %d did not get an error reply", k);
		close(fd);
	}
	printf("c_fuzz: hello look-alikes got error replies\n");
}

int main(int argc, char **argv)
{
	int silent[8];

	if (argc < 2) {
		fprintf(stderr, "usage: c_fuzz SOCKET_PATH [SEED]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sock_path = argv[1];
	rng_state = argc > 2 ? strtoull(argv[2], NULL, 0) : 0x9e3779b97f4a7c15ull;
	if (!rng_state)
		rng_state = 1;
	printf("c_fuzz: seed %llu\n", (unsigned long long)rng_state);
	for (int i = 0; i < 8; i++)
		silent[i] = dial();
	check_alive("8 silent connections");
	crowd(200);
	check_alive("200 UIs at once");
	noread(5000);
	check_alive("a UI that never read");
	random_traffic(3000);
	check_alive("random traffic");
	hellos();
	check_alive("hello look-alikes");
	for (int i = 0; i < 8; i++)
		if (CHECK(silent[i] >= 0, "silent connection %d could not connect", i))
			close(silent[i]);
	check_alive("the silent connections left");
	if (!check_failures())
		printf("c_fuzz: the daemon kept answering\n");
	return check_finish("c_fuzz");
}
