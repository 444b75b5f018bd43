// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a user asks a launch for, as one value (LaunchOptions), and the one
// table that describes each option once: its key (the LaunchOptions member,
// also the Python keyword), its command-line flag, its value, default, the
// commands it belongs to and its help line. The CLI registers its flags from
// this table, the Python module checks its keywords against it and its stubs
// are checked against it, and docs/cli.md and docs/python.md are compared
// with it by a test. Adding an option is a row here and the code that uses it.
//
// Messages: the library names an option the way this table keys it, always
// with a value, `nproc=4` or `unreachable=nearest` (a flag: `nic_env=true`).
// spell_options() rewrites those words for a front end: `--nproc 4` for the
// command line, `nproc=4` / `unreachable='nearest'` for Python.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/apply/fallback.hpp"
#include "gpuaff/apply/mempolicy.hpp"
#include "gpuaff/detail/suggest.hpp"
#include "gpuaff/launch/choices.hpp"
#include "gpuaff/launch/nics.hpp"
#include "gpuaff/policy/dispatch.hpp"
#include "gpuaff/policy/roles.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/load.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// Everything a launch can be asked for. Defaults are the command line's.
/// Set members directly from C++, or by key and text with set_option() (what
/// the CLI and Python do: the same checks and the same words).
struct LaunchOptions {
  // Which machine.
  MachineSource machine{};                      ///< root, topology, source (reader), hwloc_xml
  std::optional<std::string> visible_devices{}; ///< overrides CUDA_/HIP_/ROCR_VISIBLE_DEVICES
  /// The Kubernetes DRA device metadata directory (source/dra.hpp); "" : the
  /// kubelet's mount point when it exists and the machine is this one.
  std::string dra_metadata{};
  std::string gpu_nodes{};  ///< a file of 'BDF NODE' lines: each GPU's NUMA node, over what the firmware says (probe --gpu-nodes)
  // Which device: one of gpu, all_gpus, pci, local_rank.
  std::optional<int> gpu{};          ///< a visible GPU index (the first of a list)
  std::vector<int> more_gpus{};      ///< gpu=0,4: the others; the process serves them all
  bool all_gpus = false;             ///< every GPU that takes part (plan_every_gpu)
  std::optional<PciAddress> pci{};   ///< any PCI device, a NIC too
  bool local_rank = false;           ///< the GPU is the launcher's local rank (launch/launcher.hpp)
  // The policy and the job.
  PolicySpec policy{};               ///< kind and the NVIDIA modes' options
  JobOptions job{};                  ///< nproc, unknown_node
  Share share = Share::visible;
  Baseline baseline = Baseline::affinity;
  Unreachable unreachable = Unreachable::error;
  int reserve_os_cores = 0;          ///< lowest physical cores of every node kept for the OS
  /// reserve_os_cores=auto: the system's housekeeping CPUs (the online CPUs
  /// that isolcpus, nohz_full and isolated cpuset partitions leave;
  /// source/reserved.hpp) are kept for the OS instead of the lowest cores.
  bool reserve_os_auto = false;
  // Memory and what the command is given.
  MemPolicy membind = MemPolicy::none;
  MemNodes mem_nodes = MemNodes::cpu;
  bool nic_env = false;              ///< export the GPU's NIC set (launch/nics.hpp)
  unsigned nic_libs = default_nic_libs;  ///< the libraries nic_env writes for (NicLib bits)
  int ranks_per_gpu = 0;             ///< ranks sharing one GPU (0: not given); policy/split.hpp
  int domains_per_gpu = 0;           ///< locality domains per GPU that sysfs does not show (0: not given)
  RoleSizes roles{};                 ///< roles inside the rank (policy/roles.hpp); none sized: no roles
  bool priority_cores = false;       ///< main and comm roles on the fastest cores (Core::priority)
  std::optional<int> part{};         ///< which part of the GPU's share, with gpu/pci
  bool omp_threads = false;          ///< export OMP_NUM_THREADS = recommended threads
  Fallback fallback = Fallback::error;  ///< when the machine refuses the binding
  /// The keys set through set_option, in order: the NVIDIA modes' options given
  /// under another policy are a mistake, even when they hold their default.
  std::vector<std::string> given{};

  bool was_given(std::string_view key) const {
    for (const auto& k : given)
      if (k == key) return true;
    return false;
  }
};

