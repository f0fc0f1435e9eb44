#include "monitor/exporter.h"

#include <dirent.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/proc/procinfo.h"

namespace neuron::monitor {

Labels DeviceLabels(int device) { return {L("neuron_device", Str(device))}; }
Labels CoreLabels(int device, int logical_core) {
  return {L("neuron_device", Str(device)), L("neuroncore", Str(logical_core))};
}
Labels InstanceLabels(const ScrapeContext& ctx) {
  if (!ctx.options.compat_instance_labels) return {};
  const Inventory& inv = ctx.inventory();
  return {L("availability_zone", ctx.options.availability_zone),
          L("instance_id", inv.instance_id),
          L("instance_name", ctx.options.instance_name),
          L("instance_type", inv.instance_type),
          L("region", ctx.options.region),
          L("subnet_id", ctx.options.subnet_id)};
}

namespace {

struct CollectorEntry {
  std::string_view name;
  std::unique_ptr<Collector> (*make)();
};

// Output order. Each name is its collector's name() (the collector label of the self-metrics).
constexpr CollectorEntry kCollectors[] = {
    {"device", MakeDeviceCollector},
    {"memory", MakeMemoryCollector},
    {"core", MakeCoreCollector},
    {"execution", MakeExecutionCollector},
    {"health", MakeHealthCollector},
    {"power", MakePowerCollector},
    {"efa", MakeEfaCollector},
    {"allocation", MakeAllocationCollector},
    {"ultraserver", MakeUltraServerCollector},
};

}  // namespace

const std::vector<std::string_view>& CollectorNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> n;
    for (const CollectorEntry& e : kCollectors) n.push_back(e.name);
    return n;
  }();
  return names;
}

std::vector<std::unique_ptr<Collector>> MakeCollectors(const ExporterOptions& options) {
  std::vector<std::unique_ptr<Collector>> c;
  for (const CollectorEntry& e : kCollectors) {
    if (!options.disabled_collectors.contains(e.name)) c.push_back(e.make());
  }
  if (options.compat) c.push_back(MakeCompatCollector());
  return c;
}

absl::Status ValidateTelemetryPath(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(fmt::format("telemetry path \"{}\" must start with /", path));
  }
  if (path == "/" || path == "/healthz" || path == "/readyz") {
    return absl::InvalidArgumentError(
        fmt::format("telemetry path {} is taken by the exporter's other endpoints", path));
  }
  for (const char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7F || c == '?' || c == '#') {
      return absl::InvalidArgumentError(fmt::format(
          "telemetry path \"{}\" may not hold whitespace, control characters, ? or #", path));
    }
  }
  return absl::OkStatus();
}

namespace {

// process_* from /proc/self (prometheus-cpp has no process collector).
void ProcessMetrics(Families& out) {
  static const double start_time = [] {
    const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
    return std::chrono::duration<double>(since_epoch).count();
  }();
  std::ifstream in("/proc/self/stat");
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<ProcessStat> st = ParseProcessStat(ss.str(), "/proc/self/stat");
  if (st.ok()) {
    const double tps = static_cast<double>(ProcReader::TicksPerSecond());
    FamilyBuilder cpu =
        Counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.");
    cpu.Add({}, static_cast<double>(st->utime + st->stime) / tps);
    cpu.Finish(out);
    FamilyBuilder rss = Gauge("process_resident_memory_bytes", "Resident memory size in bytes.");
    rss.Add({}, static_cast<double>(st->rss_pages) * static_cast<double>(sysconf(_SC_PAGESIZE)));
    rss.Finish(out);
  }
  // readdir, not std::filesystem: the Sampler keeps ~600 directory handles on a trn2.48xlarge
  // and a path object per entry cost more than the rest of a shared scrape.
  if (DIR* dir = opendir("/proc/self/fd")) {
    int fds = 0;
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++fds;
    }
    closedir(dir);
    FamilyBuilder f = Gauge("process_open_fds", "Number of open file descriptors.");
    f.Add({}, fds);  // as client_golang counts: the directory's own descriptor included
    f.Finish(out);
  }
  FamilyBuilder start =
      Gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.");
  start.Add({}, start_time);
  start.Finish(out);
}

