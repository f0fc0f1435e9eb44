#pragma once
// The soak's abuse load (docs/RELIABILITY.md#soak): beside Prometheus's scrapes, clients that
// trickle header lines and clients that connect and send nothing, against the exporter and the
// plugin, from 127.0.0.1 (tests/support/http_attack.h). They run while the rest of the load runs
// and stop with it at the quiet points, so the leak checks compare like with like. 48 connections
// per server stay under the per-address cap of 64, so the server closes them at their deadlines
// rather than shedding them, and Prometheus (also from 127.0.0.1) keeps its room.
//
// Thread-safety: one owner (the soak's main thread).

#include <memory>
#include <string>
#include <vector>

#include "tests/soak/soak_report.h"
#include "tests/support/http_attack.h"

namespace neuron::soak {

class AbuseLoad {
 public:
  AbuseLoad(int exporter_port, int plugin_port);
  ~AbuseLoad();
  void Start();  // the attacks of one load phase
  void Stop();   // ends them and adds up what they saw

  // The summary line: what each attack opened and the server closed.
  void Summarize(Report& report) const;
  // The invariant: every attack was closed by the server, at its deadline (a median life within
  // `request_deadline_s` plus the attacker's 1 s tick and 1 s of slack).
  void Check(Report& report, double request_deadline_s) const;

 private:
  struct Kind {
    std::string name;
    neuron::testing::AttackKind kind;
    int port;
    int connections;
    int64_t opened = 0, closed = 0;
    double worst_median_s = 0;  // over the phases in which the server closed any
  };
  std::vector<Kind> kinds_;
  std::vector<std::unique_ptr<neuron::testing::Attack>> running_;  // indexed like kinds_
};

}  // namespace neuron::soak