/// The commands an option belongs to (a bit set).
enum OptionCommand : unsigned {
  for_bind = 1u,
  for_exec = 2u,
  for_topo = 4u,
  for_doctor = 8u,
  for_record = 16u,
  for_python = 32u,  ///< a keyword of gpuaff.plan/bind/bound/use_executable
  for_probe = 64u,
};

/// What an option's value is.
enum class OptionType {
  flag,      ///< no value on the command line; True/False in Python
  count,     ///< a non-negative decimal integer
  positive,  ///< a positive decimal integer
  text,      ///< a word or list (a policy, a visibility list, a PCI address)
  path,      ///< a file or directory: never empty
  choice,    ///< one of the words of `choices`
  fraction,  ///< a decimal number in [0, 1]
};

/// One option, described once.
struct OptionInfo {
  std::string_view key;         ///< LaunchOptions member and Python keyword: "min_cores"
  std::string_view flag;        ///< "--min-cores"
  std::string_view value_name;  ///< "N", "DIR", ...; the choices for a choice
  OptionType type;
  unsigned commands;            ///< OptionCommand bits
  std::string_view default_text;  ///< as --help and the docs show it; "" for none
  std::string_view help;
  /// Sets the option from its text (flags: "true" or "false").
  /// Errors: Errc::invalid_argument naming the option, the value and what is valid.
  Result<void> (*set)(LaunchOptions&, std::string_view) = nullptr;
  std::string_view negation{};  ///< a second flag that sets it to false ("--no-balanced")
};

