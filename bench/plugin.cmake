# device plugin: a scenario program against the real binary (latencies, re-registration, health
# propagation, RSS), and the allocator's microbenchmarks.
add_executable(plugin_bench plugin_bench.cc)
target_link_libraries(plugin_bench PRIVATE neuron::proto)
target_compile_definitions(plugin_bench PRIVATE
  NEURON_SIM_BIN="$<TARGET_FILE:neuron-sim>"
  NEURON_PLUGIN_BIN="$<TARGET_FILE:neuron-device-plugin>")
add_dependencies(plugin_bench neuron-sim neuron-device-plugin)
neuron_target_options(plugin_bench)

add_executable(plugin_alloc_bench plugin_alloc_bench.cc)
target_link_libraries(plugin_alloc_bench PRIVATE neuron::core benchmark::benchmark)
neuron_target_options(plugin_alloc_bench)

# The allocator against the kubelet's random pick and the lowest free IDs, per request size, on
# one churn trace (the table of tests/core/allocator_test.cc's churn test).
add_executable(plugin_churn_bench plugin_churn_bench.cc)
target_link_libraries(plugin_churn_bench PRIVATE neuron::core neuron_test_churn)
neuron_target_options(plugin_churn_bench)

# DRA: the publisher's writes over resyncs, health -> slice at the API, and prepare latency,
# with the real plugin in DRA mode on a simulated node, the real neuron-dra-api and the API
# stand-in (bench/README.md#dra-bench)
add_executable(dra_bench dra_bench.cc)
target_link_libraries(dra_bench PRIVATE neuron::kubeapi neuron::sim_apiserver neuron::proto
  neuron::kubelet_sim neuron::http neuron_test_sim)
target_compile_definitions(dra_bench PRIVATE
  NEURON_SIM_BIN="$<TARGET_FILE:neuron-sim>"
  NEURON_PLUGIN_BIN="$<TARGET_FILE:neuron-device-plugin>"
  NEURON_DRA_API_BIN="$<TARGET_FILE:neuron-dra-api>")
add_dependencies(dra_bench neuron-sim neuron-device-plugin neuron-dra-api)
neuron_target_options(dra_bench)
