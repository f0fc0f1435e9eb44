#include "monitor/front.h"

#include <spdlog/spdlog.h>

#include <atomic>

#include "core/base/component_log.h"
#include "http/local_client.h"

namespace neuron::monitor {
namespace {

using Clock = std::chrono::steady_clock;

// What the handlers share: the count of forwards under way and, per upstream, when a failure was
// last logged and how many went unlogged since.
struct FrontState {
  explicit FrontState(const FrontOptions& o)
      : options(o), max_in_flight(std::max(1, o.threads - 1)), log(ComponentLogger("front")) {}
  const FrontOptions options;
  const int max_in_flight;
  const std::shared_ptr<spdlog::logger> log;
  std::atomic<int> in_flight{0};
};

struct FailureLog {
  std::atomic<int64_t> last_ns{0};
  std::atomic<uint64_t> unlogged{0};
};

HttpResponse Unavailable(std::string body) {
  HttpResponse r;
  r.status = 503;
  r.body = std::move(body);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

// Logs a failed forward at most once every 10 s per upstream; the skipped ones are counted in
// the next line, so a collector down for an hour costs a few hundred lines, not one per scrape.
void LogFailure(FrontState& st, FailureLog& fl, const std::string& upstream,
                const std::string& why) {
  const int64_t now = Clock::now().time_since_epoch().count();
  int64_t last = fl.last_ns.load();
  const int64_t period = std::chrono::nanoseconds(std::chrono::seconds(10)).count();
  if (last != 0 && now - last < period) {
    ++fl.unlogged;
    return;
  }
  if (!fl.last_ns.compare_exchange_strong(last, now)) {
    ++fl.unlogged;
    return;
  }
  st.log->warn("upstream {}: {} (answered 503; {} more failure(s) since the last warning)",
               upstream, why, fl.unlogged.exchange(0));
}

// A handler that forwards GET `path` to `upstream` and relays its status, type and body.
HttpHandler Forward(const std::shared_ptr<FrontState>& st, std::string upstream, std::string path) {
  auto failures = std::make_shared<FailureLog>();
  return [st, failures, upstream = std::move(upstream),
          path = std::move(path)](const HttpRequest&) -> HttpResponse {
    if (st->in_flight.fetch_add(1) >= st->max_in_flight) {
      st->in_flight.fetch_sub(1);
      LogFailure(*st, *failures, upstream, "every forwarding slot is busy (upstream slow?)");
      return Unavailable("upstream busy: earlier requests to the collector are still waiting\n");
    }
    LocalRequestOptions lo;
    lo.timeout = st->options.timeout;
    absl::StatusOr<LocalResponse> got = LocalGet(upstream, path, lo);
    st->in_flight.fetch_sub(1);
    if (!got.ok()) {
      const std::string why(got.status().message());
      LogFailure(*st, *failures, upstream, why);
      return Unavailable("upstream unavailable: " + why + "\n");
    }
    HttpResponse r;
    r.status = got->status;
    if (!got->content_type.empty()) r.content_type = got->content_type;
    r.body = std::move(got->body);
    return r;
  };
}

}  // namespace

std::map<std::string, HttpHandler> FrontHandlers(const FrontOptions& options) {
  auto st = std::make_shared<FrontState>(options);
  std::map<std::string, HttpHandler> h;
  h[options.telemetry_path] = Forward(st, options.upstream, options.telemetry_path);
  h["/readyz"] = Forward(st, options.upstream, "/readyz");
  h["/"] = Forward(st, options.upstream, "/");
  if (!options.plugin_upstream.empty()) {
    h["/plugin/metrics"] = Forward(st, options.plugin_upstream, "/metrics");
  }
  h["/healthz"] = [](const HttpRequest&) {
    HttpResponse r;
    r.body = "ok\n";
    return r;
  };
  return h;
}

}  // namespace neuron::monitor
