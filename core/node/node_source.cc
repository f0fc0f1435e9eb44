#include "core/node/node_source.h"

#include "core/discovery/presence.h"

namespace neuron {

NodeSource::NodeSource(NodeSourceOptions options)
    : options_(std::move(options)), root_(options_.root) {}

NodeSource::~NodeSource() { StopWatching(); }

absl::Status NodeSource::Init() {
  mode_ = ResolveDiscoveryMode(root_, options_.discovery);
  absl::StatusOr<std::unique_ptr<Discovery>> d =
      MakeDiscovery(root_, options_.discovery,
                    DiscoveryOptions{.lnc = options_.lnc, .bdf_resolver = options_.bdf_resolver});
  if (!d.ok()) return d.status();
  discovery_ = *std::move(d);
  return absl::OkStatus();
}

absl::StatusOr<NodeSource::Scan> NodeSource::Rescan() {
  std::lock_guard<std::mutex> scan_lock(scan_mu_);
  absl::StatusOr<Inventory> inv = discovery_->Scan();
  if (!inv.ok()) return inv.status();
  std::vector<std::string> notes;
  if (options_.catalog_stands_in) notes = FillUnreadableFromCatalog(root_, &*inv);
  Scan scan;
  {
    std::lock_guard<std::mutex> lock(mu_);
    notes_ = std::move(notes);
    scan.changed = inventory_ == nullptr || !(*inventory_ == *inv);
    if (scan.changed) inventory_ = std::make_shared<const Inventory>(*std::move(inv));
    scan.inventory = inventory_;
  }
  if (scan.changed) {
    std::lock_guard<std::mutex> lock(sample_mu_);
    if (sampler_ != nullptr) sampler_->SetInventory(*scan.inventory);
  }
  return scan;
}

std::shared_ptr<const Inventory> NodeSource::inventory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return inventory_;
}

std::vector<std::string> NodeSource::notes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return notes_;
}

bool NodeSource::StartSampling(const SamplingOptions& options) {
  const std::shared_ptr<const Inventory> inv = inventory();
  std::vector<int> devices;
  for (const NeuronDevice& d : inv->devices) devices.push_back(d.index);
  SamplerOptions so;
  so.threads = options.threads;
  // An injected datastore reader never calls a records reader: without one of its own, a test
  // has no records source at all.
  if (options.records) {
    so.records = options.records();
  } else if (!options.datastore) {
    so.records = MakeLibnrtRecordsReader(LibnrtPath(options.libnrt));
  }
  so.datastore = options.datastore
                     ? options.datastore(std::move(devices))
                     : MakeDriverDatastoreReader(
                           root_, {.devices = std::move(devices), .records = so.records});
  // Bounded: a device in reset holds the probe (core/sample/datastore.h); the datastore state
  // then stays unknown until a later sample knows it.
  const bool answered = so.datastore->AwaitFirstProbe(options.first_probe_wait);
  std::lock_guard<std::mutex> lock(sample_mu_);
  sampler_ = std::make_unique<Sampler>(root_, *inv, std::move(so));
  return answered;
}

std::shared_ptr<const Snapshot> NodeSource::Sample(SampleKind kind) {
  std::lock_guard<std::mutex> lock(sample_mu_);
  return sampler_->Sample(kind);
}

void NodeSource::SetOpensLogged(bool logged) {
  std::lock_guard<std::mutex> lock(sample_mu_);
  if (sampler_) sampler_->SetOpensLogged(logged);
}

void NodeSource::ProbeSoon() {
  std::lock_guard<std::mutex> lock(sample_mu_);
  if (sampler_) sampler_->ProbeSoon();
}

absl::Status NodeSource::Watch(std::chrono::milliseconds state_poll, Events::Callback callback) {
  // Events watch the way discovery reads: udev events for libudev, inotify for the directory.
  EventsOptions eopts;
  eopts.mode = mode_ == DiscoveryMode::kUdev ? WatchMode::kUdev : WatchMode::kDirectory;
  eopts.state_poll = state_poll;
  events_ = std::make_unique<Events>(root_, eopts);
  events_->Subscribe(std::move(callback));
  return events_->Start();
}

void NodeSource::StopWatching() {
  if (events_) events_->Stop();
}

}  // namespace neuron
