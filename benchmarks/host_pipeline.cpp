// SPDX-License-Identifier: Apache-2.0
// Row H (benchmarks/README.md): a toy host-to-GPU pipeline with its staging
// buffer where gpuaff's plan puts it and on another node, side by side.
//
//   host_pipeline [--mib N] [--rounds R] [--other NODE] [--nodes LIST]
//
// The process runs under `gpuaff exec` (its threads on the plan's CPUs); the
// plan's host nodes come from GPUAFF_PLAN's host= (or --nodes). A "device"
// buffer stands in for the GPU's memory: on the host nodes, where the GPU is.
// Each round, for each variant (interleaved, the order swapped every round):
// a producer thread fills the staging buffer (a write of every byte, as a
// data loader writes a batch), then a consumer thread copies it into the
// device buffer (memcpy, where a GPU's DMA engine would read it). Both
// threads inherit the plan's CPUs. The variants differ only in the staging
// buffer's node: the plan's host nodes (allocate_host_buffer with
// plan.host_nodes) or NODE (default: the first node with memory outside them).
// Prints the median fill and copy time of each, and the ratio.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gpuaff/detail/fs.hpp>
#include <gpuaff/launch/plan_variable.hpp>
#include <gpuaff/memory/host_buffer.hpp>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_of(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "host_pipeline: %s\nusage: host_pipeline [--mib N (1-4096)] [--rounds R (1-1000)] "
                       "[--other NODE] [--nodes LIST]\n", why);
  std::exit(2);
}

long number(const char* s, long lo, long hi, const char* what) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) usage(what);
  return v;
}

/// The nodes with memory (node/has_memory), or nullopt.
gpuaff::NodeSet memory_nodes() {
  std::string text;
  if (gpuaff::detail::read_whole_file("/sys/devices/system/node/has_memory", text) != 0) return {};
  gpuaff::detail::strip_trailing(text);
  auto s = gpuaff::CpuSet::parse_list(text);
  return s ? *s : gpuaff::NodeSet{};
}

}  // namespace

int main(int argc, char** argv) {
  long mib = 64, rounds = 9, other = -1;
  std::string nodes_text;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (i + 1 >= argc) usage("an option without its value");
    if (a == "--mib") mib = number(argv[++i], 1, 4096, "--mib is 1 to 4096");
    else if (a == "--rounds") rounds = number(argv[++i], 1, 1000, "--rounds is 1 to 1000");
    else if (a == "--other") other = number(argv[++i], 0, gpuaff::CpuSet::capacity - 1, "--other is a node id");
    else if (a == "--nodes") nodes_text = argv[++i];
    else usage("unknown option");
  }
  gpuaff::NodeSet host;
  if (!nodes_text.empty()) {
    auto s = gpuaff::CpuSet::parse_list(nodes_text);
    if (!s || s->empty()) usage("--nodes is a node list such as 0 or 0-1");
    host = *s;
  } else if (const char* value = std::getenv("GPUAFF_PLAN")) {
    auto plan = gpuaff::parse_plan_variable(value);
    if (!plan) {
      std::fprintf(stderr, "host_pipeline: %s\n", std::string(plan.error().message()).c_str());
      return 1;
    }
    host = plan->host_nodes;
  }
  if (host.empty()) usage("no host nodes: run it under gpuaff exec (GPUAFF_PLAN with host=) or give --nodes");
  if (other < 0) {
    gpuaff::NodeSet rest = memory_nodes() - host;
    if (rest.empty()) {
      std::fprintf(stderr, "host_pipeline: no node with memory outside %s: nothing to compare with (one node)\n",
                   host.to_list().c_str());
      return 77;
    }
    other = rest.first();
  }
  const std::size_t bytes = static_cast<std::size_t>(mib) << 20;
  auto device = gpuaff::allocate_host_buffer(bytes, {.nodes = host});
  auto planned = gpuaff::allocate_host_buffer(bytes, {.nodes = host});
  auto away = gpuaff::allocate_host_buffer(bytes, {.nodes = gpuaff::NodeSet::single(static_cast<int>(other))});
  for (auto* b : {&device, &planned, &away})
    if (!*b) {
      std::fprintf(stderr, "host_pipeline: %s\n", std::string(b->error().message()).c_str());
      return 1;
    }
  struct Variant {
    std::string name;
    gpuaff::HostBuffer* staging;
    std::vector<double> fill{}, copy{};
  };
  Variant variants[] = {{"staging on node(s) " + host.to_list() + " (plan's host_nodes)", &*planned},
                        {"staging on node " + std::to_string(other) + " (other node)", &*away}};
  unsigned char value = 1;
  for (long r = 0; r < rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      Variant& v = variants[(r % 2 == 0) ? k : 1 - k];
      auto* staging = static_cast<unsigned char*>(v.staging->data());
      auto* dev = static_cast<unsigned char*>(device->data());
      ++value;
      Clock::duration fill{}, copy{};
      std::thread producer([&] {
        auto t0 = Clock::now();
        std::memset(staging, value, bytes);
        fill = Clock::now() - t0;
      });
      producer.join();
      std::thread consumer([&] {
        auto t0 = Clock::now();
        std::memcpy(dev, staging, bytes);
        copy = Clock::now() - t0;
      });
      consumer.join();
      if (dev[bytes - 1] != value) {
        std::fprintf(stderr, "host_pipeline: the copy did not arrive\n");
        return 1;
      }
      v.fill.push_back(seconds_of(fill));
      v.copy.push_back(seconds_of(copy));
    }
  }
  // Still where they were put (the kernel's answer, after the rounds).
  for (auto& v : variants) {
    auto where = v.staging->query();
    v.name += where ? " [" + where->summary() + "]" : std::string(" [placement unknown]");
  }
  double gib = static_cast<double>(bytes) / (1u << 30);
  std::printf("row H: toy pipeline, %ld MiB per batch, %ld interleaved rounds, medians; device stand-in on node(s) %s\n",
              mib, rounds, host.to_list().c_str());
  double total[2];
  for (int k = 0; k < 2; ++k) {
    double f = median(variants[k].fill), c = median(variants[k].copy);
    total[k] = f + c;
    std::printf("H  %-s: fill %.2f ms (%.2f GiB/s), copy %.2f ms (%.2f GiB/s), batch %.2f ms\n", variants[k].name.c_str(),
                f * 1e3, gib / f, c * 1e3, gib / c, (f + c) * 1e3);
  }
  std::printf("H  other node / plan: %.2fx the batch time\n", total[1] / total[0]);
  return 0;
}