namespace detail {

/// "key=text" for a message: the option as the library names it.
inline std::string option_word(std::string_view key, std::string_view text) {
  return std::string(key) + std::string("=") + std::string(text.substr(0, 60));
}

inline Unexpected<Error> bad_option(std::string_view key, std::string_view text, std::string_view what) {
  return fail(Errc::invalid_argument, option_word(key, text.empty() ? std::string_view("''") : text), " is not ", what);
}

/// A decimal integer (digits only) of at most INT_MAX, at least `least`.
inline Result<int> option_int(std::string_view key, std::string_view text, int least) {
  if (text.empty() || !is_decimal(text))
    return bad_option(key, text, least > 0 ? "a positive integer" : "a non-negative integer");
  std::string_view digits = text.substr(std::min(text.find_first_not_of('0'), text.size()));
  constexpr std::string_view max = "2147483647";
  if (digits.size() > max.size() || (digits.size() == max.size() && digits > max))
    return fail(Errc::invalid_argument, option_word(key, text), " is out of range: at most ", max);
  long long v = 0;
  if (!digits.empty()) leading_number(digits, 10, 2147483647LL, v);
  if (v < least)
    return fail(Errc::invalid_argument, option_word(key, text), " is not allowed: at least ", least,
                " (leave it unset for its default)");
  return static_cast<int>(v);
}

inline Result<bool> option_flag(std::string_view key, std::string_view text) {
  if (text == "true") return true;
  if (text == "false") return false;
  return bad_option(key, text, "true or false");
}

inline Result<std::string> option_path(std::string_view key, std::string_view text) {
  if (text.empty())
    return fail(Errc::invalid_argument, key,
                "='' is not a path (an unset variable?); leave the option out for its default");
  if (text.find('\0') != std::string_view::npos)
    return fail(Errc::invalid_argument, key, " holds a NUL byte, which no path can hold");
  return std::string(text);
}

template <class E, std::size_t N>
Result<E> option_choice(std::string_view key, std::string_view text, const std::array<Choice<E>, N>& choices) {
  std::array<std::string_view, N> words{};
  for (std::size_t i = 0; i < N; ++i) {
    if (choices[i].name == text) return choices[i].value;
    words[i] = choices[i].name;
  }
  if (std::string_view guess = closest(text, words); !guess.empty())
    return fail(Errc::invalid_argument, option_word(key, text), " is not valid; did you mean ", guess, "? use one of ",
                choice_names(choices, ", "));
  return fail(Errc::invalid_argument, option_word(key, text), " is not valid; use one of ", choice_names(choices, ", "));
}

// Setters, one per key; `o.given` is filled by set_option.
/// The most locality domains one GPU may be given (domains_per_gpu): every
/// domain needs a core of its own, and no GPU has come near this many.
inline constexpr int max_domains_per_gpu = 64;

#define GPUAFF_OPTION_SETTER(name, body) \
  inline Result<void> name(LaunchOptions& o, std::string_view t) { body return {}; }

GPUAFF_OPTION_SETTER(set_root, { GPUAFF_TRY(o.machine.root, option_path("root", t)); })
GPUAFF_OPTION_SETTER(set_topology, { GPUAFF_TRY(o.machine.topology, option_path("topology", t)); })
GPUAFF_OPTION_SETTER(set_hwloc_xml, { GPUAFF_TRY(o.machine.hwloc_xml, option_path("hwloc_xml", t)); })
GPUAFF_OPTION_SETTER(set_source, {
  if (t != "sysfs" && t != "hwloc") return bad_option("source", t, "a reader; use sysfs or hwloc");
  o.machine.reader = std::string(t);
})
GPUAFF_OPTION_SETTER(set_visible_devices, {
  if (t.find('\0') != std::string_view::npos) return bad_option("visible_devices", "LIST", "valid: it holds a NUL byte");
  o.visible_devices = std::string(t);
})
GPUAFF_OPTION_SETTER(set_vendor, { GPUAFF_TRY(o.machine.vendor, option_choice("vendor", t, vendor_choices)); })
GPUAFF_OPTION_SETTER(set_gpu, {
  if (t == "all") {
    o.all_gpus = true;
    return {};
  }
  o.more_gpus.clear();
  auto items = comma_items(t);  // "3", or a list "0,4": several GPUs per process
  for (std::size_t i = 0; i < items.size(); ++i) {
    GPUAFF_TRY(int g, option_int("gpu", items[i], 0));
    if (i == 0) {
      o.gpu = g;
    } else if (g == *o.gpu || std::find(o.more_gpus.begin(), o.more_gpus.end(), g) != o.more_gpus.end()) {
      return fail(Errc::invalid_argument, "gpu=", t.substr(0, 60), " names GPU ", g, " twice; name each GPU once");
    } else if (o.more_gpus.size() >= 1023) {  // more than any machine has; keeps the duplicate check short
      return fail(Errc::invalid_argument, "gpu=", t.substr(0, 60), "... names more than 1024 GPUs");
    } else {
      o.more_gpus.push_back(g);
    }
  }
})
GPUAFF_OPTION_SETTER(set_pci, {
  if (t.empty()) return fail(Errc::invalid_argument, "pci='' names no device (an unset variable?); give a PCI address such as 0000:17:00.0");
  auto a = PciAddress::parse(t);
  if (!a) return fail(Errc::invalid_argument, "pci=", t.substr(0, 60), " is not a PCI address (", a.error().message(), ")");
  o.pci = *a;
})
GPUAFF_OPTION_SETTER(set_local_rank, { GPUAFF_TRY(o.local_rank, option_flag("local_rank", t)); })
GPUAFF_OPTION_SETTER(set_policy, {
  auto k = parse_policy(t);
  if (!k) return Unexpected<Error>(k.error());
  o.policy.kind = *k;
})
GPUAFF_OPTION_SETTER(set_scope, { GPUAFF_TRY(o.policy.nvidia.scope, option_choice("scope", t, scope_choices)); })
GPUAFF_OPTION_SETTER(set_smt, { GPUAFF_TRY(o.policy.nvidia.smt, option_choice("smt", t, smt_choices)); })
GPUAFF_OPTION_SETTER(set_balanced, { GPUAFF_TRY(o.policy.nvidia.balanced, option_flag("balanced", t)); })
GPUAFF_OPTION_SETTER(set_min_cores, { GPUAFF_TRY(o.policy.nvidia.min_cores, option_int("min_cores", t, 0)); })
GPUAFF_OPTION_SETTER(set_max_cores, { GPUAFF_TRY(o.policy.nvidia.max_cores, option_int("max_cores", t, 1)); })
GPUAFF_OPTION_SETTER(set_nproc, { GPUAFF_TRY(o.job.nproc, option_int("nproc", t, 1)); })
GPUAFF_OPTION_SETTER(set_unknown_node, { GPUAFF_TRY(o.job, parse_unknown_node(t, o.job)); })
GPUAFF_OPTION_SETTER(set_share, { GPUAFF_TRY(o.share, option_choice("share", t, share_choices)); })
GPUAFF_OPTION_SETTER(set_baseline, { GPUAFF_TRY(o.baseline, option_choice("baseline", t, baseline_choices)); })
GPUAFF_OPTION_SETTER(set_unreachable, { GPUAFF_TRY(o.unreachable, option_choice("unreachable", t, unreachable_choices)); })
GPUAFF_OPTION_SETTER(set_reserve_os_cores, {
  o.reserve_os_auto = t == "auto";
  if (o.reserve_os_auto) {
    o.reserve_os_cores = 0;
    return {};
  }
  if (!t.empty() && !is_decimal(t))
    return bad_option("reserve_os_cores", t, "a non-negative integer or auto (the system's housekeeping CPUs)");
  GPUAFF_TRY(o.reserve_os_cores, option_int("reserve_os_cores", t, 0));
})
GPUAFF_OPTION_SETTER(set_membind, { GPUAFF_TRY(o.membind, option_choice("membind", t, membind_choices)); })
GPUAFF_OPTION_SETTER(set_dra_metadata, { GPUAFF_TRY(o.dra_metadata, option_path("dra_metadata", t)); })
GPUAFF_OPTION_SETTER(set_gpu_nodes, { GPUAFF_TRY(o.gpu_nodes, option_path("gpu_nodes", t)); })
GPUAFF_OPTION_SETTER(set_mem_nodes, { GPUAFF_TRY(o.mem_nodes, option_choice("mem_nodes", t, mem_nodes_choices)); })
GPUAFF_OPTION_SETTER(set_nic_env, { GPUAFF_TRY(o.nic_env, option_flag("nic_env", t)); })
GPUAFF_OPTION_SETTER(set_nic_libs, { GPUAFF_TRY(o.nic_libs, parse_nic_libs(t)); })
GPUAFF_OPTION_SETTER(set_ranks_per_gpu, { GPUAFF_TRY(o.ranks_per_gpu, option_int("ranks_per_gpu", t, 1)); })
GPUAFF_OPTION_SETTER(set_part, { GPUAFF_TRY(o.part, option_int("part", t, 0)); })
GPUAFF_OPTION_SETTER(set_domains_per_gpu, {
  GPUAFF_TRY(o.domains_per_gpu, option_int("domains_per_gpu", t, 1));
  if (o.domains_per_gpu > max_domains_per_gpu)
    return fail(Errc::invalid_argument, "domains_per_gpu=", o.domains_per_gpu, " is more than ", max_domains_per_gpu,
                " domains per GPU");
})
GPUAFF_OPTION_SETTER(set_omp_threads, { GPUAFF_TRY(o.omp_threads, option_flag("omp_threads", t)); })
GPUAFF_OPTION_SETTER(set_roles, { GPUAFF_TRY(o.roles, parse_roles(t)); })
GPUAFF_OPTION_SETTER(set_priority_cores, { GPUAFF_TRY(o.priority_cores, option_flag("priority_cores", t)); })
GPUAFF_OPTION_SETTER(set_fallback, { GPUAFF_TRY(o.fallback, option_choice("fallback", t, fallback_choices)); })
#undef GPUAFF_OPTION_SETTER

inline constexpr unsigned launch_commands = for_bind | for_exec | for_python;
inline constexpr unsigned every_plan_command = for_bind | for_exec | for_topo | for_doctor | for_python;

}  // namespace detail

