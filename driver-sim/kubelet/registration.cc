// The Registration service and the kubelet's plugin clients (docs/kubelet-api.md#registration to
// #plugin-disconnect; DM plugin/v1beta1/server.go Register, client.go Connect/Run, manager.go
// PluginConnected, genericDeviceUpdateCallback, PluginDisconnected).
#include <fmt/format.h>

#include <cctype>

#include "driver-sim/kubelet/emulator_impl.h"
#include "driver-sim/kubelet/rpc_error.h"

namespace neuron::sim {

namespace {

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// A DNS-1123 subdomain: at most 253 characters, dot-separated lowercase alphanumeric labels
// that may contain '-' inside.
bool IsDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (start <= s.size()) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (label.empty()) return false;
    for (char c : label) {
      if (!(std::islower(static_cast<unsigned char>(c)) ||
            std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
        return false;
      }
    }
    if (label.front() == '-' || label.back() == '-') return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

// The name part of a qualified name: at most 63 characters, alphanumeric at both ends, '-', '_'
// and '.' inside.
bool IsQualifiedNamePart(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!(IsAlnum(c) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

}  // namespace

bool IsExtendedResourceName(std::string_view name) {
  // IsNativeResource: no domain, or a kubernetes.io/ domain.
  if (name.find('/') == std::string_view::npos) return false;
  if (name.find("kubernetes.io/") != std::string_view::npos) return false;
  if (name.substr(0, 9) == "requests.") return false;  // DefaultResourceRequestsPrefix
  // The kubelet checks IsQualifiedName("requests." + name), which must split in two at '/'.
  const std::string quota = "requests." + std::string(name);
  const size_t slash = quota.find('/');
  if (quota.find('/', slash + 1) != std::string::npos) return false;
  return IsDns1123Subdomain(std::string_view(quota).substr(0, slash)) &&
         IsQualifiedNamePart(std::string_view(quota).substr(slash + 1));
}

// ---------------------------------------------------------------------------------------------

PluginClient::PluginClient(std::string resource, uint64_t generation,
                           std::shared_ptr<grpc::Channel> channel, KubeletEmulator::Impl* owner)
    : resource_(std::move(resource)),
      generation_(generation),
      channel_(std::move(channel)),
      stub_(v1beta1::DevicePlugin::NewStub(channel_)),
      owner_(owner) {}

PluginClient::~PluginClient() { Stop(); }

void PluginClient::Start() {
  thread_ = std::thread([this] { Run(); });
}

void PluginClient::Stop() {
  {
    std::lock_guard lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  context_.TryCancel();
  if (thread_.joinable()) thread_.join();
}

void PluginClient::Run() {
  std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>> reader =
      stub_->ListAndWatch(&context_, v1beta1::Empty());
  v1beta1::ListAndWatchResponse response;
  while (reader->Read(&response)) owner_->OnListAndWatch(resource_, generation_, response);
  const grpc::Status status = reader->Finish();
  owner_->OnStreamEnd(resource_, generation_, status);
}

// ---------------------------------------------------------------------------------------------

namespace {

class RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(KubeletEmulator::Impl* impl) : impl_(impl) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    return impl_->Register(*request);
  }

 private:
  KubeletEmulator::Impl* impl_;
};

// A Go error returned from a gRPC handler reaches the client as code Unknown with its text.
grpc::Status GoError(std::string message) {
  return grpc::Status(grpc::StatusCode::UNKNOWN, std::move(message));
}

}  // namespace

std::unique_ptr<grpc::Service> KubeletEmulator::Impl::MakeRegistrationService() {
  return std::make_unique<RegistrationService>(this);
}

grpc::Status KubeletEmulator::Impl::Register(const v1beta1::RegisterRequest& request) {
  const std::string& resource = request.resource_name();
  log->info("Got registration request from device plugin with resource {}", resource);
  {
    std::lock_guard lock(mu);
    ++register_calls;
  }
  if (request.version() != "v1beta1") {
    return GoError(fmt::format(
        "requested API version \"{}\" is not supported by kubelet. Supported versions are "
        "[\"v1beta1\"]",
        request.version()));
  }
  if (!IsExtendedResourceName(resource)) {
    return GoError(fmt::format("the ResourceName \"{}\" is invalid", resource));
  }

  // Dial back, blocking, with the kubelet's timeout (DM client.go dial: WithBlock, 10 s,
  // authority "localhost").
  const std::filesystem::path socket = (plugin_dir / request.endpoint()).lexically_normal();
  grpc::ChannelArguments args;
  args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, "localhost");
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      "unix:" + socket.string(), grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + options.dial_timeout)) {
    log->error("Error connecting to device plugin client {}: dial timed out", socket.string());
    return GoError("failed to dial device plugin: context deadline exceeded");
  }

