// SPDX-License-Identifier: MIT
/*
 * See plugin.h. A device's ID is its UUID, or with replicas UUID::k (k from
 * 0); kubelet hands those back in Allocate, and the plugin answers only for
 * IDs it advertises. The edits mirror openmps's CDI spec (src/control/cdi.c):
 * the pipe directory and the library directory mounted at their host paths,
 * CUDA_MPS_PIPE_DIRECTORY, LD_LIBRARY_PATH with openmps's library first,
 * NVIDIA_VISIBLE_DEVICES=void (no driver edits from NVIDIA's toolkit), and
 * OPENMPS_CDI_DEVICE_<hex>=<UUID> for each device the container gets. No
 * device node is ever handed out: a pod reaches the GPU through openmps
 * alone, so its limits hold.
 */
#include "deviceplugin/plugin.h"

#include <chrono>
#include <cstdio>
#include <set>

static const char *const HEALTHY = "Healthy", *const UNHEALTHY = "Unhealthy";

bool DpPlugin::update(const DpView &v)
{
	std::map<std::string, Entry> next;
	std::vector<DpDevice> devs;

	if (cfg_.devices != DpConfig::VDEVICES)
		devs.insert(devs.end(), v.gpus.begin(), v.gpus.end());
	if (cfg_.devices != DpConfig::GPUS)
		devs.insert(devs.end(), v.vdevices.begin(), v.vdevices.end());
	for (const DpDevice &d : devs)
		for (int k = 0; k < cfg_.replicas; k++)
			next[cfg_.replicas > 1 ? d.uuid + "::" + std::to_string(k) : d.uuid] =
				Entry{ d, v.up && !v.fault && !v.failed && !v.failed_gpus.count(d.gpu) };

	std::lock_guard<std::mutex> lk(mu_);
	/* The daemon down: what was advertised stays, unhealthy (kubelet
	 * keeps the pods that hold them and places no new ones). So too when
	 * slices are advertised and could not be listed: a daemon that quit
	 * after answering for its GPUs would otherwise make its slices vanish
	 * instead of turning unhealthy. */
	if (!v.up || (cfg_.devices != DpConfig::GPUS && !v.vdevices_ok)) {
		next = ids_;
		for (auto &e : next)
			e.second.healthy = false;
	}
	bool same = next.size() == ids_.size();

	for (auto a = next.begin(), b = ids_.begin(); same && a != next.end(); ++a, ++b)
		same = a->first == b->first && a->second.healthy == b->second.healthy &&
		       a->second.dev.cdi_name == b->second.dev.cdi_name;
	if (same)
		return false;
	ids_ = std::move(next);
	gen_++;
	changed_.notify_all();
	return true;
}

void DpPlugin::stop()
{
	std::lock_guard<std::mutex> lk(mu_);

	stopping_ = true;
	changed_.notify_all();
}

size_t DpPlugin::count()
{
	std::lock_guard<std::mutex> lk(mu_);

	return ids_.size();
}

grpc::Status DpPlugin::GetDevicePluginOptions(grpc::ServerContext *, const v1beta1::Empty *,
					      v1beta1::DevicePluginOptions *out)
{
	out->set_pre_start_required(false);
	out->set_get_preferred_allocation_available(false);
	return grpc::Status::OK;
}

grpc::Status DpPlugin::ListAndWatch(grpc::ServerContext *ctx, const v1beta1::Empty *,
				    grpc::ServerWriter<v1beta1::ListAndWatchResponse> *w)
{
	uint64_t sent = UINT64_MAX;

	for (;;) {
		v1beta1::ListAndWatchResponse r;
		std::unique_lock<std::mutex> lk(mu_);

		changed_.wait_for(lk, std::chrono::seconds(1),
				  [&] { return gen_ != sent || stopping_ || ctx->IsCancelled(); });
		if (stopping_ || ctx->IsCancelled())
			return grpc::Status::OK;
		if (gen_ == sent)
			continue;
		sent = gen_;
		for (const auto &e : ids_) {
			v1beta1::Device *d = r.add_devices();

			d->set_id(e.first);
			d->set_health(e.second.healthy ? HEALTHY : UNHEALTHY);
		}
		lk.unlock();
		if (!w->Write(r))
			return grpc::Status::OK;   /* kubelet went away */
	}
}