/// Every option of a launch, in the order --help and the docs show them.
inline const auto launch_options = std::to_array<OptionInfo>({
    {"root", "--root", "DIR|FILE.tar", OptionType::path, detail::every_plan_command, "this machine",
     "read the machine from a recorded root: a directory laid out like /, or the FILE.tar gpuaff record writes, "
     "also compressed with xz or gzip as the fixtures ship (read as it is, never unpacked)", detail::set_root},
    {"topology", "--topology", "FILE.json", OptionType::path, detail::every_plan_command, "",
     "read the machine from a JSON file written by gpuaff topo --format json", detail::set_topology},
    {"source", "--source", "sysfs|hwloc", OptionType::text, detail::every_plan_command, "sysfs",
     "which reader reads the root or this machine: sysfs (gpuaff's own) or hwloc (gpuaff-hwloc only; docs/hwloc.md)",
     detail::set_source},
    {"hwloc_xml", "--hwloc-xml", "FILE.xml", OptionType::path, detail::every_plan_command, "",
     "read the machine from an hwloc XML file (lstopo --of xml; gpuaff-hwloc only)", detail::set_hwloc_xml},
    {"visible_devices", "--visible-devices", "LIST", OptionType::text, detail::every_plan_command, "",
     "the GPUs the job sees, like CUDA_VISIBLE_DEVICES (indices or GPU-/MIG- UUID prefixes); overrides "
     "CUDA_/HIP_/ROCR_VISIBLE_DEVICES",
     detail::set_visible_devices},
    {"vendor", "--vendor", "auto|nvidia|amd|intel", OptionType::choice, detail::every_plan_command, "auto",
     "whose GPUs an index counts, as that vendor's runtime numbers them: nvidia (CUDA), amd (HIP), intel (Level "
     "Zero); auto: NVIDIA's when the machine has any, else AMD's, else Intel's. A display device of another vendor "
     "never takes an index",
     detail::set_vendor},
    {"gpu", "--gpu", "N[,N...]", OptionType::count, for_bind | for_exec | for_doctor | for_python, "",
     "the GPU: its index among the visible GPUs; a list (0,4) for a process that drives several: the union of "
     "their shares and memory nodes (bind also takes all: one result per GPU; doctor: default its own local rank)",
     detail::set_gpu},
    {"pci", "--pci", "BDF", OptionType::text, detail::launch_commands, "",
     "the device by PCI address (any device, a NIC too)", detail::set_pci},
    {"local_rank", "--local-rank", "", OptionType::flag, for_exec | for_python, "",
     "the GPU index is the launcher's local rank: the first set of LOCAL_RANK, SLURM_LOCALID, "
     "OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, PMI_LOCAL_RANK, PALS_LOCAL_RANKID",
     detail::set_local_rank},
    {"policy", "--policy", "P", OptionType::text, detail::every_plan_command, "node",
     "the binding policy (topo: the one its picture draws, default exclusive); see Policies", detail::set_policy},
    {"scope", "--scope", "node|socket", OptionType::choice, detail::every_plan_command, "node",
     "NVIDIA modes: the GPU's node or its whole socket", detail::set_scope},
    {"smt", "--smt", "all|one", OptionType::choice, detail::every_plan_command, "all",
     "NVIDIA modes: every hardware thread of a chosen core, or one", detail::set_smt},
    {"balanced", "--balanced", "", OptionType::flag, detail::every_plan_command, "true",
     "NVIDIA modes: every GPU gets the same number of cores; --no-balanced: each node's GPUs split that node's "
     "cores",
     detail::set_balanced, "--no-balanced"},
    {"min_cores", "--min-cores", "N", OptionType::count, detail::every_plan_command, "0",
     "NVIDIA modes: fail when a GPU gets fewer physical cores", detail::set_min_cores},
    {"max_cores", "--max-cores", "N", OptionType::positive, detail::every_plan_command, "no limit",
     "NVIDIA modes: keep at most N physical cores per GPU", detail::set_max_cores},
    {"nproc", "--nproc", "N", OptionType::positive, detail::every_plan_command, "all",
     "only GPUs 0..N-1 take part (the job's processes on this machine); under --local-rank the launcher's local "
     "size stands for it",
     detail::set_nproc},
    {"unknown_node", "--unknown-node", "error|node0|N", OptionType::text, detail::every_plan_command, "error",
     "GPUs whose PCI numa_node is -1 (VMs): error, node0 (as PyTorch does), or a node id N", detail::set_unknown_node},
    {"share", "--share", "visible|machine", OptionType::choice, detail::launch_commands | for_doctor, "visible",
     "policies that split a node among GPUs: split among the GPUs that take part (visible), or among every GPU of "
     "the host (machine: processes that each see one GPU get disjoint slices)",
     detail::set_share},
    {"baseline", "--baseline", "affinity|cgroup", OptionType::choice, detail::launch_commands | for_doctor, "affinity",
     "the CPUs bindings are drawn from: affinity (the allowed set a launcher or taskset left) or cgroup (the "
     "cgroup cpuset, ignoring a narrower mask set by mpirun or srun)",
     detail::set_baseline},
    {"unreachable", "--unreachable", "error|nearest", OptionType::choice, detail::launch_commands | for_doctor, "error",
     "when no allowed CPU is on the GPU's node (a pod on the other socket): error, or nearest (the allowed CPUs "
     "of the closest node(s) by NUMA distance)",
     detail::set_unreachable},
    {"reserve_os_cores", "--reserve-os-cores", "N|auto", OptionType::count, detail::launch_commands | for_doctor, "0",
     "take the N lowest-numbered physical cores of every NUMA node (all their threads) out before any share is "
     "computed: cores kept for the OS, interrupts and daemons; auto: take the system's housekeeping CPUs out instead "
     "(those isolcpus=, nohz_full= and isolated cgroup partitions leave; an error when the system declares none)",
     detail::set_reserve_os_cores},
    {"ranks_per_gpu", "--ranks-per-gpu", "N", OptionType::positive, detail::every_plan_command, "1",
     "several ranks per GPU: the GPU's share is cut into N disjoint parts of whole cores (sizes differ by at most "
     "one); under --local-rank rank r uses GPU r/N and part r%N (the default N is local size / GPUs when that is a "
     "whole multiple)",
     detail::set_ranks_per_gpu},
    {"part", "--part", "P", OptionType::count, detail::launch_commands | for_doctor, "",
     "with --ranks-per-gpu N and --gpu or --pci: which part of the GPU's share, 0..N-1", detail::set_part},
    {"domains_per_gpu", "--domains-per-gpu", "N", OptionType::positive, detail::every_plan_command, "1",
     "locality domains the system files do not show (2 per Vera Rubin GPU under CUDA's MPS device enumeration): "
     "each GPU counts as N GPUs in a row, domain k getting part k of the GPU's share, cut on whole cores",
     detail::set_domains_per_gpu},
    {"membind", "--membind", "none|local|bind|preferred|interleave", OptionType::choice, detail::launch_commands, "none",
     "memory policy over the GPU's node(s): none (the kernel's first touch), local (strict, as numactl's "
     "membind does; bind is a synonym), preferred, interleave",
     detail::set_membind},
    {"dra_metadata", "--dra-metadata", "DIR", OptionType::path, detail::launch_commands | for_doctor,
     "the kubelet's, when it exists",
     "the Kubernetes DRA device metadata (KEP-5304): the claimed GPUs by PCI address are the GPUs, the claimed CPUs "
     "the set shares are drawn from; a claim the process does not see is an error. Default: the kubelet's mount "
     "point (docs/contract.md section 7) when it exists and the machine is this one",
     detail::set_dra_metadata},
    {"gpu_nodes", "--gpu-nodes", "FILE", OptionType::path, detail::every_plan_command, "",
     "each GPU's NUMA node from FILE ('BDF NODE' lines, '#' comments; gpuaff probe --gpu N --gpu-nodes FILE writes it), "
     "over the numa_node the firmware reports (-1 in many VMs)",
     detail::set_gpu_nodes},
    {"mem_nodes", "--mem-nodes", "cpu|gpu|socket", OptionType::choice, detail::launch_commands | for_doctor, "cpu",
     "the nodes memory is bound to: cpu (the GPU's CPU node), gpu (the GPU's own memory nodes: GH200/GB200 "
     "coherent mode), socket (every CPU node of the GPU's socket)",
     detail::set_mem_nodes},
    {"nic_env", "--nic-env", "", OptionType::flag, detail::launch_commands, "",
     "export the GPU's NIC set (the RDMA or Slingshot NICs at its nearest PCIe path class, shared fairly) to the libraries "
     "--nic-libs names (bind shows them with --format json or env)",
     detail::set_nic_env},
    {"nic_libs", "--nic-libs", "LIST", OptionType::text, detail::launch_commands, "ucx,nvshmem,cxi",
     "with --nic-env, the variables written: ucx (UCX_NET_DEVICES), nvshmem (NVSHMEM_HCA_LIST), cxi "
     "(FI_CXI_DEVICE_NAME = the set's Slingshot NICs), ucx-host (UCX_NET_DEVICES = the rails on the host buffers' "
     "nodes), nccl-set (NCCL_IB_HCA = the GPU's set) or nccl-rails (NCCL_IB_HCA = every rail with its rail and "
     "plane, NCCL_NET_MERGE_POLICY=RAIL); NCCL is left to pick its rails unless named",
     detail::set_nic_libs},
    {"omp_threads", "--omp-threads", "", OptionType::flag, for_exec | for_python, "",
     "export OMP_NUM_THREADS = the binding's recommended thread count (its physical cores; with --roles, the compute "
     "role's)", detail::set_omp_threads},
    {"roles", "--roles", "main=N,comm=N,data=N", OptionType::text, detail::every_plan_command, "",
     "cut the rank's CPUs into roles of whole physical cores: main (the launching thread), comm (communication "
     "threads), data (data-loading workers), compute (the rest: OpenMP, exported as OMP_PLACES with "
     "OMP_PROC_BIND=close)",
     detail::set_roles},
    {"priority_cores", "--priority-cores", "", OptionType::flag, detail::launch_commands | for_doctor, "",
     "with --roles: the main and comm roles take the fastest cores the platform states (cpufreq base_frequency, "
     "acpi_cppc highest_perf or cpu_capacity; values within 2% are alike)",
     detail::set_priority_cores},
    {"fallback", "--fallback", "error|unbound", OptionType::choice, for_exec | for_python, "error",
     "when the machine refuses the binding: error, or unbound (one warning line, then run anyway; a refused memory "
     "policy keeps the CPU binding). Usage mistakes always fail",
     detail::set_fallback},
    {"all_gpus", "", "", OptionType::flag, 0u, "",
     "every GPU that takes part (gpu=all on the command line)", nullptr},
});

