// SPDX-License-Identifier: MIT
/*
 * Writes the seed corpus of fuzz_control: every command of the control
 * language with good arguments and with bad ones, as the administrator and
 * as another user, on daemons with and without servers, and a few scripts of
 * several lines (set, then read back). The format is fuzz_control's: an
 * options byte, a caller byte, then the text.
 *
 *   seeds_control DIR
 *
 * Exit status: 0, or 1 if a file could not be written.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Options (see fuzz_control.c). */
#define PRIV      0x01
#define MULTI     0x02
#define EXCL      0x04
#define DEVS      0x08
#define LINES     0x10
#define SERVERS(n) ((n) << 5)
#define QUITTING  0x80

static const struct {
	unsigned char opts, caller;
	const char *text;
} seeds[] = {
	{ PRIV | SERVERS(2), 0, "get_server_list" },
	{ PRIV | SERVERS(3), 0, "get_server_status 4101" },
	{ SERVERS(1), 3, "get_server_status 99999" },
	{ PRIV, 0, "start_server -uid 0" },
	{ PRIV | EXCL | SERVERS(1), 0, "start_server -uid 5" },
	{ PRIV | MULTI, 0, "start_server -uid 1000" },
	{ PRIV | QUITTING, 0, "start_server -uid 0" },
	{ PRIV | SERVERS(2), 0, "shutdown_server 4100" },
	{ SERVERS(2), 1, "shutdown_server 4101 -f" },
	{ SERVERS(2), 5, "shutdown_server 4101" },
	{ SERVERS(3), 0, "get_client_list 4102" },
	{ DEVS | SERVERS(3), 0, "get_device_client_list" },
	{ SERVERS(3), 0, "get_device_client_list 4101" },
	{ DEVS | SERVERS(3), 0, "ps" },
	{ SERVERS(2), 0, "ps -p 4101" },
	{ PRIV | SERVERS(2), 0, "terminate_client 4101 4211" },
	{ SERVERS(2), 7 | 1 << 3, "terminate_client 4101 4211" },
	{ PRIV | SERVERS(3), 2 << 3, "terminate_client 4101 4210" },
	{ PRIV | SERVERS(3), 0, "terminate_client 4102 4220" },
	{ PRIV | SERVERS(2), 3 << 3, "terminate_client 4100 -5" },
	{ PRIV, 0, "set_default_active_thread_percentage 25" },
	{ PRIV, 0, "set_default_active_thread_percentage 0.5" },
	{ PRIV, 0, "set_default_active_thread_percentage 0.001" },
	{ 0, 3, "set_default_active_thread_percentage 101" },
	{ 0, 0, "get_default_active_thread_percentage" },
	{ PRIV | SERVERS(2), 0, "set_active_thread_percentage 4101 33.3" },
	{ SERVERS(2), 0, "get_active_thread_percentage 4100" },
	{ PRIV | DEVS, 0, "set_default_device_pinned_mem_limit 0 10G" },
	{ PRIV, 0, "set_default_device_pinned_mem_limit GPU-01234567-89ab-cdef-0123-456789abcdef 512M" },
	{ PRIV | DEVS, 0, "set_default_device_pinned_mem_limit 7 1G" },
	{ 0, 0, "get_default_device_pinned_mem_limit 0" },
	{ PRIV | SERVERS(1), 0, "set_device_pinned_mem_limit 4100 1 2048M" },
	{ SERVERS(1), 0, "get_device_pinned_mem_limit 4100 1" },
	{ PRIV, 0, "set_default_client_priority 1" },
	{ PRIV, 0, "set_default_client_priority 2" },
	{ 0, 0, "get_default_client_priority" },
	{ 0, 0, "get_default_fault_domain" },
	{ PRIV, 0, "set_namespace_sharing on" },
	{ PRIV, 0, "set_namespace_sharing maybe" },
	{ 0, 0, "get_namespace_sharing" },
	{ 0, 0, "help" },
	{ 0, 0, "help vdevice" },
	{ SERVERS(2), 0, "get_metrics" },
	{ 0, 0, "get_metrics" },
	{ PRIV | SERVERS(1), 0, "set_client_priority 4200 1" },
	{ PRIV | SERVERS(2), 0, "set_client_device_pinned_mem_limit 4211 0 1G" },
	{ SERVERS(1), 0, "set_client_active_thread_percentage 4200 25" },
	{ PRIV | SERVERS(1), 0, "sm_partition add fast 0 32 lend" },
	{ PRIV, 0, "sm_partition add b/ad 0 x" },
	{ 0, 0, "sm_partition list" },
	{ PRIV | SERVERS(1), 0, "sm_partition rm fast" },
	{ SERVERS(1), 0, "set_client_sm_partition 4200 fast" },
	{ PRIV | DEVS | SERVERS(1), 0, "vdevice split 0 4" },
	{ PRIV | DEVS, 0, "vdevice add slice 0 16 2G" },
	{ 0, 0, "vdevice list" },
	{ PRIV, 0, "vdevice rm slice" },
	{ PRIV, 0, "set_default_fault_domain own" },
	{ PRIV, 0, "set_default_fault_domain shared" },
	{ 0, 0, "start_server -uid 0" },
	{ DEVS, 0, "device_query" },
	{ 0, 0, "device_query" },
	{ 0, 3 << 3, "device_query" },
	{ PRIV | SERVERS(2), 0, "quit" },
	{ PRIV | SERVERS(2), 0, "quit -t 30" },
	{ SERVERS(1), 4, "quit" },
	{ 0, 0, "no_such_command a b c" },
	{ 0, 0, "ps a b c d e f g h i j" },
	{ 0, 0, "   \t  " },
	{ PRIV | LINES, 0, "set_default_active_thread_percentage 50\nget_default_active_thread_percentage\n"
			   "set_default_device_pinned_mem_limit 1 3G\r\nget_default_device_pinned_mem_limit 1\n"
			   "set_default_client_priority 1\nget_default_client_priority\n" },
	{ PRIV | LINES | DEVS | SERVERS(2), 0, "start_server -uid 9\nget_server_list\nps\n"
					       "set_device_pinned_mem_limit 4110 GPU-11234567-89ab-cdef-0123-456789abcdef 1G\n"
					       "get_device_pinned_mem_limit 4110 1\nshutdown_server 4110\n"
					       "get_server_status 4110\nquit -t 1\nstart_server -uid 9\n" },
};

static int write_seed(const char *dir, const char *name, unsigned char opts, unsigned char caller, const char *text)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fputc(opts, f) == EOF || fputc(caller, f) == EOF || fputs(text, f) == EOF || fclose(f) != 0) {
		fprintf(stderr, "seeds_control: cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char name[32], text[8192];
	size_t len = 0;
	int failed = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: seeds_control DIR\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		snprintf(name, sizeof(name), "seed-%02zu", i);
		failed |= write_seed(argv[1], name, seeds[i].opts, seeds[i].caller, seeds[i].text);
	}
	/* One pinned memory limit more than the daemon keeps. */
	for (int i = 0; i <= 32; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"set_default_device_pinned_mem_limit GPU-%08x-0000-0000-0000-000000000000 1G\n", i);
	snprintf(text + len, sizeof(text) - len,
		 "get_default_device_pinned_mem_limit GPU-00000007-0000-0000-0000-000000000000\n");
	failed |= write_seed(argv[1], "limits", PRIV | LINES, 0, text);
	return failed;
}
