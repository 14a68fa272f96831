// SPDX-License-Identifier: MIT
/*
 * A kubelet as far as a device plugin sees one: it serves the Registration
 * service on DIR/kubelet.sock and, once a plugin registers, calls the
 * plugin back on DIR/<endpoint> with the real API (v1beta1 over gRPC on
 * unix sockets). Driven step by step from the command line, printing one
 * line per step, so a shell test can check each answer:
 *
 *   register          wait (20 s) for a Register: "registered RESOURCE ENDPOINT VERSION"
 *   options           GetDevicePluginOptions: "options PRE_START PREFERRED"
 *   list              the next ListAndWatch update (10 s): "list N ID=HEALTH ..." (sorted)
 *   health:H          updates until every device is H (30 s): "health H N"
 *   unhealthy:N       updates until exactly N devices are Unhealthy (30 s):
 *                     "unhealthy N ID ..." (those IDs, sorted)
 *   alloc:ID[,ID..]   Allocate for one container: "alloc ok", then "cdi NAME", "env K=V",
 *                     "mount CONTAINER HOST ro|rw" lines, sorted; or "alloc error CODE MESSAGE"
 *   alloc2:A/B        Allocate for two containers (A and B comma lists): "alloc2 ok N"
 *   garbage           bytes that are no HTTP/2 on the plugin's socket, then "garbage sent"
 *   touch:PATH        make a file (the test's script waits for it)
 *   await:PATH        wait (60 s) for a file: "await PATH"
 *
 * Exit status 0 if every step did what it waits for, 1 at the first that
 * did not (its line says why).
 */
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api.grpc.pb.h"

using namespace std::chrono;

class Kubelet final : public v1beta1::Registration::Service {
public:
	grpc::Status Register(grpc::ServerContext *, const v1beta1::RegisterRequest *req, v1beta1::Empty *) override
	{
		if (req->version() != "v1beta1")
			return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unsupported version " + req->version());
		std::lock_guard<std::mutex> lk(mu);
		got.push_back(*req);
		cv.notify_all();
		return grpc::Status::OK;
	}

	std::mutex mu;
	std::condition_variable cv;
	std::deque<v1beta1::RegisterRequest> got;
};

static std::string dir;
static std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin;
static std::string endpoint;

/* The ListAndWatch stream, read by a thread into a queue. */
static std::mutex lmu;
static std::condition_variable lcv;
static std::deque<v1beta1::ListAndWatchResponse> updates;
static bool stream_over;
static std::unique_ptr<grpc::ClientContext> lctx;

static void reader()
{
	v1beta1::Empty e;
	auto r = plugin->ListAndWatch(lctx.get(), e);
	v1beta1::ListAndWatchResponse u;

	while (r->Read(&u)) {
		std::lock_guard<std::mutex> lk(lmu);
		updates.push_back(u);
		lcv.notify_all();
	}
	r->Finish();
	std::lock_guard<std::mutex> lk(lmu);
	stream_over = true;
	lcv.notify_all();
}

static bool next_update(v1beta1::ListAndWatchResponse *u, seconds limit)
{
	static bool reading;

	if (!reading) {
		reading = true;
		lctx.reset(new grpc::ClientContext);
		std::thread(reader).detach();
	}
	std::unique_lock<std::mutex> lk(lmu);
	if (!lcv.wait_for(lk, limit, [] { return !updates.empty() || stream_over; }) || updates.empty())
		return false;
	*u = updates.front();
	updates.pop_front();
	return true;
}

static std::string describe(const v1beta1::ListAndWatchResponse &u)
{
	std::vector<std::string> v;
	std::string s = std::to_string(u.devices_size());

	for (const auto &d : u.devices())
		v.push_back(d.id() + "=" + d.health());
	std::sort(v.begin(), v.end());
	for (const auto &x : v)
		s += " " + x;
	return s;
}

static std::vector<std::string> split(const std::string &s, char sep)
{
	std::vector<std::string> v;
	size_t a = 0;

	while (a <= s.size()) {
		size_t b = s.find(sep, a);

		if (b == std::string::npos)
			b = s.size();
		v.push_back(s.substr(a, b - a));
		a = b + 1;
	}
	return v;
}

