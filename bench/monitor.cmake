# neuron-exporter: scrape latency (full read, hot, shared snapshot), RSS and CPU per scrape on a
# simulated trn2.48xlarge under a workload, beside Debian's prometheus-node-exporter.
add_executable(monitor_bench monitor_bench.cc)
target_link_libraries(monitor_bench PRIVATE neuron_test_http)
target_compile_definitions(monitor_bench PRIVATE
  NEURON_SIM_BIN="$<TARGET_FILE:neuron-sim>" NEURON_EXPORTER_BIN="$<TARGET_FILE:neuron-exporter>")
add_dependencies(monitor_bench neuron-sim neuron-exporter)
neuron_target_options(monitor_bench)
