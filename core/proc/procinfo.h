#pragma once
// Process information for the agent and the tools: command lines, CPU times, cgroups and the
// device nodes the processes hold open (by device number), and the system's CPU times
// (docs/tools-ux.md#ls-sources, #top-data).
//
// Where it reads (docs/architecture.md#process-information): ROOT/proc when it exists (the host's
// /proc mounted into the agent's container, so host PIDs from the datastores resolve), else this
// process's /proc (the simulator, where runtime processes are our neighbours). No other code spells
// "/proc".
//
// Files are read without stat() (procfs reports size 0) and parsed here, so consumers only turn
// the values into columns (docs/style.md#collectors-translate). A process that has gone is
// NotFound; other failures name the file. ProcReader is immutable after construction and
// thread-safe.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/driver/sysfs_names.h"

namespace neuron {

// The aggregate "cpu" line of /proc/stat, in clock ticks (proc(5)), and the number of "cpuN"
// lines (online vCPUs).
struct SystemCpuTimes {
  uint64_t user = 0;
  uint64_t nice = 0;
  uint64_t system = 0;
  uint64_t idle = 0;
  uint64_t iowait = 0;
  uint64_t irq = 0;
  uint64_t softirq = 0;
  uint64_t steal = 0;
  int cpus = 0;

  // Time spent in user mode (user + nice) and in the kernel on behalf of work (system + irq +
  // softirq); total adds idle, iowait and steal. guest time is already inside user.
  uint64_t UserTicks() const { return user + nice; }
  uint64_t SystemTicks() const { return system + irq + softirq; }
  uint64_t TotalTicks() const { return UserTicks() + SystemTicks() + idle + iowait + steal; }
};

// Fields of /proc/<pid>/stat that the tools use (proc(5) numbering in comments).
struct ProcessStat {
  int pid = 0;
  std::string comm;         // (2), without the parentheses
  char state = '?';         // (3)
  int ppid = 0;             // (4)
  uint64_t utime = 0;       // (14) clock ticks
  uint64_t stime = 0;       // (15)
  uint64_t cutime = 0;      // (16) of the children it waited for
  uint64_t cstime = 0;      // (17)
  uint64_t start_time = 0;  // (22) clock ticks after boot: tells a reused PID apart
  int64_t rss_pages = 0;    // (24)
};

// "cpu  4705 356 584 3699 23 0 23 0 0 0\ncpu0 ..." -> totals and the count of cpuN lines.
absl::StatusOr<SystemCpuTimes> ParseSystemCpuTimes(std::string_view text, std::string_view source);
// One /proc/<pid>/stat line. comm may hold spaces and parentheses: it runs to the last ')'.
absl::StatusOr<ProcessStat> ParseProcessStat(std::string_view text, std::string_view source);
// /proc/<pid>/cmdline (arguments separated and ended by NUL) as a shell-like line: NULs become
// spaces, trailing NULs and spaces go. Empty for kernel threads and zombies.
std::string FormatCommandLine(std::string_view raw);
// A character device's number as a sysfs class device's `dev` file prints it: "<major>:<minor>\n".
absl::StatusOr<dev_t> ParseDeviceNumber(std::string_view text, std::string_view source);
// The number of ROOT/dev/neuronN as the driver's class device states it (its major is dynamic:
// docs/driver-interface.md#device-nodes), read anew on every call: a reloaded driver may take
// another. A device that is gone is NotFound.
absl::StatusOr<dev_t> NeuronDeviceNumber(const RootPaths& root, int index);

class ProcReader {
 public:
  // Uses ROOT/proc if that directory exists, else /proc.
  explicit ProcReader(const RootPaths& root);
  // Uses exactly `proc_dir` (tests, benchmarks).
  static ProcReader AtDirectory(std::filesystem::path proc_dir);

  const std::filesystem::path& proc_dir() const { return proc_dir_; }
  // True when the host's /proc under ROOT is used, i.e. PIDs are the host's.
  bool uses_root_proc() const { return uses_root_proc_; }

  absl::StatusOr<SystemCpuTimes> SystemCpu() const;
  absl::StatusOr<ProcessStat> Stat(int pid) const;
  // The command line, cut at `max_bytes` (COMMAND columns show at most 80 characters). When
  // cmdline is empty (a zombie, a kernel thread) it is "[comm]", as ps prints it.
  absl::StatusOr<std::string> CommandLine(int pid, size_t max_bytes = 4096) const;
  // /proc/<pid>/cgroup as text (pod identity is parsed from it: core/proc/pod_identity.h).
  absl::StatusOr<std::string> Cgroup(int pid) const;

  // Processes whose open files a scan could not see: another user's fd/ directory is
  // unreadable without CAP_SYS_PTRACE, so a normal user's scan is partial and must say so.
  struct FdScanProblems {
    int processes = 0;  // fd/ directories that could not be read (EACCES, EPERM)
    std::string first;  // the first of them with its error: "open /proc/1/fd: Permission denied"
  };

  // What one pass over every process's open files found (HoldersOf).
  struct DeviceHolders {
    // For each device number asked for that some process holds: the PIDs, ascending.
    std::map<dev_t, std::vector<int>> pids;
    // Processes whose descriptors could not be seen: with any, a device nobody else holds may
    // still be held by one of them.
    FdScanProblems problems;
    int processes = 0;    // fd/ directories read
    int descriptors = 0;  // descriptors looked at
  };

  // The processes holding character devices open, found by device number
  // (docs/architecture.md#noticing-runtimes), never by the link's path: a container names its
  // device nodes its own way (its /dev/neuron0 may be the host's neuron5), the number is the
  // host's. Each descriptor is statx'd through its fd/ link with AT_STATX_DONT_SYNC, so a file
  // on a network filesystem costs no round trip. Descriptors opened write-only are left out
  // (their fdinfo "flags:"): that is the Neuron driver's free-access mode, which attaches
  // nothing (docs/driver-interface.md#abi-open-semantics). Processes that exit meanwhile are
  // skipped. Cost: one statx per open descriptor of every process (bench/proc_scan_bench.cc).
  DeviceHolders HoldersOf(const std::vector<dev_t>& devices) const;

  // Why a scan of proc_dir may miss some of the node's processes, or nullopt when it sees them
  // all: the host's /proc under ROOT (the DaemonSet's mount) does, and so does this process's
  // own /proc in the host's PID namespace; a container's own /proc shows only its namespace.
  std::optional<std::string> MissesProcesses() const;

  // This process's PID as proc_dir numbers it (the host's PID when it is the host's /proc seen
  // from a container), from proc_dir/self; nullopt when that cannot be read.
  std::optional<int> SelfPid() const;

  // Clock ticks per second (sysconf(_SC_CLK_TCK)), the unit of the CPU times above.
  static int64_t TicksPerSecond();

 private:
  ProcReader(std::filesystem::path proc_dir, bool uses_root_proc)
      : proc_dir_(std::move(proc_dir)), uses_root_proc_(uses_root_proc) {}
  absl::StatusOr<std::string> ReadProcFile(int pid, const char* name, size_t max_bytes) const;

  std::filesystem::path proc_dir_;
  bool uses_root_proc_ = false;
};

}  // namespace neuron
