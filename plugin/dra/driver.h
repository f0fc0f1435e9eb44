#pragma once
// NodePrepareResources / NodeUnprepareResources (docs/kubelet-api.md#dra-prepare) of one of our
// drivers, free of gRPC: for each claim, ask the ClaimSource for its allocation, keep the results
// whose driver is this one and whose pool is this node, check that every device exists and is held
// by no other prepared claim (a Neuron device holds all its cores; neuron-node every device and
// core of the node; a NeuronCore claim conflicts with a claim of its device or of neuron-node; an
// EFA with another claim of it), honour NeuronConfig.logicalNeuronCore only when it equals the
// node's LNC and UltraServerConfig only on neuron-node (ultraserver_config.h), write the claim's
// CDI spec, checkpoint, answer the CDI ids.
//
// Idempotent: a claim already prepared is answered from memory without asking the ClaimSource;
// unpreparing an unknown claim succeeds. Prepared claims survive a restart through the
// checkpoint (checkpoint.h); one that fails its checksum is refused (logged) and set aside; one
// written before the node's last boot is dropped (its CDI specs went with /var/run, and the
// kubelet prepares its pods' claims again); a claim a crash left started is rolled back.
//
// Two instances side by side (a rolling update, docs/kubelet-api.md#dra-upgrades) share the
// checkpoint directory: each holds an exclusive flock on its `prepare.lock` while it reads what is
// prepared and while it prepares or unprepares, and reads the checkpoint again when the other
// wrote it, so they never hand one device to two claims.
//
// Thread-safety: every method may be called from any thread. Claims are fetched first, without
// the lock and concurrently (a look-up may wait seconds on neuron-dra-api and the API server, and
// the library's NodePrepareResources also fetches before it serialises), so one slow claim holds
// neither another call's claims nor an unprepare; then one mutex serialises the checks against
// what is prepared, the CDI specs and the checkpoint, and guards the claims.

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "plugin/dra/cdi.h"
#include "plugin/dra/checkpoint.h"
#include "plugin/dra/claim_source.h"
#include "plugin/dra/device_kinds.h"
#include "plugin/node_state.h"

namespace neuron::plugin::dra {

struct ClaimRef {
  std::string namespace_;
  std::string name;
  std::string uid;
};

class Driver;

struct DriverOptions {
  std::string node_name;                  // our pool
  std::filesystem::path cdi_dir;          // --cdi-dir
  std::filesystem::path checkpoint_dir;   // KUBELET_DIR/plugins/<driver_name>
  NodeState* state = nullptr;             // the hardware picture (not owned)
  ClaimSource* claims = nullptr;          // not owned
  std::string boot_id = CurrentBootId();  // the checkpoint's bootId
  // Which of our drivers (device_kinds.h) this is: the results it prepares, the kinds of device
  // it accepts (neuron.aws.com: all, EFAs too for claims allocated while they were its devices;
  // efa.neuron.aws.com: EFAs only), its configs and its CDI kind.
  std::string_view driver_name = kDriverName;
  // Another driver of ours in this process whose prepared claims also hold devices (not owned):
  // efa.neuron.aws.com looks at neuron.aws.com's, which may still hold EFAs it prepared before
  // EFA had a driver of its own. Never both ways (each would wait for the other's lock).
  const Driver* peer = nullptr;
  // The node's root, for the withhold locks a prepare holds (core/node/withhold.h).
  std::string root = "/";
};

// The Neuron devices prepared devices hold, whole, by a core, or all of them (neuron-node).
std::set<int> NeuronDevicesOf(const std::vector<PreparedDevice>& devices, const NodeView& view);

class Driver {
 public:
  // Loads the checkpoint when there is one. Fails only when the checkpoint directory cannot be
  // made.
  static absl::StatusOr<std::unique_ptr<Driver>> Create(DriverOptions options);

  // Per claim uid: the prepared devices, or the error that refused the claim.
  std::map<std::string, absl::StatusOr<std::vector<PreparedDevice>>> Prepare(
      const std::vector<ClaimRef>& claims);
  std::map<std::string, absl::Status> Unprepare(const std::vector<ClaimRef>& claims);

  // Prepared claims by uid (tests, the log).
  PreparedClaims prepared() const;

 private:
  explicit Driver(DriverOptions options);
  // The claim as neuron-dra-api answers it, checked to be the one the kubelet means and
  // allocated. No lock: network I/O.
  absl::StatusOr<ResourceClaim> Fetch(const ClaimRef& ref) const;
  // A claim's devices and CDI spec, checked against what is prepared; nothing written yet.
  struct Planned {
    std::vector<PreparedDevice> devices;
    std::vector<CdiDevice> cdi;
  };
  absl::StatusOr<Planned> Plan(const ClaimRef& ref, const ResourceClaim& claim,
                               const NodeView& view) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Saves `planned` (in claims_ already, as started), writes their CDI specs, saves them as
  // completed; a claim whose spec or record cannot be written is refused and forgotten.
  void Commit(std::map<std::string, Planned> planned, const std::vector<ClaimRef>& refs,
              std::map<std::string, absl::StatusOr<std::vector<PreparedDevice>>>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Save() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops a previous boot's claims and rolls back the started ones (at start, or from a file
  // another instance left).
  void Recover(Checkpoint loaded, bool at_start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_ and the flock: the checkpoint read again if another instance wrote it since.
  void Reload() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The checkpoint file's identity (inode and mtime): a rename by anyone changes it.
  std::pair<uint64_t, int64_t> Stamp() const;

  const DriverOptions options_;
  const CdiSpecs cdi_;
  const std::filesystem::path checkpoint_path_;
  mutable std::mutex mu_;
  PreparedClaims claims_ ABSL_GUARDED_BY(mu_);
  UniqueFd lock_fd_;  // checkpoint_dir/prepare.lock, flocked across instances under mu_
  std::pair<uint64_t, int64_t> seen_ ABSL_GUARDED_BY(mu_);  // Stamp() as last read or written
};

// The node's LNC from its view: physical cores per device (catalog, by instance type) over
// logical ones; 0 when unknown.
int NodeLnc(const NodeView& view);

}  // namespace neuron::plugin::dra
