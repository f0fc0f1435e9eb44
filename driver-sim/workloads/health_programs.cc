#include "driver-sim/workloads/health_programs.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "driver-sim/runtime/program.h"

namespace neuron::sim {
namespace {

constexpr size_t kDim = 32;            // the matmul's m = k = n: 32768 multiply-adds per execution
constexpr size_t kGatherValues = 256;  // each rank's all-gather input

std::string FloatBytes(const std::vector<float>& v) {
  std::string out(v.size() * sizeof(float), '\0');
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A simulated NEFF: the 1024-byte header over the op list (driver-sim/README.md, "Simulated NEFF
// and the op list").
std::string Neff(const std::string& name, const std::string& op_list) {
  nrt::NeffHeader h;
  h.name = name;
  h.data_size = op_list.size();
  h.hash = nrt::PayloadHash(op_list);
  for (size_t i = 0; i < h.uuid.size(); ++i) h.uuid[i] = h.hash[(i + 5) % h.hash.size()];
  const auto header = nrt::EncodeNeffHeader(h);
  return std::string(header.begin(), header.end()) + op_list;
}

absl::Status Write(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::UnavailableError(fmt::format("cannot write {}", path.string()));
  return absl::OkStatus();
}

// Small integers, so that every product and sum is exact in float32 whatever the order.
std::vector<std::pair<std::string, std::string>> MatmulFiles(nlohmann::ordered_json* entry) {
  std::vector<float> a(kDim * kDim);
  std::vector<float> w(kDim * kDim);
  std::vector<float> c(kDim * kDim, 0.0f);
  for (size_t i = 0; i < kDim; ++i) {
    for (size_t j = 0; j < kDim; ++j) {
      a[i * kDim + j] = static_cast<float>(static_cast<int>((i * 3 + j) % 7) - 3);
      w[i * kDim + j] = static_cast<float>(static_cast<int>((i + 2 * j) % 5) - 2);
    }
  }
  for (size_t i = 0; i < kDim; ++i) {
    for (size_t k = 0; k < kDim; ++k) {
      for (size_t j = 0; j < kDim; ++j) c[i * kDim + j] += a[i * kDim + k] * w[k * kDim + j];
    }
  }
  const nlohmann::json shape = {kDim, kDim};
  const nlohmann::ordered_json ops = {
      {"version", 1},
      {"inputs",
       {{{"name", "a"}, {"dtype", "float32"}, {"shape", shape}},
        {{"name", "w"}, {"dtype", "float32"}, {"shape", shape}}}},
      {"outputs", {{{"name", "c"}, {"dtype", "float32"}, {"shape", shape}}}},
      {"ops",
       {{{"op", "matmul"},
         {"name", "health-matmul"},
         {"dtype", "float32"},
         {"m", kDim},
         {"k", kDim},
         {"n", kDim},
         {"input", "a"},
         {"weights", "w"},
         {"output", "c"}}}}};
  *entry = {{"name", "matmul"},
            {"kind", "compute"},
            {"neff", "matmul.neff"},
            {"inputs", {{{"a", "matmul.a.bin"}, {"w", "matmul.w.bin"}}}},
            {"expected", {{"c", "matmul.c.bin"}}}};
  return {{"matmul.neff", Neff("health-matmul", ops.dump())},
          {"matmul.a.bin", FloatBytes(a)},
          {"matmul.w.bin", FloatBytes(w)},
          {"matmul.c.bin", FloatBytes(c)}};
}

// Rank r brings r * 1000 + i; every rank gets both halves in rank order.
std::vector<std::pair<std::string, std::string>> GatherFiles(nlohmann::ordered_json* entry) {
  std::vector<float> x0(kGatherValues);
  std::vector<float> x1(kGatherValues);
  for (size_t i = 0; i < kGatherValues; ++i) {
    x0[i] = static_cast<float>(i);
    x1[i] = static_cast<float>(1000 + i);
  }
  std::vector<float> y = x0;
  y.insert(y.end(), x1.begin(), x1.end());
  const nlohmann::ordered_json ops = {
      {"version", 1},
      {"inputs", {{{"name", "x"}, {"dtype", "float32"}, {"shape", {kGatherValues}}}}},
      {"outputs", {{{"name", "y"}, {"dtype", "float32"}, {"shape", {2 * kGatherValues}}}}},
      {"ops",
       {{{"op", "allgather"},
         {"name", "health-allgather"},
         {"bytes", kGatherValues * 4},
         {"input", "x"},
         {"output", "y"}}}}};
  *entry = {{"name", "allgather"},
            {"kind", "exchange"},
            {"neff", "allgather.neff"},
            {"inputs", {{{"x", "allgather.x0.bin"}}, {{"x", "allgather.x1.bin"}}}},
            {"expected", {{"y", "allgather.y.bin"}}}};
  return {{"allgather.neff", Neff("health-allgather", ops.dump())},
          {"allgather.x0.bin", FloatBytes(x0)},
          {"allgather.x1.bin", FloatBytes(x1)},
          {"allgather.y.bin", FloatBytes(y)}};
}

}  // namespace

absl::Status WriteHealthPrograms(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::UnavailableError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  }
  nlohmann::ordered_json matmul;
  nlohmann::ordered_json gather;
  std::vector<std::pair<std::string, std::string>> files = MatmulFiles(&matmul);
  for (auto& f : GatherFiles(&gather)) files.push_back(std::move(f));
  const nlohmann::ordered_json manifest = {{"version", 1}, {"programs", {matmul, gather}}};
  files.emplace_back("manifest.json", manifest.dump(2) + "\n");
  for (const auto& [name, bytes] : files) {
    if (absl::Status s = Write(dir / name, bytes); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::pair<CLI::App*, std::function<int()>> AddHealthProgramsCommand(CLI::App& app) {
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "health-programs",
      "write the active health check's reference programs for the simulator (simulated NEFFs, "
      "inputs, expected outputs, manifest.json) into a directory for neuron-ls --health-check "
      "--programs DIR");
  cmd->add_option("--out", *out, "the directory to write (created if missing)")->required();
  return {cmd, [out] {
            if (absl::Status s = WriteHealthPrograms(*out); !s.ok()) {
              std::fprintf(stderr, "neuron-sim health-programs: %s\n",
                           std::string{s.message()}.c_str());
              return 1;
            }
            std::printf("wrote the health check's programs and manifest.json to %s\n",
                        out->c_str());
            return 0;
          }};
}

}  // namespace neuron::sim
