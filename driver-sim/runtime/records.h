#pragma once
// libnrt-sim's records in the datastore's object area (bytes 1248-44588,
// docs/driver-interface.md#datastore-layout): the process information and the loaded model nodes
// that the SDK's datastore API reads (include/nrt/nds/neuron_ds.h). Their format is private to
// libnrt-sim, as the real runtime's is to it: only this file's reader, behind libnrt.so.1's nds_*
// functions (nds_api.cc), and the simulated driver's status page decode it; the agent reads the
// records through the API only. driver-sim/README.md ("libnrt-sim") describes the format.
//
// Consistency: one writer (the runtime, serialised by its caller) and readers in other
// processes. The writer makes a sequence word odd before it changes anything and even after; a
// reader copies what it needs and keeps the copy only if the word was even and unchanged around
// the copy (a seqlock), so it never returns a half-written record.
//
// Built position-independent and with nothing but the C++ standard library, so that libnrt.so.1
// can carry it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nrt/nds/neuron_ds.h"

namespace neuron::nrt::records {

// The object area within the datastore (the driver's layout leaves it to the runtime).
inline constexpr size_t kAreaOffset = 1248;
inline constexpr size_t kAreaSize = 44588 - kAreaOffset;
// The header: magic, format version, sequence word, model count (u32 each).
inline constexpr char kMagic[4] = {'n', 'r', 't', 's'};
inline constexpr uint32_t kVersion = 1;

// Trivial, so that a value-initialised one is all zeros and it can live in a C object.
struct ModelNode {
  nds_model_node_info_t info;
  nds_model_node_mem_usage_info_t memory;
};
inline constexpr int kMaxModelNodes = static_cast<int>(
    (kAreaSize - 16 - sizeof(nds_process_info_t) - sizeof(nds_process_info_ext_t)) /
    (sizeof(nds_model_node_info_t) + sizeof(nds_model_node_mem_usage_info_t)));

// The writer, over the object area of the caller's own datastore (kAreaSize bytes). Not
// thread-safe: the runtime serialises its calls.
class Writer {
 public:
  // Writes the header; `version` other than kVersion is for tests of readers that must refuse
  // a format they do not know.
  explicit Writer(std::span<uint8_t> area, uint32_t version = kVersion);

  void SetProcessInfo(const nds_process_info_t& info);
  void SetProcessInfoExt(std::string_view tag);  // truncated to 255 bytes
  // Appends a model node; false when all kMaxModelNodes are in use.
  bool AddModel(const ModelNode& node);
  // Removes (model_id, model_node_id), moving the last node into its place; false if absent.
  bool RemoveModel(uint32_t model_id, uint32_t model_node_id);
  int ModelCount() const;

 private:
  void Begin();
  void End();
  uint8_t* base_;
};

// What a reader found. kOk: the out-parameter holds a consistent copy. kUnknownFormat: the area
// holds something other than this version of the format (errno EPROTO). kBusy: the writer kept
// changing it (errno EAGAIN).
enum class ReadResult { kOk, kUnknownFormat, kBusy };

// An area that was never written (all-zero header: the runtime has not got that far) reads as
// empty records, not as an error.
ReadResult ReadProcessInfo(std::span<const uint8_t> area, nds_process_info_t* info,
                           nds_process_info_ext_t* ext);
ReadResult ReadModels(std::span<const uint8_t> area, std::vector<ModelNode>* models);

// The long tag, else the short one; empty when none can be read (the simulated driver's status).
std::string TagOf(std::span<const uint8_t> area);

}  // namespace neuron::nrt::records
