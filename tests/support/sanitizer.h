// What a test needs to know of the build it runs in: whether a sanitizer is compiled in, and how
// much slower the simulated node's processes then run. A test with a deadline that is about
// correctness (a lease's renew deadline, a hang's timeout) scales its periods by
// kSanitizerSlowdown, so that it judges the same order of events under ASan on a loaded 2-core
// machine; speed itself is measured in bench/, never here.
#pragma once

namespace neuron::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAsan = true;
#else
inline constexpr bool kAsan = false;
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
inline constexpr int kSanitizerSlowdown = 3;
#else
inline constexpr bool kSanitized = false;
inline constexpr int kSanitizerSlowdown = 1;
#endif

}  // namespace neuron::testing
