// efa: EFA port counters, port state and speed, and identity (docs/metrics.md#efa-metrics).
#include <array>

#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

// The port counters exported, each by its typed handle (a misspelt one does not compile).
struct EfaCounter {
  EfaPortCounter counter;  // ports/1/hw_counters/<name>
  std::string_view metric;
  std::string_view help;
};

using P = EfaPortCounter;
constexpr std::array<EfaCounter, 8> kCounters{{
    {P::tx_bytes, "neuron_efa_tx_bytes_total", "Bytes sent: ports/<port>/hw_counters/tx_bytes."},
    {P::rx_bytes, "neuron_efa_rx_bytes_total", "Bytes received: hw_counters/rx_bytes."},
    {P::tx_pkts, "neuron_efa_tx_packets_total", "Packets sent: hw_counters/tx_pkts."},
    {P::rx_pkts, "neuron_efa_rx_packets_total", "Packets received: hw_counters/rx_pkts."},
    {P::rx_drops, "neuron_efa_rx_drops_total", "Received packets dropped: hw_counters/rx_drops."},
    {P::rdma_read_bytes, "neuron_efa_rdma_read_bytes_total",
     "RDMA read bytes: hw_counters/rdma_read_bytes."},
    {P::rdma_read_resp_bytes, "neuron_efa_rdma_read_response_bytes_total",
     "RDMA read response bytes: hw_counters/rdma_read_resp_bytes."},
    {P::rdma_read_wr_err, "neuron_efa_rdma_read_errors_total",
     "RDMA read work request errors: hw_counters/rdma_read_wr_err."},
}};

class EfaCollector final : public Collector {
 public:
  std::string_view name() const override { return "efa"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    FamilyBuilder info = Gauge("neuron_efa_info", "EFA device identity (PCI address, NUMA node).");
    FamilyBuilder state =
        Gauge("neuron_efa_port_state_id",
              "Port state number from ports/<port>/state (4 ACTIVE; 1 DOWN, 2 INIT, 3 ARMED, 5 "
              "ACTIVE_DEFER).");
    FamilyBuilder speed = Gauge("neuron_efa_port_speed_bytes",
                                "Port speed from ports/<port>/rate, in bytes per second.");
    std::vector<FamilyBuilder> counters;
    counters.reserve(kCounters.size());
    for (const EfaCounter& c : kCounters) {
      counters.push_back(Counter(std::string(c.metric), std::string(c.help)));
    }
    for (const EfaSample& e : ctx.snap().efas) {
      Labels il{L("efa_device", e.name)};
      const EfaInterface* inv = ctx.inventory().FindEfa(e.name);
      il.push_back(L("pci_bdf", inv != nullptr ? inv->bdf : ""));
      il.push_back(L("numa_node", inv != nullptr && inv->numa_node ? Str(*inv->numa_node) : ""));
      info.Add(std::move(il), 1);
      const Labels port{L("efa_device", e.name), L("port", Str(e.port))};
      if (e.port_state) state.Add(port, *e.port_state);
      if (e.rate_gbps) speed.Add(port, *e.rate_gbps * 1e9 / 8);
      for (size_t i = 0; i < kCounters.size(); ++i) {
        const EfaPortCounter c = kCounters[i].counter;
        const std::optional<uint64_t>& v = e.port_counters.*Member<EfaPortCounters>(c);
        if (!v) continue;
        counters[i].Add(port,
                        ctx.Mono(-1, e.name + "/" + std::string(Name(c)), static_cast<double>(*v)));
      }
    }
    info.Finish(out);
    for (FamilyBuilder& f : counters) f.Finish(out);
    state.Finish(out);
    speed.Finish(out);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Collector> MakeEfaCollector() { return std::make_unique<EfaCollector>(); }

}  // namespace neuron::monitor
