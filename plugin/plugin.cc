#include "plugin/plugin.h"

#include "plugin/device_plugin_face.h"
#include "plugin/dra/face.h"

namespace neuron::plugin {

Plugin::Plugin(Config config)
    : config_(std::move(config)),
      state_(config_.allocation_grace),
      watcher_({.node = {.root = config_.root, .discovery = config_.discovery, .lnc = config_.lnc},
                .health = config_.health},
               &state_),
      remediator_(
          {.root = config_.root, .policy = config_.health}, &state_,
          [this] { return face_->DevicesInUse(); }, &metrics_) {
  if (config_.api == Api::kDra) {
    auto dra = std::make_unique<dra::DraFace>(config_, &state_, &watcher_);
    dra_ = dra.get();
    face_ = std::move(dra);
  } else {
    face_ = std::make_unique<DevicePluginFace>(config_, &state_, &watcher_, &metrics_);
  }
  metrics_.OnScrape([this] {
    const auto read = state_.evidence_time();
    if (!read) return;  // unknown before the first reading: no series, not a zero
    const std::chrono::duration<double> age = std::chrono::system_clock::now() - *read;
    metrics_.SetEvidenceAge(age.count(), age > config_.health.stale_after);
  });
}

Plugin::~Plugin() { Stop(); }

absl::Status Plugin::Start() {
  if (absl::Status s = face_->Start(); !s.ok()) return s;
  remediator_.Start();
  return absl::OkStatus();
}

void Plugin::Stop() {
  remediator_.Stop();
  face_->Stop();
  watcher_.Stop();
}

HealthResponse Plugin::Health(std::optional<uint64_t> unless) const {
  const auto read = state_.evidence_time();
  // Before the first reading the evidence is as good as stale: nothing has been judged.
  const bool stale = !read || std::chrono::system_clock::now() - *read > config_.health.stale_after;
  // The Node condition is the `node` action's; in device-plugin mode `evict` sets it too: with no
  // device taints, the cluster's own remediation acts on the Node (plugin/config.h).
  EvidenceClasses condemning = config_.health.WithAction(Action::kNode);
  if (config_.api == Api::kDevicePlugin) condemning.Add(config_.health.WithAction(Action::kEvict));
  return BuildHealthResponse(*state_.view(), read, stale, unless,
                             {.condemning = condemning,
                              .in_use = face_->DevicesInUse(),
                              .remediation = remediator_.Status()});
}

dra::SliceState::Document Plugin::DraSlice(std::optional<uint64_t> unless) const {
  if (dra_ == nullptr) return {404, "not in DRA mode (--api dra)\n"};
  return dra_->Slice(unless);
}

}  // namespace neuron::plugin
