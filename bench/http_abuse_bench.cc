// The agent's HTTP servers under abuse (docs/RELIABILITY.md#abuse): neuron-exporter and
// neuron-device-plugin on a simulated trn1.2xlarge, each attack alone, from 127.0.0.1, while a
// well-behaved scraper probes from 127.0.0.2 every 50 ms:
//   - 64 connections trickling header lines (one a second), 64 that send one byte and stop,
//     1,000 idle connections; the exporter's /metrics and /healthz and the plugin's /healthz;
//   - 64 connections trickling a TLS ClientHello (a byte a second), against the exporter with
//     TLS; its /metrics and /healthz over HTTPS;
//   - 8 clients sending wrong passwords back to back, against the exporter with basic auth (a
//     cost-10 bcrypt hash); an authorized /metrics from 127.0.0.2, and /healthz without
//     credentials.
// Each row: probes answered (200 within 2 s), p50 and p99 (a failed probe counts as 2 s), and
// whether it meets the target (>= 99 % answered, p99 <= 50 ms); what the attackers saw; the
// servers' peak RSS. Everything is bounded: fixed connection counts, --seconds of probes per
// row (default 10).
//
//   http_abuse_bench [--seconds N] [--only exporter|plugin|tls|auth]

#include <crypt.h>
#include <sys/resource.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/support/http_attack.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"

namespace {

namespace fs = std::filesystem;
using neuron::testing::Attack;
using neuron::testing::AttackKind;
using neuron::testing::AttackStats;
using neuron::testing::ProbeSeries;
using neuron::testing::ProbeTarget;
using namespace std::chrono_literals;

constexpr auto kInterval = 50ms;
constexpr auto kTimeout = 2000ms;

struct Server {
  std::string name;
  pid_t pid = -1;
  int port = 0;
  bool tls = false;
};

// The N of "listening on port N" in the server's logs, waited for.
int PortOf(const fs::path& logs, const std::string& name) {
  int port = 0;
  neuron::testing::WaitUntil(
      [&] {
        port = neuron::testing::ListeningPort(neuron::testing::ReadFile(logs / (name + ".out")) +
                                              neuron::testing::ReadFile(logs / (name + ".err")));
        return port > 0;
      },
      60s);
  return port;
}

int64_t PeakRssKib(pid_t pid) {
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(st, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// A cost-10 bcrypt hash of `password`, as `htpasswd -nBC 10` makes (exporter-toolkit's example).
std::string Bcrypt10(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2y$", 10, nullptr, 0, salt, sizeof salt) == nullptr) return "";
  crypt_data data{};
  const char* hash = crypt_rn(password.c_str(), salt, &data, sizeof data);
  return hash != nullptr && hash[0] != '*' ? hash : "";
}

bool MakeCertificate(const fs::path& dir) {
  const neuron::testing::RunResult r = neuron::testing::RunCommand(
      dir, {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "2", "-subj", "/CN=localhost", "-keyout", (dir / "tls.key").string(),
            "-out", (dir / "tls.crt").string()});
  if (r.code != 0) std::fprintf(stderr, "openssl req: %s\n", r.err.c_str());
  return r.code == 0;
}

void PrintHeader() {
  std::printf("%-15s %-32s %-9s %-8s %7s %8s %8s  %-4s %s\n", "server", "attack", "path",
              "answered", "", "p50 ms", "p99 ms", "met", "attackers");
}

void PrintRow(const std::string& server, const std::string& attack, const std::string& path,
              const ProbeSeries& s, const std::string& attackers) {
  const double pct = 100.0 * s.answered / std::max(1, s.sent);
  const bool met = pct >= 99.0 && s.p99_ms <= 50.0;
  std::printf("%-15s %-32s %-9s %4d/%-4d %6.1f%% %8.2f %8.2f  %-4s %s\n", server.c_str(),
              attack.c_str(), path.c_str(), s.answered, s.sent, pct, s.p50_ms, s.p99_ms,
              met ? "yes" : "NO", attackers.c_str());
  std::fflush(stdout);
}

std::string Describe(const AttackStats& a) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "opened %lld, closed by server %lld (median life %.1f s), open %d",
                static_cast<long long>(a.opened), static_cast<long long>(a.closed_by_server),
                a.median_life_s, a.open_at_end);
  return buf;
}

// Probes each path in turn from 127.0.0.2 for `seconds` each while the attack runs, started a
// second before so its connections are in place.
void Row(const Server& s, AttackKind kind, int connections, const std::string& label,
         const std::vector<std::string>& paths, std::chrono::seconds seconds) {
  Attack attack(kind, s.port, connections);
  std::this_thread::sleep_for(1s);
  std::vector<ProbeSeries> series;
  series.reserve(paths.size());
  for (const std::string& path : paths) {
    series.push_back(neuron::testing::ProbeFor(ProbeTarget{s.port, path, s.tls, "", "127.0.0.2"},
                                               kInterval, seconds, kTimeout));
  }
  const std::string attackers = Describe(attack.Stop());
  for (size_t i = 0; i < paths.size(); ++i) PrintRow(s.name, label, paths[i], series[i], attackers);
  std::this_thread::sleep_for(1s);  // the server closes what is left before the next row
}

void Quiet(const Server& s, const std::vector<std::string>& paths, std::chrono::seconds seconds,
           const std::string& extra_headers = "") {
  for (const std::string& path : paths) {
    PrintRow(s.name, "none (quiet)", path,
             neuron::testing::ProbeFor(ProbeTarget{s.port, path, s.tls, extra_headers, "127.0.0.2"},
                                       kInterval, seconds, kTimeout),
             "");
  }
}

void AuthRows(const Server& s, const std::string& good, std::chrono::seconds seconds) {
  // A scraper's first request costs one bcrypt check; the server caches the success, so the rows
  // below measure what every later scrape costs.
  const neuron::testing::ProbeResult first =
      neuron::testing::Probe(ProbeTarget{s.port, "/metrics", false, good, "127.0.0.2"}, kTimeout);
  std::printf("%-15s first authorized /metrics (one bcrypt check, cost 10): status %d, %.1f ms\n",
              s.name.c_str(), first.status, first.ms);
  Quiet(s, {"/metrics"}, seconds, good);
  neuron::testing::PasswordAttackStats wrong;
  std::thread attackers(
      [&] { wrong = neuron::testing::WrongPasswords(s.port, "/metrics", 8, seconds * 2 + 1s); });
  std::this_thread::sleep_for(1s);
  const ProbeSeries metrics = neuron::testing::ProbeFor(
      ProbeTarget{s.port, "/metrics", false, good, "127.0.0.2"}, kInterval, seconds, kTimeout);
  const ProbeSeries healthz = neuron::testing::ProbeFor(
      ProbeTarget{s.port, "/healthz", false, "", "127.0.0.2"}, kInterval, seconds, kTimeout);
  attackers.join();
  const double secs = static_cast<double>((seconds * 2 + 1s).count());
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%lld requests: %lld answered 401 (a password check, %.1f/s), %lld 429, %lld other",
                static_cast<long long>(wrong.requests), static_cast<long long>(wrong.unauthorized),
                static_cast<double>(wrong.unauthorized) / secs,
                static_cast<long long>(wrong.throttled), static_cast<long long>(wrong.other));
  PrintRow(s.name, "8 clients, wrong passwords", "/metrics", metrics, buf);
  PrintRow(s.name, "8 clients, wrong passwords", "/healthz", healthz, "(no credentials sent)");
}

