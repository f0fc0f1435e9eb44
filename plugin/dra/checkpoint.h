#pragma once
// The DRA driver's prepared claims on disk, so that a restarted plugin keeps them
// (docs/kubelet-api.md#dra-prepare): KUBELET_DIR/plugins/neuron.aws.com/checkpoint.json,
//   {"version": 1, "claims": {<uid>: {...}}, "checksum": "<FNV-1a 64 of the claims' dump>"}
// written whole to a temporary file, fsynced, then renamed over the old one, so a crash leaves
// the old or the new file, never half of one. A file whose checksum does not match (an editor, a
// disk fault) is refused: trusting it could hand a device to two pods.

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

struct PreparedClaim {
  std::string namespace_;
  std::string name;
  std::vector<PreparedDevice> devices;
  bool operator==(const PreparedClaim&) const = default;
};

using PreparedClaims = std::map<std::string, PreparedClaim>;  // by claim uid

// Writes `content` to `path` atomically (temporary file in the same directory, fsync, rename).
absl::Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content,
                             int mode = 0600);

absl::Status SaveCheckpoint(const std::filesystem::path& path, const PreparedClaims& claims);
// NotFound when there is none (a first start); DataLoss for a file that fails its checksum or
// does not parse.
absl::StatusOr<PreparedClaims> LoadCheckpoint(const std::filesystem::path& path);

}  // namespace neuron::plugin::dra