  // PluginConnected: the options come from GetDevicePluginOptions, not from the request.
  v1beta1::DevicePluginOptions plugin_options;
  {
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::Status s = channel == nullptr
                         ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "no channel")
                         : v1beta1::DevicePlugin::NewStub(channel)->GetDevicePluginOptions(
                               &context, v1beta1::Empty(), &plugin_options);
    if (!s.ok()) {
      return GoError(fmt::format("failed to get device plugin options: {}", RpcError(s)));
    }
  }

  std::shared_ptr<PluginClient> old;
  std::shared_ptr<PluginClient> client;
  {
    std::lock_guard lock(mu);
    Endpoint& ep = resources[resource];
    const uint64_t generation = next_generation++;
    client = std::make_shared<PluginClient>(resource, generation, channel, this);
    old = std::move(ep.client);
    ep.client = client;
    ep.generation = generation;
    ep.endpoint = request.endpoint();
    ep.options = plugin_options;
    ep.connected = true;
    ep.stop_time.reset();
    ++registrations;
  }
  // A new registration replaces the old endpoint; the old stream's end no longer counts
  // (its generation is stale).
  if (old) old->Stop();
  client->Start();
  log->info("Device plugin connected: {} on {}", resource, request.endpoint());
  return grpc::Status::OK;
}

void KubeletEmulator::Impl::OnListAndWatch(const std::string& resource, uint64_t generation,
                                           const v1beta1::ListAndWatchResponse& response) {
  std::lock_guard lock(mu);
  auto it = resources.find(resource);
  if (it == resources.end() || it->second.generation != generation) return;
  Endpoint& ep = it->second;
  // Every message is the whole list: an ID missing from it is gone.
  ep.devices.clear();
  int healthy = 0;
  for (const v1beta1::Device& d : response.devices()) {
    KnownDevice& known = ep.devices[d.id()];
    known.healthy = d.health() == "Healthy";
    healthy += known.healthy ? 1 : 0;
    for (const v1beta1::NUMANode& node : d.topology().nodes()) known.numa.push_back(node.id());
  }
  ++ep.updates;
  if (absl::Status s = WriteCheckpointLocked(); !s.ok()) {
    log->error("Writing checkpoint encountered {}", std::string{s.message()});
  }
  log->debug("Processed device updates for resource {}: total {}, healthy {}", resource,
             response.devices_size(), healthy);
}

void KubeletEmulator::Impl::OnStreamEnd(const std::string& resource, uint64_t generation,
                                        const grpc::Status& status) {
  std::lock_guard lock(mu);
  auto it = resources.find(resource);
  if (it == resources.end() || it->second.generation != generation) return;
  Endpoint& ep = it->second;
  log->error("ListAndWatch ended unexpectedly for device plugin {}: {}", resource,
             status.error_message());
  // PluginDisconnected: every device unhealthy (allocatable 0, capacity kept), stop time noted.
  for (auto& [id, dev] : ep.devices) dev.healthy = false;
  ep.connected = false;
  ep.stop_time = std::chrono::steady_clock::now();
}

}  // namespace neuron::sim
