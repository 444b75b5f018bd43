// SPDX-License-Identifier: Apache-2.0
// A trainer-style launcher: one worker process per GPU, each started on the
// CPUs (and, if asked, the NUMA memory) of its GPU.
//
//   trainer [--root DIR] [--policy NAME] [--smt all|one] [--nproc N]
//           [--visible-devices LIST] [--membind none|local|bind|preferred|interleave]
//           [any other option of `gpuaff bind`] [--cpu-only-if-refused] [--map-to-local]
//
// Its options are gpuaff's own: each --flag is looked up in the library's
// option table and set with set_option, so the words and checks are the
// command line's. gpuaff::plan_every_gpu() plans every GPU from one read of
// the machine (the live one, or a recorded root such as build/fixtures/dgx-h100),
// and each worker starts under a ScopedAffinity guard, so the worker runs on
// its CPUs from its first instruction while the launcher's own mask is
// restored after each start. Every worker prints the Cpus_allowed_list the
// kernel shows for it, and the launcher checks it against the plan. (A
// launcher that binds itself, then execs, calls gpuaff::launch() instead.)
//
// --map-to-local is a test mode for running a recorded machine's plan here:
// CPU k of the recording becomes the (k mod n)-th CPU this process may use
// (n = how many it may use), and memory node m the (m mod n)-th allowed node.
// On a 2-CPU machine, recorded CPUs 0,2,4,... become CPU 0 and 1,3,5,... CPU 1.

#include <gpuaff/gpuaff.hpp>
#include <gpuaff/launch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Args {
  gpuaff::LaunchOptions options{};
  gpuaff::OnRefused on_refused = gpuaff::OnRefused::error;
  bool map_to_local = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "trainer: %s\n", what.c_str());
  std::exit(2);
}

/// The option of the library's table whose flag is `flag`, or nullptr.
const gpuaff::OptionInfo* option_of(std::string_view flag) {
  for (const auto& o : gpuaff::launch_options)
    if (!o.flag.empty() && o.flag == flag && (o.commands & gpuaff::for_bind) != 0) return &o;
  return nullptr;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--cpu-only-if-refused") {
      a.on_refused = gpuaff::OnRefused::cpu_only;
    } else if (arg == "--map-to-local") {
      a.map_to_local = true;
    } else if (const gpuaff::OptionInfo* o = option_of(arg)) {
      std::string value = "true";
      if (o->type != gpuaff::OptionType::flag) {
        if (i + 1 >= argc) usage_error("option " + std::string(arg) + " needs a value");
        value = argv[++i];
      }
      auto ok = gpuaff::set_option(a.options, o->key, value);
      if (!ok) usage_error(gpuaff::spell_options(ok.error().message(), gpuaff::Spelling::command_line));
    } else {
      usage_error("unknown option '" + std::string(arg) + "' (see the comment at the top of examples/trainer.cpp)");
    }
  }
  a.options.all_gpus = true;  // one worker per GPU that takes part
  return a;
}

/// The value of a "Key:\tlist" line of /proc/self/status.
gpuaff::CpuSet status_list(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  std::string prefix = std::string(key) + ":";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) {
      auto s = gpuaff::CpuSet::parse_list(line.substr(prefix.size()));
      if (s) return *s;
    }
  return {};
}

/// Test mode: id k -> the (k mod n)-th member of `local`.
gpuaff::CpuSet map_onto(const gpuaff::CpuSet& planned, const gpuaff::CpuSet& local) {
  gpuaff::CpuSet out;
  int n = local.count();
  if (n == 0) return planned;
  for (int k : planned) out.set(local.nth(k % n));
  return out;
}

