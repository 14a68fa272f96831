// SPDX-License-Identifier: MIT
/*
 * The kubelet's DevicePlugin service (API v1beta1) for openmps's devices:
 * which devices are advertised (GPUs, virtual devices or both, each as
 * `replicas` schedulable copies), their health as the daemon's view says,
 * and what Allocate hands a container: the CDI names of openmps's spec and
 * the same edits as environment and mounts for runtimes without CDI.
 */
#ifndef OPENMPS_DEVICEPLUGIN_PLUGIN_H
#define OPENMPS_DEVICEPLUGIN_PLUGIN_H

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "api.grpc.pb.h"
#include "deviceplugin/daemon.h"

struct DpConfig {
	std::string resource = "openmps.io/gpu";   // the resource name pods ask for
	std::string cdi_kind = "openmps.io/gpu";   // the kind of openmps's CDI spec
	bool cdi = true;                           // answer with CDI names
	enum { GPUS, VDEVICES, ALL } devices = GPUS;
	int replicas = 1;                          // pods one device takes
	std::string pipe_dir;                      // the daemon's pipe directory (host)
	std::string lib_dir;                       // openmps's libcuda.so.1 (host)
};

class DpPlugin final : public v1beta1::DevicePlugin::Service {
public:
	explicit DpPlugin(DpConfig cfg) : cfg_(std::move(cfg)) {}

	// A new view of the daemon: the list kubelet sees changes if the
	// devices or their health do. Returns true if it changed.
	bool update(const DpView &v);
	// Ends every ListAndWatch stream (the server is being shut down).
	void stop();
	size_t count();

	grpc::Status GetDevicePluginOptions(grpc::ServerContext *, const v1beta1::Empty *,
					    v1beta1::DevicePluginOptions *out) override;
	grpc::Status ListAndWatch(grpc::ServerContext *ctx, const v1beta1::Empty *,
				  grpc::ServerWriter<v1beta1::ListAndWatchResponse> *w) override;
	grpc::Status GetPreferredAllocation(grpc::ServerContext *, const v1beta1::PreferredAllocationRequest *req,
					    v1beta1::PreferredAllocationResponse *out) override;
	grpc::Status Allocate(grpc::ServerContext *, const v1beta1::AllocateRequest *req,
			      v1beta1::AllocateResponse *out) override;
	grpc::Status PreStartContainer(grpc::ServerContext *, const v1beta1::PreStartContainerRequest *,
				       v1beta1::PreStartContainerResponse *) override;

private:
	struct Entry {
		DpDevice dev;
		bool healthy;
	};

	DpConfig cfg_;
	std::mutex mu_;
	std::condition_variable changed_;
	uint64_t gen_ = 0;                      // bumped on every change of ids_
	bool stopping_ = false;
	std::map<std::string, Entry> ids_;      // advertised ID -> device (ordered: a stable list)
};

#endif
