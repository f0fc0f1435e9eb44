#pragma once
// FNV-1a, 64 bits: a stable, well-spread number from text (made-up identities that must be the
// same from run to run, a short suffix that keeps long names apart). Not for security.
#include <cstdint>
#include <string_view>

namespace neuron {

inline uint64_t Fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace neuron
