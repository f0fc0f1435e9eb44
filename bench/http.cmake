# The HTTP servers of neuron-exporter and neuron-device-plugin under abuse
# (docs/RELIABILITY.md#abuse): slow and idle connections, trickled TLS handshakes and wrong
# passwords from 127.0.0.1 while a scraper probes from 127.0.0.2.
# The attackers and the scraper are tests/support/http_attack.h (the soak runs them too).
find_package(OpenSSL REQUIRED)
find_library(NEURON_BENCH_LIBCRYPT crypt REQUIRED)
add_executable(http_abuse_bench http_abuse_bench.cc)
target_link_libraries(http_abuse_bench PRIVATE neuron_test_sim neuron_test_attack OpenSSL::SSL
  OpenSSL::Crypto ${NEURON_BENCH_LIBCRYPT} Threads::Threads)
target_compile_definitions(http_abuse_bench PRIVATE
  NEURON_SIM_BIN="$<TARGET_FILE:neuron-sim>" NEURON_EXPORTER_BIN="$<TARGET_FILE:neuron-exporter>"
  NEURON_PLUGIN_BIN="$<TARGET_FILE:neuron-device-plugin>")
add_dependencies(http_abuse_bench neuron-sim neuron-exporter neuron-device-plugin)
neuron_target_options(http_abuse_bench)