/// The row of `key` in launch_options, or nullptr.
inline const OptionInfo* find_option(std::string_view key) {
  for (const auto& o : launch_options)
    if (o.key == key) return &o;
  return nullptr;
}

/// Sets option `key` from its text, with the checks the command line applies.
/// Errors: Errc::invalid_argument for an unknown key or a bad value.
inline Result<void> set_option(LaunchOptions& options, std::string_view key, std::string_view text) {
  const OptionInfo* o = find_option(key);
  if (o == nullptr || o->set == nullptr) return fail(Errc::invalid_argument, "unknown option '", key.substr(0, 40), "'");
  GPUAFF_TRY_VOID(o->set(options, text));
  options.given.emplace_back(key);
  return {};
}

/// The checks no single option can make: one machine, one device.
/// Errors: Errc::invalid_argument naming the options that conflict.
inline Result<void> check_options(const LaunchOptions& o) {
  const MachineSource& m = o.machine;
  int machines = (m.root.empty() ? 0 : 1) + (m.topology.empty() ? 0 : 1) + (m.hwloc_xml.empty() ? 0 : 1);
  if (machines > 1)
    return fail(Errc::invalid_argument, "root=DIR, topology=FILE and hwloc_xml=FILE each name a machine; name one");
  if (!o.more_gpus.empty() && o.ranks_per_gpu > 1)
    return fail(Errc::invalid_argument, "gpu=", *o.gpu, ",", o.more_gpus.front(),
                "... names several GPUs for one process, and ranks_per_gpu=", o.ranks_per_gpu,
                " several processes for one GPU; use one of them");
  if (o.part && o.local_rank)
    return fail(Errc::invalid_argument, "part=", *o.part, " names the part of a named GPU; under local_rank=true the "
                "part is the local rank mod ranks_per_gpu; leave part out");
  if (o.part && o.ranks_per_gpu < 2)
    return fail(Errc::invalid_argument, "part=", *o.part, " needs ranks_per_gpu=N above 1 (the number of parts)");
  if (o.part && *o.part >= o.ranks_per_gpu)
    return fail(Errc::invalid_argument, "part=", *o.part, " is not below ranks_per_gpu=", o.ranks_per_gpu,
                " (parts are numbered from 0)");
  if (o.ranks_per_gpu > 1 && !o.part && !o.local_rank)
    return fail(Errc::invalid_argument, "ranks_per_gpu=", o.ranks_per_gpu, " needs part=P (0..",
                o.ranks_per_gpu - 1, ") to say which part of the GPU's share, or local_rank=true");
  if (o.priority_cores && o.roles.main + o.roles.comm == 0)
    return fail(Errc::invalid_argument, "priority_cores=true puts the main and comm roles on the fastest cores, and "
                "no such role is sized; add roles=main=1,comm=1 (or leave priority_cores out)");
  if (o.was_given("nic_libs") && !o.nic_env)
    return fail(Errc::invalid_argument, "nic_libs=", nic_libs_text(o.nic_libs),
                " names the variables nic_env=true writes, and nic_env=true is not given; add it");
  int devices = (o.gpu ? 1 : 0) + (o.all_gpus ? 1 : 0) + (o.pci ? 1 : 0) + (o.local_rank ? 1 : 0);
  if (devices > 1) return fail(Errc::invalid_argument, "gpu=N, pci=BDF and local_rank=true each name the device; name one");
  if (!policy_info(o.policy.kind).nvidia_options) {
    for (std::string_view key : {"scope", "smt", "balanced", "min_cores", "max_cores"}) {
      if (!o.was_given(key)) continue;
      std::string modes;
      for (const PolicyInfo& p : policy_registry)
        if (p.nvidia_options) modes += std::string(modes.empty() ? "" : ", ") + std::string(p.name);
      // A flag names its value (balanced=false is --no-balanced); the others need none.
      std::string word = key == "balanced" ? (o.policy.nvidia.balanced ? "balanced=true" : "balanced=false")
                                           : std::string(key) + "=";
      return fail(Errc::invalid_argument, word, " does not apply to policy=", to_string(o.policy.kind),
                  "; it applies to ", modes, " only: leave it unset or pick one of those policies");
    }
  }
  return {};
}

