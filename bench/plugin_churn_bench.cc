// plugin_churn_bench: how often the allocator's answers are contiguous and NeuronLink-connected
// when such a set is free, per request size, beside two baselines (the kubelet's own random pick
// and the lowest free IDs), on one churn trace of a busy trn1.32xlarge: the comparison
// tests/core/allocator_test.cc asserts on (tests/support/alloc_churn.h explains the trace, the
// baselines, and why all three are judged on the same free sets).
//
//   plugin_churn_bench [--arrivals N] [--seed S]    defaults: the test's 10,000 and 4242
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/model/allocator.h"
#include "core/model/catalog.h"
#include "tests/support/alloc_churn.h"

namespace {

// The allocator as the plugin builds it on a trn1.32xlarge (LNC 1: 2 logical cores per device).
neuron::Allocator Trn1() {
  const neuron::InstanceSpec* spec = *neuron::FindInstance("trn1.32xlarge");
  std::vector<std::vector<int>> neighbours(spec->devices);
  for (int d = 0; d < spec->devices; ++d) neighbours[d] = neuron::ConnectedDevices(*spec, d);
  return neuron::Allocator(neuron::Topology(neighbours), neuron::LogicalCoresPerDevice(*spec, 1));
}

// A positive integer option, or exit with a message naming it.
int Positive(const char* name, const char* text) {
  char* end = nullptr;
  const int64_t v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0 || v > INT32_MAX) {
    std::fprintf(stderr, "plugin_churn_bench: %s wants a positive integer, got \"%s\"\n", name,
                 text);
    std::exit(2);
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  int arrivals = 10000, seed = 4242;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--arrivals") == 0 && i + 1 < argc) {
      arrivals = Positive("--arrivals", argv[++i]);
    } else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = Positive("--seed", argv[++i]);
    } else {
      std::fprintf(stderr, "usage: plugin_churn_bench [--arrivals N] [--seed S]\n");
      return 2;
    }
  }
  const neuron::Allocator a = Trn1();
  const neuron::testing::ChurnComparison c = neuron::testing::CompareChurn(
      neuron::testing::ChurnTrace(arrivals, static_cast<uint32_t>(seed)), a,
      /*random_seed=*/7);
  std::printf("churn trn1.32xlarge, %d arrivals (seed %d):\n%s", arrivals, seed,
              neuron::testing::FormatChurnTable(c).c_str());
  return 0;
}
