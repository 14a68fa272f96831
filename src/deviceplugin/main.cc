// SPDX-License-Identifier: MIT
/*
 * openmps-device-plugin: the kubelet's device plugin for openmps (API
 * v1beta1 over gRPC on unix sockets). It serves the DevicePlugin service on
 * <plugin dir>/<socket>, registers the resource with the kubelet
 * (<plugin dir>/kubelet.sock), and then looks at openmps's daemon every
 * interval: the devices it offers and their health go to the kubelet's
 * ListAndWatch stream as they change (Unhealthy while the daemon does not
 * answer or a server is in a GPU fault, and for one look after a server
 * failed since the last: the GPU of a fault and its slices, every device
 * for a crash or a kill; the daemon starts a fresh server for the next
 * client). A kubelet that restarts removes every
 * plugin socket in its directory: when ours is gone (or replaced) the
 * plugin serves anew and registers again. SIGTERM or SIGINT end it.
 *
 *   openmps-device-plugin [options]
 *     --resource NAME       resource name (default openmps.io/gpu)
 *     --devices gpus|vdevices|all   what is advertised (default gpus)
 *     --replicas N          pods one device takes, 1-48 (default 1)
 *     --plugin-dir DIR      the kubelet's (default /var/lib/kubelet/device-plugins)
 *     --socket NAME         this plugin's socket there (default openmps-<resource's class>.sock)
 *     --pipe-dir DIR        openmps's pipe directory (default $CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps)
 *     --lib-dir DIR         openmps's libcuda.so.1 (default ../lib/openmps beside this program when
 *                           installed, else ../lib)
 *     --control PATH        openmps-control (default beside this program)
 *     --cdi-kind KIND       the kind of openmps's CDI spec (default openmps.io/gpu); --no-cdi: none
 *     --interval-ms MS      how often the daemon is looked at (default 5000)
 */
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.grpc.pb.h"
#include "deviceplugin/daemon.h"
#include "deviceplugin/plugin.h"

static volatile sig_atomic_t quit_now;

static void on_signal(int sig)
{
	(void)sig;
	quit_now = 1;
}

static void say(const std::string &what)
{
	fprintf(stderr, "openmps-device-plugin: %s\n", what.c_str());
}

static std::string beside_me(const char *rel)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	std::string dir;

	if (n <= 0)
		return rel;
	buf[n] = 0;
	dir = buf;
	dir = dir.substr(0, dir.rfind('/'));
	return dir + "/" + rel;
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = (int)v;
	return true;
}

static int usage(const char *why)
{
	if (why)
		say(why);
	fprintf(stderr, "usage: openmps-device-plugin [--resource NAME] [--devices gpus|vdevices|all] [--replicas N]\n"
			"       [--plugin-dir DIR] [--socket NAME] [--pipe-dir DIR] [--lib-dir DIR] [--control PATH]\n"
			"       [--cdi-kind KIND | --no-cdi] [--interval-ms MS]\n");
	return 2;
}

/* The kubelet's Register, once; true if it took the plugin. */
static bool register_once(const std::string &kubelet, const std::string &socket, const DpConfig &cfg)
{
	auto ch = grpc::CreateChannel("unix://" + kubelet, grpc::InsecureChannelCredentials());
	auto stub = v1beta1::Registration::NewStub(ch);
	v1beta1::RegisterRequest req;
	v1beta1::Empty resp;
	grpc::ClientContext ctx;

	ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
	req.set_version("v1beta1");
	req.set_endpoint(socket);
	req.set_resource_name(cfg.resource);
	req.mutable_options()->set_pre_start_required(false);
	req.mutable_options()->set_get_preferred_allocation_available(false);
	grpc::Status st = stub->Register(&ctx, req, &resp);
	if (!st.ok()) {
		say("the kubelet at " + kubelet + " did not register " + cfg.resource + ": " + st.error_message());
		return false;
	}
	say("registered " + cfg.resource + " at " + socket);
	return true;
}

static std::string join(const std::set<std::string> &v)
{
	std::string s;

	for (const std::string &x : v)
		s += (s.empty() ? "" : ", ") + x;
	return s;
}

static bool same_file(const std::string &path, const struct stat &was)
{
	struct stat now;

	return stat(path.c_str(), &now) == 0 && now.st_ino == was.st_ino && now.st_dev == was.st_dev;
}