struct Flags {
  int seconds = 10;
  std::string only;  // one group of rows; all when empty
};

std::optional<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  if (argc % 2 == 0) {
    std::fprintf(stderr, "http_abuse_bench: %s wants a value\n", argv[argc - 1]);
    return std::nullopt;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const std::string_view text = argv[i + 1];
    if (flag == "--seconds") {
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), f.seconds);
      if (ec == std::errc() && ptr == text.data() + text.size() && f.seconds > 0 &&
          f.seconds <= 600) {
        continue;
      }
    } else if (flag == "--only" &&
               (text == "exporter" || text == "plugin" || text == "tls" || text == "auth")) {
      f.only = std::string(text);
      continue;
    }
    std::fprintf(stderr,
                 "http_abuse_bench: [--seconds 1-600] [--only exporter|plugin|tls|auth], got "
                 "\"%s %s\"\n",
                 argv[i], argv[i + 1]);
    return std::nullopt;
  }
  return f;
}

// The exporter plain, with TLS and with basic auth, and the plugin, under the simulated driver.
std::vector<Server> StartServers(neuron::testing::SimNode& node, const fs::path& work) {
  const std::string kubelet = (work / "kubelet").string();
  auto exporter = [&](const std::string& name, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {NEURON_EXPORTER_BIN,    "--root",     node.root().string(),
                                     "--kubelet-dir",        kubelet,      "--no-pod-resources",
                                     "--web.listen-address", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    Server s{name, node.StartUnderDriver(args, name), 0, false};
    s.port = PortOf(node.logs(), name);
    return s;
  };
  std::vector<Server> out;
  out.push_back(exporter("exporter", {}));
  out.push_back(exporter("exporter-tls", {"--web.config.file", (work / "tls.yml").string()}));
  out.back().tls = true;
  out.push_back(exporter("exporter-auth", {"--web.config.file", (work / "auth.yml").string()}));
  Server plugin{"plugin", -1, 0, false};
  plugin.pid = node.StartUnderDriver({NEURON_PLUGIN_BIN, "--root", node.root().string(),
                                      "--kubelet-dir", kubelet, "--listen", "127.0.0.1:0"},
                                     "plugin");
  plugin.port = PortOf(node.logs(), "plugin");
  out.push_back(plugin);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Flags> flags = ParseFlags(argc, argv);
  if (!flags) return 2;
  const std::chrono::seconds seconds(flags->seconds);
  auto wanted = [&](const char* group) { return flags->only.empty() || flags->only == group; };
  // 1,000 attacking sockets and the probes' need more than the usual 1024 descriptors.
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  const char* tmp = std::getenv("TMPDIR");
  const fs::path work =
      fs::path(tmp != nullptr ? tmp : "/tmp") / ("http_abuse_bench." + std::to_string(getpid()));
  fs::create_directories(work);
  neuron::testing::SimNode node(
      {.sim_bin = NEURON_SIM_BIN, .root = work / "root", .logs = work / "logs"});
  const std::string hash = Bcrypt10("secret");
  if (!node.Up("trn1.2xlarge") || !MakeCertificate(work) || hash.empty()) {
    std::fprintf(stderr, "http_abuse_bench: set-up failed: %s\n", node.Log().c_str());
    return 1;
  }
  neuron::testing::WriteFile(work / "tls.yml",
                             "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n");
  neuron::testing::WriteFile(work / "auth.yml", "basic_auth_users:\n  alice: " + hash + "\n");
  const std::vector<Server> servers = StartServers(node, work);
  for (const Server& s : servers) {
    if (s.port <= 0) {
      std::fprintf(stderr, "http_abuse_bench: %s did not start (logs in %s)\n", s.name.c_str(),
                   node.logs().c_str());
      return 1;
    }
  }
  const Server& plain = servers[0];
  const Server& tls = servers[1];
  const Server& auth = servers[2];
  const Server& plugin = servers[3];

  std::printf(
      "== trn1.2xlarge; attacks from 127.0.0.1, probes from 127.0.0.2 every %lld ms for %lld s "
      "per path, %lld ms timeout; target >= 99%% answered, p99 <= 50 ms\n",
      static_cast<long long>(kInterval.count()), static_cast<long long>(seconds.count()),
      static_cast<long long>(kTimeout.count()));
  PrintHeader();
  const std::vector<std::string> both = {"/metrics", "/healthz"};
  for (const Server* s : {&plain, &plugin}) {
    if (!wanted(s == &plugin ? "plugin" : "exporter")) continue;
    const std::vector<std::string> paths =
        s == &plugin ? std::vector<std::string>{"/healthz"} : both;
    Quiet(*s, paths, seconds);
    Row(*s, AttackKind::kHeaderTrickle, 64, "64 trickling header lines", paths, seconds);
    Row(*s, AttackKind::kOneByte, 64, "64 sending one byte", paths, seconds);
    Row(*s, AttackKind::kIdle, 1000, "1000 idle connections", paths, seconds);
  }
  if (wanted("tls")) {
    Quiet(tls, both, seconds);
    Row(tls, AttackKind::kTlsTrickle, 64, "64 trickling TLS handshakes", both, seconds);
    std::printf(
        "(no TLS row for the plugin: the same server and web config as the exporter-tls rows; in "
        "the DaemonSet it has no port)\n");
  }
  if (wanted("auth")) AuthRows(auth, neuron::testing::BasicAuthHeader("alice", "secret"), seconds);
  std::printf(
      "peak RSS (VmHWM): exporter %.1f MiB, exporter-tls %.1f MiB, exporter-auth %.1f "
      "MiB, plugin %.1f MiB\n",
      PeakRssKib(plain.pid) / 1024.0, PeakRssKib(tls.pid) / 1024.0, PeakRssKib(auth.pid) / 1024.0,
      PeakRssKib(plugin.pid) / 1024.0);
  node.Stop();
  fs::remove_all(work);
  return 0;
}