// neuron_exporter_source_up (docs/architecture.md#unknown-is-not-zero), one series per source once
// it was tried.
void SourceMetrics(const ExporterView& view, Families& out) {
  FamilyBuilder up =
      Gauge("neuron_exporter_source_up",
            "1 when the live source could be read: sysfs (device state, latest sample), datastore "
            "(per-process counters through /dev/neuronN, latest sample), runtime_records (the "
            "runtimes' process and model records through libnrt, latest sample), kmsg (the kernel "
            "log), podresources (the kubelet's last List). Series that need a source that is down "
            "are absent, never 0.");
  const std::pair<std::string_view, SourceState> sources[] = {
      {"sysfs", SysfsState(*view.current)},
      {"datastore", view.current->datastore_source},
      {"runtime_records", view.current->runtime_records.state},
      {"kmsg", view.kmsg},
      {"podresources", view.pod_resources},
  };
  for (const auto& [name, state] : sources) {
    if (state.known) up.Add({L("source", std::string(name))}, state.up ? 1 : 0);
  }
  up.Finish(out);
}

// `s` with HTML's special characters escaped, for text and attribute values.
std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// What an operator who opens the exporter's address in a browser needs: which exporter, which
// build, and the endpoints, with the telemetry path as configured.
std::string LandingPage(const ExporterOptions& options) {
  const std::string metrics = HtmlEscape(options.telemetry_path);
  return fmt::format(
      "<html><head><title>Neuron Exporter</title></head><body><h1>Neuron Exporter</h1>\n"
      "<p>neuron-exporter, version {} (revision: {})</p>\n<ul>\n"
      "<li><a href=\"{}\">Metrics</a> ({})</li>\n"
      "<li><a href=\"/healthz\">Health</a> (/healthz)</li>\n"
      "<li><a href=\"/readyz\">Readiness</a> (/readyz)</li>\n</ul>\n</body></html>\n",
      HtmlEscape(options.version), HtmlEscape(options.revision), metrics, metrics);
}

}  // namespace

Exporter::Exporter(ExporterState& source, ExporterOptions options)
    : source_(source), options_(std::move(options)), collectors_(MakeCollectors(options_)) {
  Families ignored;
  ProcessMetrics(ignored);  // fixes process_start_time_seconds at construction
}

Exporter::~Exporter() = default;

// The collectors' text for one view, with what keeps the view's parts alive (so the pointers
// compared in Matches() cannot be reused by other objects).
struct Exporter::Rendered {
  std::shared_ptr<const Snapshot> current;
  std::shared_ptr<const Snapshot> base;
  std::shared_ptr<const Inventory> inventory;
  std::shared_ptr<const PodAssignments> pods;
  uint64_t hw_errors_version = 0;
  std::shared_ptr<const NodeHealth> health;
  std::string text;
  std::vector<CollectorResult> results;

  bool Matches(const ExporterView& v) const {
    return current == v.current && base == v.base && inventory == v.inventory && pods == v.pods &&
           hw_errors_version == v.hw_errors_version && health == v.health;
  }
};

std::vector<Exporter::CollectorResult> Exporter::CollectNode(const ExporterView& view,
                                                             Families& out) const {
  const ScrapeContext ctx{view, options_, source_};
  std::vector<CollectorResult> results;
  results.reserve(collectors_.size());
  for (const auto& c : collectors_) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = c->Collect(ctx, out);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    results.push_back({std::string(c->name()), secs, s.ok()});
  }
  return results;
}