int main(int argc, char **argv)
{
	DpConfig cfg;
	std::string plugin_dir = "/var/lib/kubelet/device-plugins", socket, control = beside_me("openmps-control");
	int interval_ms = 5000;
	const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");

	cfg.pipe_dir = pipe && *pipe ? pipe : "/tmp/nvidia-mps";
	/* Installed: <prefix>/bin and <prefix>/lib/openmps; built: build/bin and build/lib. */
	cfg.lib_dir = access(beside_me("../lib/openmps/libcuda.so.1").c_str(), F_OK) == 0 ? beside_me("../lib/openmps")
											      : beside_me("../lib");
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : nullptr;

		if (a == "--no-cdi") {
			cfg.cdi = false;
			continue;
		}
		if (a == "-h" || a == "--help")
			return usage(nullptr), 0;
		if (!v)
			return usage(("missing a value after " + a).c_str());
		i++;
		if (a == "--resource")
			cfg.resource = v;
		else if (a == "--devices" && !strcmp(v, "gpus"))
			cfg.devices = DpConfig::GPUS;
		else if (a == "--devices" && !strcmp(v, "vdevices"))
			cfg.devices = DpConfig::VDEVICES;
		else if (a == "--devices" && !strcmp(v, "all"))
			cfg.devices = DpConfig::ALL;
		else if (a == "--replicas" && parse_int(v, 1, 48, &cfg.replicas))
			;
		else if (a == "--plugin-dir")
			plugin_dir = v;
		else if (a == "--socket")
			socket = v;
		else if (a == "--pipe-dir")
			cfg.pipe_dir = v;
		else if (a == "--lib-dir")
			cfg.lib_dir = v;
		else if (a == "--control")
			control = v;
		else if (a == "--cdi-kind")
			cfg.cdi_kind = v;
		else if (a == "--interval-ms" && parse_int(v, 100, 3600 * 1000, &interval_ms))
			;
		else
			return usage(("bad option or value: " + a + " " + v).c_str());
	}
	/* A resource name is vendor-domain/class (the kubelet checks it too). */
	size_t slash = cfg.resource.find('/');
	if (slash == std::string::npos || slash == 0 || slash + 1 == cfg.resource.size() ||
	    cfg.resource.find_first_of(" \t\n=") != std::string::npos)
		return usage(("not a resource name (vendor.domain/class): " + cfg.resource).c_str());
	if (socket.empty())
		socket = "openmps-" + cfg.resource.substr(slash + 1) + ".sock";
	if (socket.find('/') != std::string::npos || socket == "kubelet.sock")
		return usage(("not a socket name in the plugin directory: " + socket).c_str());
	if (cfg.pipe_dir.empty() || cfg.pipe_dir[0] != '/' || cfg.lib_dir.empty() || cfg.lib_dir[0] != '/')
		return usage("the pipe and library directories must be absolute paths");

	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);

	const std::string path = plugin_dir + "/" + socket, kubelet = plugin_dir + "/kubelet.sock";
	DpDaemon daemon(control, cfg.pipe_dir);
	/* A server that failed between two looks turns the devices it took
	 * down Unhealthy for one look (the GPU of its fault; every GPU for a
	 * crash or a kill, and from a daemon that does not count by GPU):
	 * the kubelet hears of it, and of the recovery. */
	uint64_t failures = 0;
	bool failures_known = false;
	std::map<std::string, uint64_t> gpu_failures;   // the last look's, by GPU UUID
	auto look = [&]() {
		DpView v = daemon.look();

		if (v.up && v.failures_ok) {
			bool rose = failures_known && v.failures > failures;

			if (v.gpu_failures_ok && failures_known) {
				for (const auto &g : v.gpu_failures) {
					auto was = gpu_failures.find(g.first);

					if (was != gpu_failures.end() && g.second > was->second)
						v.failed_gpus.insert(g.first);
				}
				/* Rose, yet no GPU known before did: a GPU new since. */
				v.failed = rose && v.failed_gpus.empty();
			} else {
				v.failed = rose;
			}
			failures = v.failures;   /* lower: a new daemon */
			failures_known = true;
			gpu_failures = v.gpu_failures;
		}
		return v;
	};

	while (!quit_now) {
		DpPlugin plugin(cfg);
		grpc::ServerBuilder b;
		struct stat mine;
		DpView v = look();

		plugin.update(v);
		if (!v.up)
			say("openmps's daemon (" + cfg.pipe_dir + ") does not answer: " + v.why);
		unlink(path.c_str());
		b.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
		b.RegisterService(&plugin);
		std::unique_ptr<grpc::Server> server = b.BuildAndStart();
		if (!server || stat(path.c_str(), &mine) != 0) {
			say("cannot serve at " + path);
			return 1;
		}
		say("serving " + std::to_string(plugin.count()) + " devices of " + cfg.resource + " at " + path);
		/* Registered once the kubelet takes it; tried again each second
		 * while it is away. */
		using clock = std::chrono::steady_clock;
		bool registered = false;
		clock::time_point next_register = clock::now(),
				  next_look = clock::now() + std::chrono::milliseconds(interval_ms);

		while (!quit_now && same_file(path, mine)) {
			if (!registered && clock::now() >= next_register) {
				registered = register_once(kubelet, socket, cfg);
				next_register = clock::now() + std::chrono::seconds(1);
			}
			if (clock::now() >= next_look) {
				DpView now = look();

				if (plugin.update(now))
					say(std::string("devices or health changed: ") +
					    (!now.up ? "the daemon does not answer: " + now.why
					     : now.fault ? "a server is in a GPU fault"
					     : now.failed ? "a server failed since the last look (a GPU fault, a crash, a kill)"
					     : !now.failed_gpus.empty() ? "a server failed since the last look, taking down " +
										  join(now.failed_gpus)
									: "healthy"));
				next_look = clock::now() + std::chrono::milliseconds(interval_ms);
			}
			std::this_thread::sleep_for(std::chrono::milliseconds(50));
		}
		if (!quit_now)
			say("the plugin socket went away (the kubelet restarted): serving and registering again");
		plugin.stop();
		server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
		server->Wait();
	}
	unlink(path.c_str());
	return 0;
}
