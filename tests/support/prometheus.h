#pragma once
// A real Prometheus server (Debian's `prometheus`) for tests: started on a free port with a
// temporary config and storage directory, scraping the given targets every second, stopped
// when the object goes. Queries go through its HTTP API. Thread-compatible.

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace neuron::testing {

class PrometheusServer {
 public:
  struct Target {
    std::string job;
    int port = 0;
    // Target labels (static_configs' `labels`), e.g. {"node", "node-1"} as a PodMonitor's
    // relabelling gives each node's exporter.
    std::map<std::string, std::string> labels = {};
  };
  // Writes DIR/prometheus.yml and starts the server; `rule_files` are loaded as rules.
  PrometheusServer(const std::filesystem::path& dir, const std::vector<Target>& targets,
                   const std::vector<std::filesystem::path>& rule_files = {});
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  int port() const { return port_; }
  std::string Log() const;
  // The `data` member of an API answer, or nullopt on an HTTP or API error (the error text goes
  // to *error when given).
  std::optional<nlohmann::json> Api(const std::string& path_and_query,
                                    std::string* error = nullptr) const;
  // An instant query's result vector; empty on error.
  nlohmann::json Query(const std::string& promql, std::string* error = nullptr) const;
  // The value of a query that returns exactly one sample.
  std::optional<double> Scalar(const std::string& promql) const;
  // Every metric name Prometheus has stored.
  std::vector<std::string> MetricNames() const;

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace neuron::testing