void Exporter::SelfMetrics(const ExporterView& view, const std::vector<CollectorResult>& results,
                           Families& out) const {
  FamilyBuilder duration = Gauge("neuron_exporter_collector_duration_seconds",
                                 "Time this scrape spent in each collector.");
  FamilyBuilder success = Gauge("neuron_exporter_collector_success",
                                "1 if the collector succeeded in this scrape; absent data is not "
                                "a failure.");
  for (const CollectorResult& r : results) {
    const Labels l{L("collector", r.name)};
    duration.Add(l, r.seconds);
    success.Add(l, r.ok ? 1 : 0);
  }
  duration.Finish(out);
  success.Finish(out);

  FamilyBuilder up = Gauge("neuron_up",
                           "1 when the Neuron device class directory is present and at least one "
                           "device was read.");
  up.Add({}, view.current->devices.empty() ? 0 : 1);
  up.Finish(out);
  SourceMetrics(view, out);
  FamilyBuilder build = Gauge("neuron_exporter_build_info",
                              "Exporter version, source revision and compiler; always 1.");
  build.Add({L("compiler", options_.compiler), L("revision", options_.revision),
             L("version", options_.version)},
            1);
  build.Finish(out);
  FamilyBuilder errors = Counter(
      "neuron_exporter_read_errors_total",
      "Counter files or datastores found malformed (their series are left out); the log names "
      "each file.");
  errors.Add({}, static_cast<double>(source_.read_errors()));
  errors.Finish(out);
  FamilyBuilder samples =
      Counter("neuron_exporter_samples_total",
              "Samples taken; scrapes within the sharing window reuse the latest one.");
  samples.Add({}, static_cast<double>(source_.samples()));
  samples.Finish(out);
  if (const PodResourcesCache* pods = source_.pod_cache()) {
    FamilyBuilder perr = Counter("neuron_exporter_pod_resources_errors_total",
                                 "Failed PodResources List() refreshes.");
    perr.Add({}, static_cast<double>(pods->failures()));
    perr.Finish(out);
    if (const auto last = source_.pod_last_success()) {
      FamilyBuilder ok = Gauge("neuron_exporter_pod_resources_last_success_timestamp_seconds",
                               "Time of the last successful PodResources List().");
      ok.Add({}, std::chrono::duration<double>(last->time_since_epoch()).count());
      ok.Finish(out);
    }
  }
  if (options_.exporter_metrics) ProcessMetrics(out);
}

std::vector<prometheus::MetricFamily> Exporter::Collect() const {
  Families out;
  const ExporterView view = source_.Get();
  const std::vector<CollectorResult> results = CollectNode(view, out);
  SelfMetrics(view, results, out);
  return out;
}

std::string Exporter::RenderMetrics() const {
  const ExporterView view = source_.Get();
  std::shared_ptr<const Rendered> rendered;
  {
    std::lock_guard<std::mutex> lock(render_mu_);
    if (rendered_ != nullptr && rendered_->Matches(view)) {
      rendered = rendered_;
    } else {
      auto r = std::make_shared<Rendered>();
      r->current = view.current;
      r->base = view.base;
      r->inventory = view.inventory;
      r->pods = view.pods;
      r->hw_errors_version = view.hw_errors_version;
      r->health = view.health;
      Families families;
      r->results = CollectNode(view, families);
      r->text.reserve(rendered_ != nullptr ? rendered_->text.size() + 4096 : size_t{64} * 1024);
      AppendText(families, r->text);
      ++renders_;
      rendered = r;
      // A scrape that got an older view (it sampled first, rendered second) does not evict
      // the newer one.
      if (rendered_ == nullptr || rendered_->current->generation <= view.current->generation) {
        rendered_ = std::move(r);
      }
    }
  }
  Families self;
  SelfMetrics(view, rendered->results, self);
  std::string body;
  body.reserve(rendered->text.size() + 4096);
  body += rendered->text;
  AppendText(self, body);
  return body;
}

uint64_t Exporter::renders() const {
  std::lock_guard<std::mutex> lock(render_mu_);
  return renders_;
}

std::map<std::string, HttpHandler> Exporter::Handlers() const {
  std::map<std::string, HttpHandler> h;
  h[options_.telemetry_path] = [this](const HttpRequest&) {
    HttpResponse r;
    if (absl::Status ready = source_.Ready(); !ready.ok()) {
      r.status = 503;
      r.body = "not ready: " + std::string{ready.message()} + "\n";
      return r;
    }
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = RenderMetrics();
    return r;
  };
  // Readiness (the DaemonSet's probe): the inventory read and the first sample taken.
  h["/readyz"] = [this](const HttpRequest&) {
    HttpResponse r;
    if (absl::Status ready = source_.Ready(); !ready.ok()) {
      r.status = 503;
      r.body = "not ready: " + std::string{ready.message()} + "\n";
      return r;
    }
    r.body = "ok\n";
    return r;
  };
  h["/healthz"] = [](const HttpRequest&) {
    HttpResponse r;
    r.body = "ok\n";
    return r;
  };
  h["/"] = [page = LandingPage(options_)](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.body = page;
    return r;
  };
  return h;
}

}  // namespace neuron::monitor