/// How a front end writes an option.
enum class Spelling {
  library,       ///< key=value, as messages are written
  command_line,  ///< --flag value, --flag for a flag set to true, --no-... or "leave out --flag" otherwise
  python,        ///< key=value with Python literals: 'text', True, False
};

/// `message` with every option word written in `spelling`: `key=value`
/// whose key is a row of `tables` (not preceded by a letter, digit, '_' or
/// '-'), or a bare key that holds a '_' (`visible_devices`). A value runs to
/// the next blank, ',', ';' or ')', or is quoted ('0,x'); `key=` with no value
/// is the option alone. Other quoted text ('...' after no letter or digit:
/// a variable's value, a list entry) is copied as it is.
inline std::string spell_options(std::string_view message, Spelling spelling,
                                 std::initializer_list<std::span<const OptionInfo>> tables) {
  if (spelling == Spelling::library) return std::string(message);
  auto find = [&](std::string_view key) -> const OptionInfo* {
    for (auto table : tables)
      for (const auto& o : table)
        if (o.key == key && !o.flag.empty()) return &o;
    return nullptr;
  };
  auto word_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  };
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    char c = message[i];
    // Quoted outside text (CUDA_VISIBLE_DEVICES='...', entry '...': a ' that
    // follows no letter or digit, so not an apostrophe) is copied as it is: a
    // value holding "gpu=3" is the user's text, not an option to respell.
    // detail::quotable() wrote any ' inside it as \x27.
    if (c == '\'' && (i == 0 || !alnum(message[i - 1]))) {
      std::size_t close = message.find('\'', i + 1);
      if (close != std::string_view::npos) {
        out.append(message.substr(i, close + 1 - i));
        i = close + 1;
        continue;
      }
    }
    if (!(c >= 'a' && c <= 'z') || (i > 0 && word_char(message[i - 1]))) {
      out += c;
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < message.size() && ((message[end] >= 'a' && message[end] <= 'z') || message[end] == '_')) ++end;
    std::string_view key = message.substr(i, end - i);
    bool assigned = end < message.size() && message[end] == '=';
    bool bare = !assigned && key.find('_') != std::string_view::npos && (end == message.size() || !word_char(message[end]));
    const OptionInfo* o = assigned || bare ? find(key) : nullptr;
    if (o == nullptr) {
      out.append(key);
      i = end;
      continue;
    }
    std::size_t v = assigned ? end + 1 : end;
    std::size_t vend = v;
    if (assigned && v < message.size() && message[v] == '\'') {
      std::size_t close = message.find('\'', v + 1);
      vend = close == std::string_view::npos ? message.size() : close + 1;
    } else if (assigned) {
      while (vend < message.size() && std::string_view(" ,;)\"").find(message[vend]) == std::string_view::npos) ++vend;
      // A ':' or '.' that ends the value ends the phrase ("scope=socket: node 1"), not the value.
      while (vend > v && (message[vend - 1] == ':' || message[vend - 1] == '.')) --vend;
    }
    std::string_view value = message.substr(v, vend - v);
    bool quoted_already = !value.empty() && value.front() == '\'';
    if (spelling == Spelling::command_line) {
      if (o->type == OptionType::flag) {
        out.append(value == "false" && !o->negation.empty() ? o->negation : o->flag);
      } else {
        out.append(o->flag);
        if (!value.empty()) out.append(" ").append(value);
      }
    } else {
      out.append(o->key);
      if (assigned) out.append("=");
      bool text = o->type == OptionType::text || o->type == OptionType::path || o->type == OptionType::choice;
      if (o->key == "gpu" && !value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos)
        text = false;
      if (value == "true") out.append("True");
      else if (value == "false") out.append("False");
      else if (text && !value.empty() && !quoted_already) out.append("'").append(value).append("'");
      else out.append(value);
    }
    i = vend;
  }
  return out;
}

/// `message` in `spelling`, for the launch options alone.
inline std::string spell_options(std::string_view message, Spelling spelling) {
  return spell_options(message, spelling, {std::span<const OptionInfo>(launch_options)});
}

}  // namespace v0
}  // namespace gpuaff