grpc::Status DpPlugin::GetPreferredAllocation(grpc::ServerContext *, const v1beta1::PreferredAllocationRequest *req,
					      v1beta1::PreferredAllocationResponse *out)
{
	/* Not offered (GetDevicePluginOptions): kubelet's own choice stands. */
	(void)req;
	(void)out;
	return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "openmps: no preferred allocation is offered");
}

grpc::Status DpPlugin::Allocate(grpc::ServerContext *, const v1beta1::AllocateRequest *req,
				v1beta1::AllocateResponse *out)
{
	std::lock_guard<std::mutex> lk(mu_);

	if (req->container_requests_size() == 0)
		return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "openmps: an allocation for no container");
	for (const auto &creq : req->container_requests()) {
		v1beta1::ContainerAllocateResponse *r = out->add_container_responses();
		std::set<std::string> seen;
		std::string lib = cfg_.lib_dir + ":" + cfg_.lib_dir + "/nvml:/usr/local/nvidia/lib:/usr/local/nvidia/lib64";
		bool gpu = false;
		uint64_t mem = 0;

		if (creq.devices_ids_size() == 0)
			return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "openmps: a container asked for no device");
		for (const std::string &id : creq.devices_ids()) {
			auto e = ids_.find(id);

			if (e == ids_.end())
				return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
						    "openmps: unknown device ID '" + id.substr(0, 100) + "' (this plugin offers " +
							    std::to_string(ids_.size()) + " devices of " + cfg_.resource + ")");
			const DpDevice &d = e->second.dev;

			if (!seen.insert(d.uuid).second)
				continue;   /* replicas of one device: one device */
			if (cfg_.cdi)
				r->add_cdi_devices()->set_name(cfg_.cdi_kind + "=" + d.cdi_name);
			(*r->mutable_envs())[dp_device_env(d.uuid)] = d.uuid;
			if (!d.virt) {
				gpu = true;
				mem = mem ? std::min(mem, d.mem_mib) : d.mem_mib;
			}
		}
		(*r->mutable_envs())["CUDA_MPS_PIPE_DIRECTORY"] = cfg_.pipe_dir;
		(*r->mutable_envs())["LD_LIBRARY_PATH"] = lib;
		(*r->mutable_envs())["NVIDIA_VISIBLE_DEVICES"] = "void";
		/* A replica is a share of a whole GPU: what MPS's replicas get,
		 * as limits the client sees (a virtual device has its own). */
		if (gpu && cfg_.replicas > 1) {
			(*r->mutable_envs())["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(100 / cfg_.replicas);
			if (mem)
				(*r->mutable_envs())["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] =
					std::to_string(mem / (uint64_t)cfg_.replicas) + "M";
		}
		v1beta1::Mount *m = r->add_mounts();

		m->set_container_path(cfg_.pipe_dir);
		m->set_host_path(cfg_.pipe_dir);
		m->set_read_only(false);
		m = r->add_mounts();
		m->set_container_path(cfg_.lib_dir);
		m->set_host_path(cfg_.lib_dir);
		m->set_read_only(true);
		/* openmps's nvidia-smi (src/smi), where images look for it. */
		std::string smi = cfg_.lib_dir + "/nvml/nvidia-smi";
		if (access(smi.c_str(), X_OK) == 0) {
			m = r->add_mounts();
			m->set_container_path("/usr/bin/nvidia-smi");
			m->set_host_path(smi);
			m->set_read_only(true);
		}
	}
	return grpc::Status::OK;
}

grpc::Status DpPlugin::PreStartContainer(grpc::ServerContext *, const v1beta1::PreStartContainerRequest *,
					 v1beta1::PreStartContainerResponse *)
{
	return grpc::Status::OK;
}
