#pragma once
// One execution of a compiled program (a NEFF) through libnrt loaded at run time, for the active
// health check (docs/OPERATIONS.md#active-check). The library is found as the records reader
// finds it (LibnrtPath in runtime_records.h: --libnrt, else $NEURON_LIBNRT, else libnrt.so.1 on
// the library path) and loaded with dlopen, so the agent's image carries no runtime of its own.
//
// nrt_init may run once per process and libnrt keeps state until the process ends (the cores it
// reserved, its threads), so RunNeffOnce is meant for a child process that exits after it: the
// caller sets NEURON_RT_VISIBLE_CORES (and NEURON_RT_ROOT_COMM_ID for an exchange) in that
// child's environment. Not thread-safe; one call per process.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron {

struct NeffRun {
  std::string libnrt;  // the library's path or name, as dlopen takes it
  std::string neff;    // the program's file
  // Input tensors by name with their bytes; output tensors by name with their sizes.
  std::vector<std::pair<std::string, std::string>> inputs = {};
  std::vector<std::pair<std::string, size_t>> outputs = {};
  // world > 1: the program has collectives; this process is rank `rank` of `world`
  // (nrt_load_collectives).
  uint32_t rank = 0;
  uint32_t world = 1;
  // Executions in a row, each timed and read back. An exchange's first execution includes the
  // wait for the other rank's process to start, so its caller times the second.
  int executions = 1;
};

struct NeffResult {
  int status = 0;           // nrt_execute's NRT_STATUS; 0 success
  std::string status_text;  // nrt_get_status_as_str's, when the library has it
  int64_t execute_ns = 0;   // the wall time of the last nrt_execute alone
  // Per execution that succeeded: the outputs by name, as read back.
  std::vector<std::vector<std::pair<std::string, std::string>>> executions = {};
};

// Loads libnrt, initializes it, loads the NEFF on the first visible core, executes it
// `run.executions` times and reads the outputs back after each; stops at a failed execution. A
// status when the library cannot be loaded or lacks a function (FailedPrecondition, naming the
// path), when a file cannot be read, or when a call before the execution fails (Internal, naming
// the call and its NRT_STATUS); an execution that fails is a NeffResult with its status.
absl::StatusOr<NeffResult> RunNeffOnce(const NeffRun& run);

// Whether `libnrt` loads and has nrt_execute, without initializing it: OK, or FailedPrecondition
// saying what dlopen said or which function it lacks. Unloads it again.
absl::Status ProbeLibnrt(const std::string& libnrt);

}  // namespace neuron