static bool step(Kubelet &k, const std::string &a)
{
	if (a == "register") {
		std::unique_lock<std::mutex> lk(k.mu);

		if (!k.cv.wait_for(lk, seconds(20), [&] { return !k.got.empty(); })) {
			printf("register: none in 20 s\n");
			return false;
		}
		v1beta1::RegisterRequest r = k.got.front();
		k.got.pop_front();
		endpoint = r.endpoint();
		printf("registered %s %s %s\n", r.resource_name().c_str(), endpoint.c_str(), r.version().c_str());
		plugin = v1beta1::DevicePlugin::NewStub(
			grpc::CreateChannel("unix://" + dir + "/" + endpoint, grpc::InsecureChannelCredentials()));
		return true;
	}
	if (!plugin && a != "garbage" && a.compare(0, 6, "touch:") && a.compare(0, 6, "await:")) {
		printf("%s: no plugin registered yet\n", a.c_str());
		return false;
	}
	if (a == "options") {
		grpc::ClientContext ctx;
		v1beta1::Empty e;
		v1beta1::DevicePluginOptions o;
		grpc::Status st;

		ctx.set_deadline(system_clock::now() + seconds(5));
		st = plugin->GetDevicePluginOptions(&ctx, e, &o);
		if (!st.ok()) {
			printf("options error %d %s\n", (int)st.error_code(), st.error_message().c_str());
			return false;
		}
		printf("options %d %d\n", (int)o.pre_start_required(), (int)o.get_preferred_allocation_available());
		return true;
	}
	if (a == "list") {
		v1beta1::ListAndWatchResponse u;

		if (!next_update(&u, seconds(10))) {
			printf("list: no update in 10 s\n");
			return false;
		}
		printf("list %s\n", describe(u).c_str());
		return true;
	}
	if (a.compare(0, 7, "health:") == 0) {
		std::string want = a.substr(7);
		auto end = steady_clock::now() + seconds(30);
		v1beta1::ListAndWatchResponse u;

		while (steady_clock::now() < end) {
			if (!next_update(&u, duration_cast<seconds>(end - steady_clock::now()) + seconds(1)))
				break;
			bool all = u.devices_size() > 0;

			for (const auto &d : u.devices())
				all = all && d.health() == want;
			if (all) {
				printf("health %s %d\n", want.c_str(), u.devices_size());
				return true;
			}
		}
		printf("health: not every device %s in 30 s\n", want.c_str());
		return false;
	}
	if (a.compare(0, 10, "unhealthy:") == 0) {
		int want = atoi(a.c_str() + 10);
		auto end = steady_clock::now() + seconds(30);
		v1beta1::ListAndWatchResponse u;

		while (steady_clock::now() < end) {
			if (!next_update(&u, duration_cast<seconds>(end - steady_clock::now()) + seconds(1)))
				break;
			std::vector<std::string> ids;

			for (const auto &d : u.devices())
				if (d.health() == "Unhealthy")
					ids.push_back(d.id());
			if ((int)ids.size() == want) {
				std::string line = "unhealthy " + std::to_string(want);

				std::sort(ids.begin(), ids.end());
				for (const auto &id : ids)
					line += " " + id;
				printf("%s\n", line.c_str());
				return true;
			}
		}
		printf("unhealthy: no update with %d devices Unhealthy in 30 s\n", want);
		return false;
	}
	if (a.compare(0, 6, "alloc:") == 0 || a.compare(0, 7, "alloc2:") == 0) {
		bool two = a[5] == '2';
		grpc::ClientContext ctx;
		v1beta1::AllocateRequest req;
		v1beta1::AllocateResponse resp;
		grpc::Status st;

		for (const std::string &c : split(a.substr(two ? 7 : 6), '/')) {
			auto *cr = req.add_container_requests();

			for (const std::string &id : split(c, ','))
				if (!id.empty())
					cr->add_devices_ids(id);
		}
		ctx.set_deadline(system_clock::now() + seconds(5));
		st = plugin->Allocate(&ctx, req, &resp);
		if (!st.ok()) {
			printf("alloc error %d %s\n", (int)st.error_code(), st.error_message().c_str());
			return true;   /* the script checks the error it expects */
		}
		if (two) {
			printf("alloc2 ok %d\n", resp.container_responses_size());
			return true;
		}
		if (resp.container_responses_size() != 1) {
			printf("alloc: %d answers for one container\n", resp.container_responses_size());
			return false;
		}
		const auto &r = resp.container_responses(0);
		std::vector<std::string> lines;

		for (const auto &c : r.cdi_devices())
			lines.push_back("cdi " + c.name());
		for (const auto &e : r.envs())
			lines.push_back("env " + e.first + "=" + e.second);
		for (const auto &m : r.mounts())
			lines.push_back("mount " + m.container_path() + " " + m.host_path() + (m.read_only() ? " ro" : " rw"));
		for (const auto &d : r.devices())
			lines.push_back("device " + d.host_path());
		std::sort(lines.begin(), lines.end());
		printf("alloc ok\n");
		for (const auto &l : lines)
			printf("%s\n", l.c_str());
		return true;
	}
	if (a == "garbage") {
		struct sockaddr_un sa = {};
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		std::string path = dir + "/" + endpoint;
		static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\x01\x02\xff\xfe garbage";

		sa.sun_family = AF_UNIX;
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path.c_str());
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			printf("garbage: cannot connect to %s\n", path.c_str());
			return false;
		}
		if (write(fd, junk, sizeof(junk)) < 0)
			perror("write");
		usleep(200 * 1000);
		close(fd);
		printf("garbage sent\n");
		return true;
	}
	if (a.compare(0, 6, "touch:") == 0) {
		FILE *f = fopen(a.c_str() + 6, "w");

		if (f)
			fclose(f);
		return f != nullptr;
	}
	if (a.compare(0, 6, "await:") == 0) {
		struct stat st;

		for (int i = 0; i < 600; i++) {
			if (stat(a.c_str() + 6, &st) == 0) {
				printf("await %s\n", a.c_str() + 6);
				return true;
			}
			usleep(100 * 1000);
		}
		printf("await: no %s in 60 s\n", a.c_str() + 6);
		return false;
	}
	printf("unknown step %s\n", a.c_str());
	return false;
}

int main(int argc, char **argv)
{
	Kubelet k;
	grpc::ServerBuilder b;

	setvbuf(stdout, nullptr, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: fake_kubelet DIR STEP...\n");
		return 2;
	}
	dir = argv[1];
	unlink((dir + "/kubelet.sock").c_str());
	b.AddListeningPort("unix://" + dir + "/kubelet.sock", grpc::InsecureServerCredentials());
	b.RegisterService(&k);
	std::unique_ptr<grpc::Server> server = b.BuildAndStart();
	if (!server) {
		printf("cannot serve at %s/kubelet.sock\n", dir.c_str());
		return 1;
	}
	for (int i = 2; i < argc; i++)
		if (!step(k, argv[i]))
			_exit(1);   /* the reader thread may be blocked in the stream */
	if (lctx)
		lctx->TryCancel();
	server->Shutdown(system_clock::now() + seconds(1));
	_exit(0);
}
