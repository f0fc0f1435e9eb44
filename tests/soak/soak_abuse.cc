#include "tests/soak/soak_abuse.h"

#include <fmt/format.h>

#include <algorithm>

namespace neuron::soak {

using neuron::testing::Attack;
using neuron::testing::AttackKind;

AbuseLoad::AbuseLoad(int exporter_port, int plugin_port) {
  kinds_ = {{"exporter slow", AttackKind::kHeaderTrickle, exporter_port, 16},
            {"exporter idle", AttackKind::kIdle, exporter_port, 32},
            {"plugin slow", AttackKind::kHeaderTrickle, plugin_port, 16},
            {"plugin idle", AttackKind::kIdle, plugin_port, 32}};
}

AbuseLoad::~AbuseLoad() { Stop(); }

void AbuseLoad::Start() {
  Stop();
  for (const Kind& k : kinds_) {
    running_.push_back(std::make_unique<Attack>(k.kind, k.port, k.connections));
  }
}

void AbuseLoad::Stop() {
  for (size_t i = 0; i < running_.size(); ++i) {
    const neuron::testing::AttackStats s = running_[i]->Stop();
    Kind& k = kinds_[i];
    k.opened += s.opened;
    k.closed += s.closed_by_server;
    if (s.closed_by_server > 0) k.worst_median_s = std::max(k.worst_median_s, s.median_life_s);
  }
  running_.clear();
}

void AbuseLoad::Summarize(Report& report) const {
  std::string line = "abuse from 127.0.0.1 beside the scrapes:";
  for (const Kind& k : kinds_) {
    line += fmt::format(" {} x{}: opened {}, closed by server {} (worst median life {:.1f} s);",
                        k.name, k.connections, k.opened, k.closed, k.worst_median_s);
  }
  line.pop_back();
  report.Line(line);
}

void AbuseLoad::Check(Report& report, double request_deadline_s) const {
  const double limit = request_deadline_s + 2;
  std::string failures;
  for (const Kind& k : kinds_) {
    if (k.closed == 0 || k.worst_median_s > limit) failures += " " + k.name;
  }
  report.Check("slow and idle clients closed", failures.empty(),
               fmt::format("each kind closed by the server, median life within {:.0f} s{}", limit,
                           failures.empty() ? "" : "; not:" + failures));
}

}  // namespace neuron::soak
