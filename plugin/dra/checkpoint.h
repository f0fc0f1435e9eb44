#pragma once
// The DRA driver's prepared claims on disk, so that a restarted plugin keeps them
// (docs/kubelet-api.md#dra-prepare): KUBELET_DIR/plugins/neuron.aws.com/checkpoint.json,
//   {"version": 1, "bootId": "<the kernel's boot_id>", "claims": {<uid>: {...}},
//    "checksum": "<FNV-1a 64 of the claims' dump>"}
// written whole to a temporary file, fsynced, then renamed over the old one, so a crash leaves
// the old or the new file, never half of one. A file whose checksum does not match (an editor, a
// disk fault) is refused: trusting it could hand a device to two pods.
//
// Upgrades and rollbacks (docs/kubelet-api.md#dra-upgrades): what this release added to version
// 1 is additive, so the release before it reads the file this one writes, and this one reads
// that release's: `bootId` (absent: unknown, the claims are kept), a claim's `state`
// ("PrepareStarted" while its CDI spec is being written, "PrepareCompleted" after; absent:
// completed) and a device's `adminAccess` (absent: false). The release before reads a started
// claim as prepared and an adminAccess device as held, which is safe: never two pods on one
// device.

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace neuron::plugin::dra {

// One device of a prepared claim, as answered to the kubelet.
struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_ids;
  // Prepared for adminAccess: held by nobody (no double booking against it). On disk only when
  // true, an additive field that a release before it reads as an ordinary (exclusive) device.
  bool admin_access = false;
  bool operator==(const PreparedDevice&) const = default;
};

// A claim is recorded as started before its CDI spec is written and completed after (as NVIDIA's
// DRA driver checkpoints prepares): a crash in between leaves a started claim, which a restart
// rolls back (its spec removed), never a spec that no checkpoint names.
enum class PrepareState { kStarted, kCompleted };

struct PreparedClaim {
  std::string namespace_;
  std::string name;
  std::vector<PreparedDevice> devices;
  PrepareState state = PrepareState::kCompleted;
  bool operator==(const PreparedClaim&) const = default;
};

using PreparedClaims = std::map<std::string, PreparedClaim>;  // by claim uid

struct Checkpoint {
  std::string boot_id;  // "" when the file had none (written by a release before it)
  PreparedClaims claims;
};

// Writes `content` to `path` atomically (temporary file in the same directory, rename): a reader
// sees the old file or the new one. `durable` also fsyncs before the rename, for a file that must
// survive a power loss; the checkpoint and the CDI specs need not (they are tied to the boot:
// SaveCheckpoint), and an fsync costs a prepare milliseconds on a real disk.
absl::Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content,
                             int mode = 0600, bool durable = true);

// Not fsynced: a plugin that crashes finds the file in the page cache, and after a power loss the
// claims belong to another boot and are dropped anyway (their CDI specs, under /var/run, are gone;
// a file cut short fails its checksum and is set aside).
absl::Status SaveCheckpoint(const std::filesystem::path& path, const Checkpoint& checkpoint);
// NotFound when there is none (a first start); DataLoss for a file that fails its checksum or
// does not parse.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::filesystem::path& path);

// The running kernel's boot id (/proc/sys/kernel/random/boot_id, one per boot); "" unreadable.
std::string CurrentBootId();

}  // namespace neuron::plugin::dra
