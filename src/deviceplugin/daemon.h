// SPDX-License-Identifier: MIT
/*
 * What the device plugin learns from openmps's control daemon, asked
 * through the control program (openmps-control, beside the plugin unless
 * given) with the daemon's pipe directory: the devices clients can use
 * (device_query), the virtual devices (vdevice list), whether a server
 * is in a GPU fault (get_server_list, get_server_status), and how many
 * servers have failed since the daemon started (get_metrics'
 * openmps_server_failures_total: a GPU fault, a crash, a kill), in all and
 * by the GPU they took down (openmps_device_server_failures_total: the GPU
 * of a fault; every GPU for a crash or a kill).
 */
#ifndef OPENMPS_DEVICEPLUGIN_DAEMON_H
#define OPENMPS_DEVICEPLUGIN_DAEMON_H

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

struct DpDevice {
	std::string uuid;       // GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
	std::string cdi_name;   // its name in openmps's CDI spec: the UUID of a GPU, the name of a virtual device
	bool virt = false;      // a virtual device (vdevice)
	std::string gpu;        // the UUID of the GPU it is (a GPU) or is a slice of; "" if not known
	uint64_t mem_mib = 0;   // a GPU's memory (device_query)
};

struct DpView {
	bool up = false;        // the daemon answered
	bool fault = false;     // a server of it is in a GPU fault
	uint64_t failures = 0;  // servers failed since the daemon started
	bool failures_ok = false;  // failures was read
	std::map<std::string, uint64_t> gpu_failures;   // by GPU UUID: the failed servers that took it down
	bool gpu_failures_ok = false;   // gpu_failures was read (a daemon that counts by GPU)
	bool failed = false;    // set by the caller: failures rose since its last look (and not known by GPU)
	std::set<std::string> failed_gpus;   // set by the caller: the GPUs whose failures rose
	std::vector<DpDevice> gpus, vdevices;
	bool vdevices_ok = false;  // the slices were listed (vdevices is the list, not a failure)
	std::string why;        // when not up, or the slices not listed: what went wrong
};

class DpDaemon {
public:
	DpDaemon(std::string control, std::string pipe_dir) : control_(std::move(control)), pipe_(std::move(pipe_dir)) {}
	DpView look() const;
	// Runs the control program with `commands` on its standard input; its
	// exit status (-1: could not run it or it took longer than 10 s).
	int run(const std::string &commands, std::string *out) const;

private:
	std::string control_, pipe_;
};

// The environment variable openmps's CDI spec sets for a device:
// OPENMPS_CDI_DEVICE_<the UUID's 32 hex digits, upper case>; "" if `uuid`
// is not one.
std::string dp_device_env(const std::string &uuid);

#endif
