#pragma once
// The objects behind the C API's opaque handles: models (nrt_model_t), tensors (nrt_tensor_t)
// and tensor sets. Internal to libnrt-sim.
//
// Thread-safety: a model is immutable after load except its collective cost cache, which only
// the core executing it touches. Tensor storage is reference counted (slices share it); a
// tensor's bytes are the caller's to synchronise, as with libnrt.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "driver-sim/runtime/engine_model.h"
#include "driver-sim/runtime/memory.h"
#include "driver-sim/runtime/program.h"
#include "driver-sim/runtime/rendezvous.h"
#include "driver-sim/runtime/timing.h"
#include "nrt/nrt.h"

namespace neuron::nrt {

class Runtime;

inline constexpr uint32_t kModelMagic = 0x6e6d646c;   // "nmdl"
inline constexpr uint32_t kTensorMagic = 0x6e74656e;  // "nten"
inline constexpr uint32_t kSetMagic = 0x6e736574;     // "nset"

// One op ready to run on the model's core.
struct LoadedOp {
  const Op* op = nullptr;
  int64_t ns = 0;      // compute and DMA ops; collectives get theirs from the collective model
  int64_t dma_ns = 0;  // the part of ns the DMA queues are busy, overlapped with the compute engine
  // Collectives: this rank's replica group (world ranks) and, once known, the ring.
  std::vector<uint32_t> members;
  bool ring_known = false;
  bool crosses_efa = false;
  uint64_t ring_ranks = 0;
  int64_t ring_ns = 0;
  double wire_bytes = 0;                   // bytes this rank sends (and receives) over EFA
  std::vector<std::pair<int, int>> links;  // NeuronLink hops the ring uses (a < b)
};

// Host bytes behind a tensor, with the memory charge they carry.
struct Storage {
  ~Storage();
  uint8_t* data = nullptr;
  size_t size = 0;
  bool owned = false;  // mmapped by us (else the caller's attached buffer)
  // Charge to release: device memory of core `index`, or host memory of device `index`.
  std::shared_ptr<MemoryLedger> ledger;
  bool device = false;
  int index = -1;
  uint64_t charged = 0;
};

}  // namespace neuron::nrt

struct nrt_model {
  uint32_t magic = neuron::nrt::kModelMagic;
  uint32_t id = 0;
  neuron::nrt::Runtime* runtime = nullptr;
  int vnc = 0;     // first logical core
  int ncores = 1;  // num_tpb
  std::string name;
  std::array<uint8_t, 16> uuid{};
  std::shared_ptr<const neuron::nrt::Program> program;
  std::vector<neuron::nrt::LoadedOp> ops;
  int64_t compute_ns = 0;  // launch + compute/DMA ops of one execution
  double macs = 0;
  double flops = 0;
  // Memory charged at load, per core of the model: code, constants, misc.
  std::array<uint64_t, neuron::nrt::kMemCategories> charged{};
  // Collectives (nrt_load_collectives).
  std::shared_ptr<neuron::nrt::CommWorld> world;
  uint32_t rank = 0;
};

struct nrt_tensor {
  uint32_t magic = neuron::nrt::kTensorMagic;
  std::string name;
  nrt_tensor_placement_t placement = NRT_TENSOR_PLACEMENT_VIRTUAL;
  int vnc = -1;                                   // device tensors: the core whose HBM holds it
  std::shared_ptr<neuron::nrt::Storage> storage;  // null for an empty tensor
  size_t offset = 0;                              // slices
  size_t size = 0;
  std::atomic<uint64_t> completions{0};
};

namespace neuron::nrt {

// A tensor's host bytes (nullptr for an empty tensor).
inline uint8_t* TensorBytes(const nrt_tensor_t* t) {
  return t->storage ? t->storage->data + t->offset : nullptr;
}

struct TensorSet {
  uint32_t magic = kSetMagic;
  std::vector<std::pair<std::string, nrt_tensor_t*>> items;
  nrt_tensor_t* Find(const char* name) const;
};

}  // namespace neuron::nrt
