// SPDX-License-Identifier: MIT
/*
 * See daemon.h. Each question is one run of the control program, as an
 * administrator's script would ask, so the plugin needs no knowledge of
 * the daemon's socket protocol and is refused what the program is refused.
 */
#include "deviceplugin/daemon.h"

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const int RUN_MS = 10000;   // the longest a control program may take

static int64_t now_ms()
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int DpDaemon::run(const std::string &commands, std::string *out) const
{
	int in[2], res[2], status = 0;
	int64_t end = now_ms() + RUN_MS;
	pid_t pid;

	out->clear();
	if (pipe2(in, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(res, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(res[1], 1);
		dup2(res[1], 2);
		setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_.c_str(), 1);
		execl(control_.c_str(), control_.c_str(), (char *)nullptr);
		_exit(127);
	}
	close(in[0]);
	close(res[1]);
	if (pid < 0) {
		close(in[1]);
		close(res[0]);
		return -1;
	}
	/* Commands are short: the pipe takes them whole. */
	if (write(in[1], commands.data(), commands.size()) != (ssize_t)commands.size())
		out->append("(the control program did not take its commands)\n");
	close(in[1]);
	for (;;) {
		struct pollfd p = { res[0], POLLIN, 0 };
		int64_t left = end - now_ms();
		char buf[4096];
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			kill(pid, SIGKILL);
			out->append("(no answer in time)\n");
			break;
		}
		n = read(res[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		if (out->size() < (1u << 20))
			out->append(buf, (size_t)n);
	}
	close(res[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (end - now_ms() <= 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string dp_device_env(const std::string &uuid)
{
	std::string hex;

	if (uuid.compare(0, 4, "GPU-") != 0)
		return "";
	for (size_t i = 4; i < uuid.size(); i++) {
		unsigned char ch = (unsigned char)uuid[i];

		if (ch == '-')
			continue;
		if (!isxdigit(ch))
			return "";
		hex += (char)toupper(ch);
	}
	return hex.size() == 32 ? "OPENMPS_CDI_DEVICE_" + hex : "";
}

static std::vector<std::string> words(const std::string &line)
{
	std::istringstream s(line);
	std::vector<std::string> w;
	std::string x;

	while (s >> x)
		w.push_back(x);
	return w;
}

DpView DpDaemon::look() const
{
	DpView v;
	std::string out, line;
	std::map<std::string, std::string> by_index;   // a GPU's UUID by its ordinal
	int st = run("device_query\n", &out);

	if (st != 0) {
		v.why = st < 0 ? "the control program did not run or answer" : out.substr(0, out.find('\n'));
		return v;
	}
	/* ID UUID MEMORY NAME: "0 GPU-... 81559 MiB NVIDIA H100 ...", after a header. */
	std::istringstream rows(out);
	while (std::getline(rows, line)) {
		std::vector<std::string> w = words(line);

		if (w.size() >= 3 && isdigit((unsigned char)w[0][0]) && !dp_device_env(w[1]).empty()) {
			DpDevice d;

			d.uuid = w[1];
			d.cdi_name = w[1];
			d.gpu = w[1];
			d.mem_mib = strtoull(w[2].c_str(), nullptr, 10);
			by_index[w[0]] = w[1];
			v.gpus.push_back(d);
		}
	}
	if (v.gpus.empty()) {
		v.why = "the daemon lists no device";
		return v;
	}
	/* NAME UUID DEV SMS MEM [clients...]. A daemon that quits between the
	 * two commands answers the first and not this: that is no listing,
	 * not a listing of no slices (vdevices_ok). */
	if (run("vdevice list\n", &out) != 0) {
		v.why = "vdevice list: " + out.substr(0, out.find('\n'));
	} else {
		v.vdevices_ok = true;
		std::istringstream vrows(out);

		while (std::getline(vrows, line)) {
			std::vector<std::string> w = words(line);

			if (w.size() >= 5 && !dp_device_env(w[1]).empty()) {
				DpDevice d;

				d.uuid = w[1];
				d.cdi_name = w[0];
				d.virt = true;
				/* DEV: the GPU it slices, by ordinal or by UUID. */
				d.gpu = by_index.count(w[2]) ? by_index[w[2]] : w[2];
				v.vdevices.push_back(d);
			}
		}
	}
	/* A server in a GPU fault serves nobody until it is replaced. */
	if (run("get_server_list\n", &out) == 0) {
		std::istringstream pids(out);
		std::string cmds;

		while (std::getline(pids, line))
			if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos)
				cmds += "get_server_status " + line + "\n";
		if (!cmds.empty() && run(cmds, &out) >= 0 && out.find("FAULT") != std::string::npos)
			v.fault = true;
	}
	/* Servers failed so far: one that failed between two looks (a GPU
	 * fault, a crash, a kill; the daemon starts a fresh one for the next
	 * client) shows no FAULT by the next look. */
	if (run("get_metrics\n", &out) == 0) {
		static const std::string key = "openmps_server_failures_total ",
					 by_gpu = "openmps_device_server_failures_total{";
		std::istringstream m(out);

		while (std::getline(m, line)) {
			if (line.compare(0, key.size(), key) == 0) {
				v.failures = strtoull(line.c_str() + key.size(), nullptr, 10);
				v.failures_ok = true;
			} else if (line.compare(0, by_gpu.size(), by_gpu) == 0) {
				/* ...{device="0",uuid="GPU-..."} N */
				size_t u = line.find("uuid=\""), e = line.find("\"}", u == std::string::npos ? 0 : u);

				if (u == std::string::npos || e == std::string::npos)
					continue;
				v.gpu_failures[line.substr(u + 6, e - u - 6)] = strtoull(line.c_str() + e + 2, nullptr, 10);
				v.gpu_failures_ok = true;
			}
		}
	}
	v.up = true;
	return v;
}
