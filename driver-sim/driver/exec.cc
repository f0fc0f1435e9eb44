#include "driver-sim/driver/exec.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "driver-sim/driver/sim_driver_proto.h"

namespace neuron::sim {

std::string SimDriverLibrary() {
  const char* env = std::getenv("NEURON_SIM_DRIVER_LIB");
  return env != nullptr && *env != '\0' ? env : NEURON_SIM_DRIVER_LIB;
}

std::string SimLibnrtDir() {
  const char* env = std::getenv("NEURON_SIM_LIBNRT_DIR");
  return env != nullptr && *env != '\0' ? env : NEURON_SIM_LIBNRT_DIR;
}

bool SimDriverLoaded() { return dlsym(RTLD_DEFAULT, "neuron_sim_driver_loaded") != nullptr; }

namespace {

// A sanitizer's runtime must stay first in LD_PRELOAD.
bool IsSanitizerRuntime(std::string_view entry) {
  const size_t slash = entry.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? entry : entry.substr(slash + 1);
  for (std::string_view prefix : {"libasan", "libtsan", "libubsan", "liblsan", "libhwasan"}) {
    if (base.starts_with(prefix)) return true;
  }
  return false;
}

}  // namespace

std::string PreloadWith(std::string_view current, std::string_view library) {
  // LD_PRELOAD separates entries with spaces or colons.
  std::vector<std::string_view> entries;
  for (size_t at = 0; at < current.size();) {
    const size_t end = std::min(current.find_first_of(" :", at), current.size());
    if (end > at) entries.push_back(current.substr(at, end - at));
    at = end + 1;
  }
  if (std::find(entries.begin(), entries.end(), library) != entries.end()) {
    return std::string(current);
  }
  // Right after the sanitizer runtimes and before every other preload: a preload that calls
  // libc directly (umockdev's does) would otherwise hide the device node from us.
  auto pos = entries.begin();
  while (pos != entries.end() && IsSanitizerRuntime(*pos)) ++pos;
  entries.insert(pos, library);
  std::string out;
  for (std::string_view e : entries) {
    if (!out.empty()) out += ' ';
    out += e;
  }
  return out;
}

absl::Status PrepareSimDriverEnv(const RootPaths& root) {
  const std::filesystem::path socket = root.root() / NSIM_DRIVER_SOCKET;
  struct stat st {};
  if (stat(socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(fmt::format(
        "no simulated driver at {} ({} is missing); start one with neuron-sim up --root {}",
        root.root().string(), socket.string(), root.root().string()));
  }
  const std::string library = SimDriverLibrary();
  if (access(library.c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(
        fmt::format("the simulated driver's library {}: {}", library, std::strerror(errno)));
  }
  const char* preload = std::getenv("LD_PRELOAD");
  setenv("LD_PRELOAD", PreloadWith(preload != nullptr ? preload : "", library).c_str(), 1);
  setenv("NEURON_ROOT", root.root().c_str(), 1);
  const char* libs = std::getenv("LD_LIBRARY_PATH");
  const std::string dir = SimLibnrtDir();
  if (libs == nullptr || *libs == '\0') {
    setenv("LD_LIBRARY_PATH", dir.c_str(), 1);
  } else if (std::string_view(libs).find(dir) == std::string_view::npos) {
    setenv("LD_LIBRARY_PATH", (dir + ":" + libs).c_str(), 1);
  }
  // A sanitized program insists that its runtime comes first; ours follows it in LD_PRELOAD but
  // is loaded before the program's own libraries, which only the order check minds.
  if (dlsym(RTLD_DEFAULT, "__asan_init") != nullptr) {
    const char* asan = std::getenv("ASAN_OPTIONS");
    std::string options = asan != nullptr ? asan : "";
    if (options.find("verify_asan_link_order") == std::string::npos) {
      options += options.empty() ? "verify_asan_link_order=0" : ":verify_asan_link_order=0";
      setenv("ASAN_OPTIONS", options.c_str(), 1);
    }
  }
  return absl::OkStatus();
}

absl::Status ExecUnderSimDriver(const RootPaths& root, const std::vector<std::string>& command,
                                const std::string& path) {
  if (command.empty()) return absl::InvalidArgumentError("nothing to run");
  if (absl::Status s = PrepareSimDriverEnv(root); !s.ok()) return s;
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  if (path.empty()) {
    execvp(argv[0], argv.data());
  } else {
    execv(path.c_str(), argv.data());
  }
  return absl::NotFoundError(fmt::format("cannot run {}: {}", command[0], std::strerror(errno)));
}

}  // namespace neuron::sim
