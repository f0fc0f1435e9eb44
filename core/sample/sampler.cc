#include "core/sample/sampler.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "core/base/component_log.h"
#include "core/sample/internal/counter_files.h"
#include "core/sample/internal/sysfs_reader.h"

namespace neuron {
namespace {

spdlog::logger& SamplerLog() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("sampler");
  return *log;
}

bool HasKey(const std::vector<DatastoreRecord>& records, DatastoreKey key) {
  return std::ranges::binary_search(records, key, {}, &DatastoreRecord::key);
}

}  // namespace

// One helper thread that runs a task handed to it and reports completion. Owned by the
// Sampler; started on first use.
class Sampler::Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void Start(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> l(mu_);
      task_ = std::move(task);
      busy_ = true;
    }
    cv_.notify_all();
  }

  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    done_.wait(l, [this] { return !busy_; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return stop_ || (busy_ && task_); });
      if (stop_) return;
      std::function<void()> task = std::move(task_);
      task_ = nullptr;
      l.unlock();
      task();
      l.lock();
      busy_ = false;
      done_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_;
  std::function<void()> task_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

struct Sampler::Readers {
  std::vector<sysfs_reader::DeviceReader> devices;
  std::vector<sysfs_reader::EfaReader> efas;
};

// One device or EFA to read in this sample, and where its result goes.
struct Sampler::Unit {
  sysfs_reader::DeviceReader* device = nullptr;  // exactly one of device / efa
  sysfs_reader::EfaReader* efa = nullptr;
  const DeviceSample* prev_device = nullptr;  // carried forward by a hot read
  bool full = false;
  int files = 0;  // estimate, to balance threads

  std::optional<DeviceSample> device_out;
  std::optional<EfaSample> efa_out;
  counter_files::ErrorSink errors;

  void Run(uint64_t generation) {
    sysfs_reader::ReadContext ctx{generation, &errors};
    if (efa != nullptr) {
      EfaSample e;
      if (efa->Read(&e, ctx)) {
        e.full_generation = generation;
        efa_out = std::move(e);
      }
      return;
    }
    if (full) {
      DeviceSample d = device->Empty();
      if (!device->ReadFull(&d, ctx)) return;
      d.full_generation = generation;
      d.exit_counters_generation = generation;
      device_out = std::move(d);
      return;
    }
    DeviceSample d = *prev_device;
    if (!device->ReadHot(&d, ctx)) return;
    if (d.state != prev_device->state) {
      device->ReadExitCounters(&d, ctx);
      d.exit_counters_generation = generation;
    }
    device_out = std::move(d);
  }
};

Sampler::Sampler(RootPaths root, Inventory inventory, SamplerOptions options)
    : root_(std::move(root)),
      inventory_(std::move(inventory)),
      options_(std::move(options)),
      datastore_(std::move(options_.datastore)) {
  if (!datastore_) {
    DriverDatastoreOptions o;
    for (const NeuronDevice& d : inventory_.devices) o.devices.push_back(d.index);
    o.records = options_.records;
    datastore_ = MakeDriverDatastoreReader(root_, std::move(o));
  }
  BuildReaders();
}

Sampler::~Sampler() = default;

void Sampler::SetInventory(Inventory inventory) {
  inventory_ = std::move(inventory);
  std::vector<int> devices;
  for (const NeuronDevice& d : inventory_.devices) devices.push_back(d.index);
  datastore_->SetDevices(std::move(devices));
  BuildReaders();
}

void Sampler::BuildReaders() {
  auto r = std::make_unique<Readers>();
  r->devices.reserve(inventory_.devices.size());
  for (const NeuronDevice& d : inventory_.devices) {
    r->devices.emplace_back(root_, d.index, std::max(0, d.physical_cores), d.sysfs_groups);
  }
  r->efas.reserve(inventory_.efas.size());
  for (const EfaInterface& e : inventory_.efas) r->efas.emplace_back(root_, e.name);
  readers_ = std::move(r);
}

void Sampler::RunUnits(std::vector<Unit>& units, const std::function<void()>& caller_first,
                       int caller_first_files) {
  const uint64_t gen = generation_;
  int total = 0;
  for (const Unit& u : units) total += u.files;
  if (options_.threads < 2 || units.size() < 2 || total < options_.min_files_for_threads) {
    caller_first();
    for (Unit& u : units) u.Run(gen);
    return;
  }
  // Greedy split by estimated files, keeping the given order within each thread; the caller
  // also does `caller_first` while the helper starts on its share.
  std::vector<Unit*> mine, theirs;
  int load_mine = caller_first_files, load_theirs = 0;
  for (Unit& u : units) {
    if (load_mine <= load_theirs) {
      mine.push_back(&u);
      load_mine += u.files;
    } else {
      theirs.push_back(&u);
      load_theirs += u.files;
    }
  }
  if (!worker_) worker_ = std::make_unique<Worker>();
  worker_->Start([&theirs, gen] {
    for (Unit* u : theirs) u->Run(gen);
  });
  caller_first();
  for (Unit* u : mine) u->Run(gen);
  worker_->Wait();
}

