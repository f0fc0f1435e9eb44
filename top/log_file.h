#pragma once
// Where neuron-top logs (top/README.md#neuron-top), and opening that file so that no other user's
// file or link is ever written: the log can name PIDs and paths, and a tool an operator runs as
// root must not append to whatever a planted symlink points at. Thread-compatible.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "core/model/node_flags.h"

namespace spdlog::sinks {
class sink;
}

namespace neuron::top {

// $XDG_STATE_HOME/neuron-top.log, else $HOME/.local/state/neuron-top.log. With neither set, a
// file in a directory made for this run only: $TMPDIR (else /tmp) / neuron-top-XXXXXX, created by
// mkdtemp with mode 0700, so its name cannot be guessed and nobody else can enter it. Never a
// fixed name in a shared directory.
absl::StatusOr<std::string> DefaultLogFile(const GetEnvFn& getenv);

// Opens `path` for appending: missing parent directories are made 0700, the file is created 0600
// when absent, a symlink as its last component is refused (O_NOFOLLOW) and so is anything but a
// regular file this user owns. The error says which.
absl::StatusOr<UniqueFd> OpenLogFile(const std::string& path);

// An spdlog sink appending every formatted line to `fd` (thread-safe, as spdlog's _mt sinks).
std::shared_ptr<spdlog::sinks::sink> MakeFdSink(UniqueFd fd);

}  // namespace neuron::top
