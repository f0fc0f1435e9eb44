#include "tests/support/prometheus.h"

#include <chrono>

#include "tests/support/http_client.h"
#include "tests/support/process.h"

namespace neuron::testing {

using namespace std::chrono_literals;

PrometheusServer::PrometheusServer(const std::filesystem::path& dir,
                                   const std::vector<Target>& targets,
                                   const std::vector<std::filesystem::path>& rule_files)
    : dir_(dir), port_(FreePort()) {
  std::string config =
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
      "  evaluation_interval: 1s\n";
  if (!rule_files.empty()) {
    config += "rule_files:\n";
    for (const auto& f : rule_files) config += "  - '" + f.string() + "'\n";
  }
  config += "scrape_configs:\n";
  for (const Target& t : targets) {
    config += "  - job_name: '" + t.job + "'\n    honor_labels: true\n    static_configs:\n" +
              "      - targets: ['127.0.0.1:" + std::to_string(t.port) + "']\n";
    if (!t.labels.empty()) config += "        labels:\n";
    for (const auto& [name, value] : t.labels) {
      config.append("          ").append(name).append(": '").append(value).append("'\n");
    }
  }
  WriteFile(dir_ / "prometheus.yml", config);
  pid_ = Spawn({"prometheus", "--config.file=" + (dir_ / "prometheus.yml").string(),
                "--storage.tsdb.path=" + (dir_ / "tsdb").string(),
                "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
               dir_ / "prometheus.out", dir_ / "prometheus.err");
  WaitUntil([&] { return HttpGet(port_, "/-/ready").status == 200; }, 60s);
}

PrometheusServer::~PrometheusServer() {
  if (pid_ > 0) Stop(pid_, 30s);
}

std::string PrometheusServer::Log() const { return ReadFile(dir_ / "prometheus.err"); }

std::optional<nlohmann::json> PrometheusServer::Api(const std::string& path_and_query,
                                                    std::string* error) const {
  const HttpResult r = HttpGet(port_, path_and_query);
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") {
    if (error != nullptr) {
      *error = j.is_discarded() ? "HTTP " + std::to_string(r.status) + ": " + r.body
                                : j.value("error", std::string("unknown error"));
    }
    return std::nullopt;
  }
  return j["data"];
}

nlohmann::json PrometheusServer::Query(const std::string& promql, std::string* error) const {
  std::optional<nlohmann::json> data = Api("/api/v1/query?query=" + UrlEncode(promql), error);
  return data ? (*data)["result"] : nlohmann::json::array();
}

std::optional<double> PrometheusServer::Scalar(const std::string& promql) const {
  const nlohmann::json r = Query(promql);
  if (!r.is_array() || r.size() != 1) return std::nullopt;
  return std::stod(r[0]["value"][1].get<std::string>());
}

std::vector<std::string> PrometheusServer::MetricNames() const {
  std::optional<nlohmann::json> data = Api("/api/v1/label/__name__/values");
  return data ? data->get<std::vector<std::string>>() : std::vector<std::string>{};
}

}  // namespace neuron::testing