std::vector<Sampler::Unit> Sampler::PlanUnits(SampleKind kind, Snapshot* snap) {
  std::vector<Unit> units;
  units.reserve(readers_->devices.size() + readers_->efas.size());
  for (sysfs_reader::DeviceReader& r : readers_->devices) {
    Unit u;
    u.device = &r;
    const int cores = r.physical_cores();
    const DeviceSample* prev = last_ ? last_->FindDevice(r.index()) : nullptr;
    if (prev != nullptr && static_cast<int>(prev->cores.size()) != cores) prev = nullptr;
    u.full = kind == SampleKind::kFull || prev == nullptr;
    u.prev_device = prev;
    u.files = u.full ? sysfs_reader::FullFileCount(cores, r.groups()) : 12 + 2 * cores;
    units.push_back(std::move(u));
  }
  for (sysfs_reader::EfaReader& r : readers_->efas) {
    const EfaSample* prev = last_ ? last_->FindEfa(r.name()) : nullptr;
    if (kind == SampleKind::kHot && prev != nullptr) {
      snap->efas.push_back(*prev);  // EFA counters are refreshed by full sweeps only
      continue;
    }
    Unit u;
    u.efa = &r;
    u.files = sysfs_reader::EfaFileCount();
    units.push_back(std::move(u));
  }
  return units;
}

std::set<int> Sampler::DevicesToReread(DatastoreScan* ds) {
  // Those that lost an entry since the last sample (the driver folded it into sysfs before
  // removing it), and, listing the datastores again, those whose entry went away while this
  // sample ran (it may already be folded: drop it from this snapshot).
  std::set<int> reread;
  if (last_) {
    for (const DatastoreRecord& p : last_->processes) {
      if (!HasKey(ds->records, p.key())) reread.insert(p.device);
    }
  }
  const std::vector<DatastoreKey> live = datastore_->List();
  std::erase_if(ds->records, [&](const DatastoreRecord& r) {
    if (std::binary_search(live.begin(), live.end(), r.key())) return false;
    reread.insert(r.device);
    return true;
  });
  return reread;
}

void Sampler::Assemble(std::vector<Unit>& units, const std::set<int>& reread, DatastoreScan ds,
                       Snapshot* snap) {
  snap->errors = std::move(ds.errors);
  counter_files::ErrorSink late;
  sysfs_reader::ReadContext ctx{snap->generation, &late};
  for (Unit& u : units) {
    for (std::string& e : u.errors.errors()) snap->errors.push_back(std::move(e));
    if (u.device_out) {
      if (reread.contains(u.device_out->index)) {
        u.device->ReadExitCounters(&*u.device_out, ctx);
        u.device_out->exit_counters_generation = snap->generation;
      }
      snap->devices.push_back(*std::move(u.device_out));
    }
    if (u.efa_out) snap->efas.push_back(*std::move(u.efa_out));
  }
  for (std::string& e : late.errors()) snap->errors.push_back(std::move(e));
  std::sort(snap->devices.begin(), snap->devices.end(),
            [](const DeviceSample& a, const DeviceSample& b) { return a.index < b.index; });
  if (snap->kind == SampleKind::kHot) {
    // Carried EFAs went first; restore inventory order.
    std::vector<EfaSample> ordered;
    for (const sysfs_reader::EfaReader& r : readers_->efas) {
      for (EfaSample& e : snap->efas) {
        if (e.name == r.name()) ordered.push_back(std::move(e));
      }
    }
    snap->efas = std::move(ordered);
  }
  snap->processes = std::move(ds.records);
  snap->datastore_source = datastore_->State();
  if (options_.records) {
    // Only the records of processes this snapshot holds: the others went away meanwhile.
    snap->runtime_records = options_.records->Latest();
    std::erase_if(snap->runtime_records.records,
                  [&](const RuntimeRecords& r) { return !HasKey(snap->processes, r.key()); });
  }
}

std::shared_ptr<const Snapshot> Sampler::Sample(SampleKind kind) {
  const auto start = std::chrono::steady_clock::now();
  auto snap = std::make_shared<Snapshot>();
  snap->generation = ++generation_;
  if (!last_) kind = SampleKind::kFull;
  snap->kind = kind;
  snap->steady = start;
  snap->wall = std::chrono::system_clock::now();
  snap->lnc = inventory_.lnc > 0 ? inventory_.lnc : 1;

  // 1. sysfs, and the datastores on the calling thread meanwhile.
  std::vector<Unit> units = PlanUnits(kind, snap.get());
  DatastoreScan ds;
  const int ds_files = 4 + 2 * static_cast<int>(last_ ? last_->processes.size() : 0);
  RunUnits(
      units, [&] { ds = datastore_->ReadAll(); }, ds_files);
  // 2. Devices whose exit counters (status, other_info totals) must be read now, after the
  // datastore reads.
  const std::set<int> reread = DevicesToReread(&ds);
  // 3. Assemble, in inventory order.
  Assemble(units, reread, std::move(ds), snap.get());

  snap->duration = std::chrono::steady_clock::now() - start;
  if (!snap->errors.empty()) {
    SamplerLog().debug("sample {}: {} errors, first: {}", snap->generation, snap->errors.size(),
                       snap->errors.front());
  }
  last_ = snap;
  return last_;
}

}  // namespace neuron
