// A driver for fuzz targets built without libFuzzer (the gcc presets): it replays every file of the
// seed corpora given on the command line, then mutates them for a while with a fixed seed. That is
// the smoke run `make test` does on every target; `make fuzz` builds the same targets with clang's
// libFuzzer for coverage-guided runs (tests/fuzz/CMakeLists.txt, docs/RELIABILITY.md#fuzzing).
//
//   <target> [--iterations N] [--seed S] CORPUS_DIR_OR_FILE...
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/base/unique_fd.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

// The input being run, written to ./crash-input when it crashes (like libFuzzer's crash-<sha>),
// so that it can become a corpus file and a regression test.
const std::vector<uint8_t>* g_current = nullptr;

void SaveCrash(int sig) {
  if (g_current != nullptr) {
    // In a signal handler: UniqueFd's close() is async-signal-safe.
    const neuron::UniqueFd fd(::open("crash-input", O_WRONLY | O_CREAT | O_TRUNC, 0644));
    if (fd) (void)!::write(fd.get(), g_current->data(), g_current->size());
    static const char kMsg[] = "fuzz driver: crashing input written to ./crash-input\n";
    (void)!::write(2, kMsg, sizeof(kMsg) - 1);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

std::vector<uint8_t> Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// libFuzzer's cheapest mutations: flip, set, insert, erase, duplicate a span, splice two inputs.
void Mutate(std::vector<uint8_t>& d, const std::vector<std::vector<uint8_t>>& pool,
            std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  static constexpr uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, '\n', ',', '-', ':', ' ', '9'};
  switch (rng() % 6) {
    case 0:
      if (!d.empty()) d[pick(d.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 1:
      if (!d.empty()) d[pick(d.size())] = kInteresting[pick(sizeof(kInteresting))];
      break;
    case 2:
      d.insert(d.begin() + static_cast<long>(pick(d.size() + 1)),
               kInteresting[pick(sizeof(kInteresting))]);
      break;
    case 3:
      if (!d.empty()) d.erase(d.begin() + static_cast<long>(pick(d.size())));
      break;
    case 4:
      if (!d.empty() && d.size() < 1 << 20) {
        const size_t from = pick(d.size()), len = 1 + pick(std::min<size_t>(16, d.size() - from));
        std::vector<uint8_t> span(d.begin() + static_cast<long>(from),
                                  d.begin() + static_cast<long>(from + len));
        d.insert(d.begin() + static_cast<long>(pick(d.size() + 1)), span.begin(), span.end());
      }
      break;
    default: {
      const std::vector<uint8_t>& other = pool[pick(pool.size())];
      d.resize(pick(d.size() + 1));
      d.insert(d.end(), other.begin() + static_cast<long>(pick(other.size() + 1)), other.end());
    }
  }
}

// The seeds at `path` (a file, or every file of a directory) into `pool`. A path that does not
// exist, cannot be read or is a directory without files is an error: a misspelt corpus must fail
// the smoke test, not run it on nothing.
bool AddSeeds(const std::filesystem::path& path, std::vector<std::vector<uint8_t>>& pool) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
      if (!e.is_regular_file()) continue;
      pool.push_back(Slurp(e.path()));
      ++files;
    }
    if (ec || files == 0) {
      std::fprintf(stderr, "fuzz driver: corpus directory %s: %s\n", path.c_str(),
                   ec ? ec.message().c_str() : "no seed files");
      return false;
    }
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!std::filesystem::is_regular_file(path, ec) || !in) {
    std::fprintf(stderr, "fuzz driver: corpus %s: %s\n", path.c_str(),
                 ec ? ec.message().c_str() : "not a readable file or directory");
    return false;
  }
  pool.push_back(Slurp(path));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  long iterations = 20000;
  uint64_t seed = 1;
  std::vector<std::vector<uint8_t>> pool;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (!AddSeeds(argv[i], pool)) {
      return 2;
    }
  }
  if (pool.empty()) {
    std::fprintf(stderr, "fuzz driver: no seed inputs given\n");
    return 2;
  }
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, SaveCrash);
  for (const auto& input : pool) {
    g_current = &input;
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::mt19937_64 rng(seed);
  for (long i = 0; i < iterations; ++i) {
    std::vector<uint8_t> input = pool[rng() % pool.size()];
    for (int m = 1 + static_cast<int>(rng() % 4); m > 0; --m) Mutate(input, pool, rng);
    g_current = &input;
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("fuzz driver: %zu seeds replayed, %ld mutated inputs run, no crash\n", pool.size(),
              iterations);
  return 0;
}