/// The worker: what a training process would do first is look at where it runs.
int worker(int gpu, const gpuaff::CpuSet& expected) {
  gpuaff::CpuSet actual = status_list("Cpus_allowed_list");
  std::string line = "worker " + std::to_string(gpu) + " expected " + expected.to_list() + " Cpus_allowed_list " +
                     actual.to_list() + "\n";
  // One write: lines of concurrent workers do not interleave.
  ssize_t w = ::write(STDOUT_FILENO, line.data(), line.size());
  (void)w;
  return actual == expected ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);

  // The plan: every GPU's CPUs and memory nodes, computed before anything starts,
  // so that a bad GPU stops the launch instead of leaving half the workers running.
  auto plans = gpuaff::plan_every_gpu(args.options);
  if (!plans) {
    std::fprintf(stderr, "trainer: %s\n", gpuaff::spell_options(plans.error().message(), gpuaff::Spelling::command_line).c_str());
    return plans.error().code() == gpuaff::Errc::invalid_argument ? 2 : 1;
  }
  int count = static_cast<int>(plans->size());
  struct Plan {
    gpuaff::CpuSet cpus;
    gpuaff::MemoryOptions memory;
  };
  std::vector<Plan> plan;
  gpuaff::CpuSet local_cpus = status_list("Cpus_allowed_list");
  gpuaff::CpuSet local_nodes = status_list("Mems_allowed_list");
  for (const gpuaff::LaunchPlan& p : *plans) {
    gpuaff::MemoryOptions memory = p.memory(args.on_refused);
    if (args.map_to_local) memory.nodes = map_onto(memory.nodes, local_nodes);
    // One worker thread per physical core: what OMP_NUM_THREADS or DataLoader workers should get.
    auto threads = gpuaff::plan_threads(p, args.options);
    if (!threads) {
      std::fprintf(stderr, "trainer: GPU %d: %s\n", p.visible_gpu, threads.error().what());
      return 1;
    }
    gpuaff::CpuSet run_on = args.map_to_local ? map_onto(p.cpus, local_cpus) : p.cpus;
    std::printf("gpu %d %s: policy %s -> cpus %s%s%s (%d physical cores: OMP_NUM_THREADS=%d)\n", p.visible_gpu,
                p.target().address().to_string().c_str(), std::string(gpuaff::to_string(p.policy.kind)).c_str(),
                p.cpus.to_list().c_str(), args.map_to_local ? ", here " : "",
                args.map_to_local ? run_on.to_list().c_str() : "", *threads, *threads);
    plan.push_back({run_on, memory});
  }
  std::fflush(stdout);  // the workers share stdout; nothing of ours may be pending in it

  std::vector<gpuaff::Child> workers;
  int failures = 0;
  for (int g = 0; g < count; ++g) {
    const Plan& p = plan[static_cast<std::size_t>(g)];
    // Bind this thread, start the worker (it inherits the mask and the memory
    // policy), and let the guard restore this thread at the end of the scope.
    auto guard = gpuaff::ScopedAffinity::create(p.cpus, p.memory);
    if (!guard) {
      std::fprintf(stderr, "trainer: GPU %d: %s\n", g, guard.error().what());
      ++failures;
      break;
    }
    for (const auto& w : guard->warnings()) std::fprintf(stderr, "trainer: GPU %d: warning: %s\n", g, w.c_str());
    gpuaff::CpuSet expected = p.cpus;
    auto child = gpuaff::spawn_callable([g, expected] { return worker(g, expected); });
    if (!child) {
      std::fprintf(stderr, "trainer: GPU %d: %s\n", g, child.error().what());
      ++failures;
      break;
    }
    workers.push_back(std::move(*child));
  }
  auto statuses = gpuaff::wait_all(workers);
  if (!statuses) {
    std::fprintf(stderr, "trainer: %s\n", statuses.error().what());
    return 1;
  }
  for (std::size_t g = 0; g < statuses->size(); ++g)
    if (!(*statuses)[g].success()) {
      std::fprintf(stderr, "trainer: worker %zu did not run on its CPUs (exit %d)\n", g, (*statuses)[g].exit_code);
      ++failures;
    }
  if (failures == 0 && static_cast<int>(workers.size()) == count)
    std::printf("all %d workers ran on their CPUs\n", count);
  return failures == 0 ? 0 : 1;
}
