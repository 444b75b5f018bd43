// SPDX-License-Identifier: Apache-2.0
#pragma once
// A Topology as JSON, and back: the form `gpuaff topo --format json` prints
// (docs/contract.md section 3) and `--topology FILE.json` reads. Needs nlohmann_json,
// so it is not in the umbrella header; link gpuaff::json.
//
// The object, keys in this order (cpulists are strings in the kernel's form):
//   format_version   1; a reader refuses a larger number
//   root             where the topology came from (Topology::origin); informational on input
//   allowed_cpus     the allowed set bindings are drawn from: the process's allowed
//                    CPUs that are online (docs/contract.md section 1)
//   recorded_allowed_cpus  only when it differs: the allowed set as recorded
//                    (it may name offline or absent CPUs)
//   online_cpus
//   mems_allowed     allowed node ids as a list; "" = unknown
//   packages         [{"id": 0, "cpus": "0-23,48-71"}]           id -1: no package id
//   numa_nodes       [{"id": 0, "cpus": "...", "distances": [10, 21]}]   sorted by id;
//                    distances follow numa_nodes' order; "cpus": "" is a memory-only node
//   cores            ["0,48", "1,49"]: each physical core's hardware threads
//   core_packages    [0, 0, ...]: the package of each core, same order (derived from
//                    "packages" when absent)
//   core_complexes   [{"level": 3, "cpus": "0-3,128-131"}]: last-level cache groups
//   pci_devices      [{"bdf": "0000:07:00.0", "class": "0x030200", "vendor": "0x10de",
//                      "device": "0x20b0", "numa_node": 3, "local_cpus": "48-63,176-191",
//                      "has_local_cpus": true}]
//   gpus             [{"index": 0, "bdf": "0000:07:00.0", "uuid": "GPU-...", "numa_node": 3}]
//                    each names a pci_devices entry, which supplies the rest of the GPU;
//                    also "nics": [{"bdf": "0000:1c:00.0", "names": ["mlx5_0", "ibp28s0"],
//                    "path": "PIX"}] nearest first (path PIX, PXB, PHB, NODE or SYS: each
//                    names a "nics" entry) and "memory_nodes": [2] (the GPU's own memory nodes)
//   nics             [{"bdf": "0000:1c:00.0", "names": ["mlx5_0", "ibp28s0"], "numa_node": 0,
//                      "rdma": ["mlx5_0"], "rdma_port": 1}]: network devices (class 0x02);
//                    "rdma" are the names that are RDMA devices (sys/class/infiniband);
//                    "cxi" (written only when there are some) those that are HPE
//                    Slingshot NICs (sys/class/cxi: cxi0)
//   hidden_gpus      [{"bdf": "0000:07:00.0", "nics": [...], "memory_nodes": []}]: GPU-class
//                    pci_devices that are not the process's (Topology::hidden_gpus: a
//                    container's driver list left them out), with what is near them as in
//                    "gpus"; a plain address string is read too; written only when there are some
//   notes            ["sys/devices/system/cpu/online is missing: ..."]: what the source
//                    assumed where the machine did not say (always present; [] when none)
//
// On input only "online_cpus" and "numa_nodes" are required; a missing
// "allowed_cpus" means every online CPU, other missing lists mean none. An
// "allowed_cpus" naming CPUs that are not online is kept to the online ones
// (the given set becomes recorded_allowed_cpus). Two numa_nodes listing the
// same CPU, and two pci_devices with the same address, are errors
// (source/validate.hpp, shared with the sysfs reader). Hex fields
// take "0x..." strings or plain numbers. Unknown keys are ignored (newer writers
// may add some).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuaff/detail/fs.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/visible.hpp"
#include "gpuaff/source/source.hpp"
#include "gpuaff/source/validate.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// The "format_version" to_json() writes; topology_from_json() reads this and older.
inline constexpr int json_format_version = 1;

/// The topology as one JSON object (keys above). `indent` < 0: one line.
inline std::string to_json(const Topology& topology, int indent = 2);

/// Parses what to_json() writes (or a hand-written subset, see above). `origin`
/// names the text in error messages (a file name) and becomes Topology::origin.
/// GPUs are exactly the "gpus" entries; no visibility rules are applied;
/// host_gpus are every GPU-class device (and every device a "gpus" entry names).
/// Errors: Errc::parse_error (not JSON, a missing key, a value of the wrong type, a
/// malformed cpulist or PCI address, duplicate or unsorted node ids, a "gpus" entry
/// that names no pci_devices entry or disagrees with it), Errc::out_of_range (an id or
/// number beyond its field), Errc::unsupported (format_version newer than this reader).
/// Messages name `origin` and the key path, e.g. "numa_nodes[2].cpus".
inline Result<Topology> topology_from_json(std::string_view text, std::string_view origin);

/// A TopologySource that reads a JSON file. Like SysfsSource, the GPUs are
/// rebuilt on every load: every GPU-class device of "pci_devices" (and every
/// device a "gpus" entry names), in bus order, with the UUIDs of "gpus", then
/// filtered by select_visible_gpus() with `visible` (and the environment when
/// visible.use_environment). So a file recorded under CUDA_VISIBLE_DEVICES=3 still
/// knows every GPU.
class JsonSource {
 public:
  struct Options {
    std::string path;          ///< the JSON file
    VisibleDevices visible{};  ///< GPU visibility (see source/visible.hpp)
  };

  explicit JsonSource(Options options) : options_(std::move(options)) {}

  /// Errors: Errc::io_error (the file cannot be read; sys_errno set), those of
  /// topology_from_json(), and those of select_visible_gpus().
  Result<Topology> load();

  const Options& options() const { return options_; }

 private:
  Options options_;
};

static_assert(TopologySource<JsonSource>);

// ---- implementation ---------------------------------------------------------

namespace detail::json {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

inline std::string hex_text(std::uint32_t v, int digits) {
  FixedString<16> s("0x");
  s.append_hex(v, digits);
  return std::string(s.view());
}

/// Reads one JSON document, naming `origin` and the key path in every error.
class Parser {
 public:
  explicit Parser(std::string_view origin) : origin_(origin) {}

  template <class... Parts>
  Unexpected<Error> bad(Errc code, const std::string& path, const Parts&... parts) const {
    return fail(code, "topology JSON '", origin_, "': ", path.empty() ? std::string("top level") : path, ": ",
                parts...);
  }

  /// obj[key] or nullptr; `obj` must be an object.
  static const Json* find(const Json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  Result<const Json*> require(const Json& obj, const std::string& path, const char* key) const {
    const Json* v = find(obj, key);
    if (v == nullptr) return bad(Errc::parse_error, join(path, key), "missing key (required)");
    return v;
  }

  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }
  static std::string at(const std::string& path, std::size_t i) { return path + std::string("[") + std::to_string(i) + "]"; }

  static std::string_view type_of(const Json& v) {
    switch (v.type()) {
      case Json::value_t::null: return "null";
      case Json::value_t::object: return "an object";
      case Json::value_t::array: return "an array";
      case Json::value_t::string: return "a string";
      case Json::value_t::boolean: return "a boolean";
      case Json::value_t::number_float: return "a fractional number";
      default: return "a number";
    }
  }

  Result<void> expect(const Json& v, const std::string& path, Json::value_t type, std::string_view what) const {
    if (v.type() == type) return {};
    return bad(Errc::parse_error, path, "expected ", what, ", found ", type_of(v));
  }

  Result<long long> integer(const Json& v, const std::string& path, long long lo, long long hi) const {
    long long x = 0;
    if (v.is_number_unsigned()) {
      auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<long long>::max()))
        return bad(Errc::out_of_range, path, "number too large");
      x = static_cast<long long>(u);
    } else if (v.is_number_integer()) {
      x = v.get<std::int64_t>();
    } else {
      return bad(Errc::parse_error, path, "expected an integer, found ", type_of(v));
    }
    if (x < lo || x > hi) return bad(Errc::out_of_range, path, "value ", x, " outside ", lo, "..", hi);
    return x;
  }

  /// "0x10de", "10de" or a plain number.
  Result<long long> hex(const Json& v, const std::string& path, long long hi) const {
    if (!v.is_string()) return integer(v, path, 0, hi);
    const auto& s = v.get_ref<const std::string&>();
    std::string_view t = s;
    if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t.remove_prefix(2);
    if (t.empty() || t.size() > 8) return bad(Errc::parse_error, path, "malformed hex number '", s.substr(0, 24), "'");
    long long x = 0;
    if (detail::leading_number(t, 16, 0xffffffffLL, x) != t.size())
      return bad(Errc::parse_error, path, "malformed hex number '", s.substr(0, 24), "'");
    if (x > hi) return bad(Errc::out_of_range, path, "value ", s.substr(0, 24), " too large");
    return x;
  }

  Result<CpuSet> cpus(const Json& v, const std::string& path) const {
    GPUAFF_TRY_VOID(expect(v, path, Json::value_t::string, "a cpulist string such as \"0-3,8\""));
    const auto& text = v.get_ref<const std::string&>();
    auto parsed = CpuSet::parse_list(text);
    if (!parsed)
      return bad(parsed.error().code(), path, "\"", std::string_view(text).substr(0, 48), "\": ", parsed.error().message());
    return *parsed;
  }

  Result<const Json*> array(const Json& obj, const std::string& path, const char* key, bool required) const {
    const Json* v = find(obj, key);
    if (v == nullptr) {
      if (required) return bad(Errc::parse_error, join(path, key), "missing key (required)");
      return static_cast<const Json*>(nullptr);
    }
    GPUAFF_TRY_VOID(expect(*v, join(path, key), Json::value_t::array, "an array"));
    return v;
  }

  /// Calls `each(object, path, i)` (which returns Result<void>) for every
  /// element of the array doc[key], each of which must be an object; an
  /// absent array that is not `required` has none.
  template <class Each>
  Result<void> each_object(const Json& doc, const char* key, bool required, Each each) const {
    GPUAFF_TRY(const Json* arr, array(doc, "", key, required));
    if (arr == nullptr) return {};
    for (std::size_t i = 0; i < arr->size(); ++i) {
      GPUAFF_TRY_VOID(expect((*arr)[i], at(key, i), Json::value_t::object, "an object"));
      GPUAFF_TRY_VOID(each((*arr)[i], at(key, i), i));
    }
    return {};
  }

 private:
  std::string origin_;
};

// The sections of a document, in the order to_json() writes them; each fills
// its part of `t`.

/// format_version, online_cpus, allowed_cpus, mems_allowed.
inline Result<void> parse_cpu_sets(const Parser& p, const Json& doc, Topology& t) {
  const std::string top;
  if (const Json* v = Parser::find(doc, "format_version")) {
    GPUAFF_TRY(long long ver, p.integer(*v, "format_version", 0, std::numeric_limits<int>::max()));
    if (ver > json_format_version)
      return p.bad(Errc::unsupported, "format_version", "version ", ver, " is newer than this gpuaff reads (",
                   json_format_version, "); use a newer gpuaff");
  }
  GPUAFF_TRY(const Json* online, p.require(doc, top, "online_cpus"));
  GPUAFF_TRY(t.online, p.cpus(*online, "online_cpus"));
  if (const Json* v = Parser::find(doc, "allowed_cpus")) {
    GPUAFF_TRY(t.allowed, p.cpus(*v, "allowed_cpus"));
  } else {
    t.allowed = t.online;
  }
  if (const Json* v = Parser::find(doc, "recorded_allowed_cpus")) {
    GPUAFF_TRY(t.recorded_allowed, p.cpus(*v, "recorded_allowed_cpus"));
  }
  // Bindings are drawn from the allowed CPUs that are online.
  if (CpuSet usable = t.allowed & t.online; usable != t.allowed) {
    if (usable.empty())
      return p.bad(Errc::parse_error, "allowed_cpus", "names none of online_cpus (", t.online.to_list(),
                   "); list the CPUs the job may use");
    if (t.recorded_allowed.empty()) t.recorded_allowed = t.allowed;
    t.allowed = usable;
  }
  if (const Json* v = Parser::find(doc, "mems_allowed")) {
    GPUAFF_TRY(t.mems_allowed, p.cpus(*v, "mems_allowed"));
  }
  return {};
}

inline Result<void> parse_packages(const Parser& p, const Json& doc, Topology& t) {
  auto package = [&](const Json& o, const std::string& path, std::size_t /*position*/) -> Result<void> {
    Package pk;
    GPUAFF_TRY(const Json* id, p.require(o, path, "id"));
    GPUAFF_TRY(long long idv, p.integer(*id, Parser::join(path, "id"), -1, std::numeric_limits<int>::max()));
    pk.id = static_cast<int>(idv);
    GPUAFF_TRY(const Json* c, p.require(o, path, "cpus"));
    GPUAFF_TRY(pk.cpus, p.cpus(*c, Parser::join(path, "cpus")));
    t.packages.push_back(pk);
    return {};
  };
  GPUAFF_TRY_VOID(p.each_object(doc, "packages", false, package));
  std::stable_sort(t.packages.begin(), t.packages.end(), [](const Package& a, const Package& b) { return a.id < b.id; });
  return {};
}

/// numa_nodes: kept in the file's order, which must be by id, because
/// distances are listed in that order.
inline Result<void> parse_nodes(const Parser& p, const Json& doc, Topology& t) {
  auto node = [&](const Json& o, const std::string& path, std::size_t /*position*/) -> Result<void> {
    NumaNode n;
    GPUAFF_TRY(const Json* id, p.require(o, path, "id"));
    GPUAFF_TRY(long long idv, p.integer(*id, Parser::join(path, "id"), 0, CpuSet::capacity - 1));
    n.id = static_cast<int>(idv);
    if (!t.nodes.empty() && n.id <= t.nodes.back().id)
      return p.bad(Errc::parse_error, Parser::join(path, "id"), "node ", n.id,
                   " is listed after node ", t.nodes.back().id, "; numa_nodes must be sorted by id without repeats");
    GPUAFF_TRY(const Json* c, p.require(o, path, "cpus"));
    GPUAFF_TRY(n.cpus, p.cpus(*c, Parser::join(path, "cpus")));
    GPUAFF_TRY(const Json* d, p.array(o, path, "distances", false));
    if (d != nullptr) {
      for (std::size_t k = 0; k < d->size(); ++k) {
        GPUAFF_TRY(long long dv, p.integer((*d)[k], Parser::at(Parser::join(path, "distances"), k), 0, 255));
        n.distances.push_back(static_cast<int>(dv));
      }
    }
    t.nodes.push_back(std::move(n));
    return {};
  };
  GPUAFF_TRY_VOID(p.each_object(doc, "numa_nodes", true, node));
  if (auto o = find_node_overlap(t.nodes))
    return p.bad(Errc::parse_error, Parser::join(Parser::at("numa_nodes", o->second), "cpus"), "and ",
                 Parser::join(Parser::at("numa_nodes", o->first), "cpus"), ": ", node_overlap_text(t.nodes, *o));
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const auto& n = t.nodes[i];
    if (!n.distances.empty() && n.distances.size() != t.nodes.size())
      return p.bad(Errc::parse_error, Parser::join(Parser::at("numa_nodes", i), "distances"), "has ",
                   n.distances.size(), " entries but there are ", t.nodes.size(),
                   " nodes; give one distance per node, in numa_nodes order, or none");
  }
  return {};
}

/// cores, with their packages (core_packages, else the package that holds them).
inline Result<void> parse_cores(const Parser& p, const Json& doc, Topology& t) {
  const std::string top;
  GPUAFF_TRY(const Json* cores, p.array(doc, top, "cores", false));
  GPUAFF_TRY(const Json* core_packages, p.array(doc, top, "core_packages", false));
  if (core_packages != nullptr && (cores == nullptr || core_packages->size() != cores->size()))
    return p.bad(Errc::parse_error, "core_packages", "has ", core_packages->size(), " entries but cores has ",
                 cores == nullptr ? 0 : cores->size(), "; give one package id per core");
  if (cores != nullptr) {
    for (std::size_t i = 0; i < cores->size(); ++i) {
      std::string path = Parser::at("cores", i);
      Core c;
      GPUAFF_TRY(c.threads, p.cpus((*cores)[i], path));
      if (c.threads.empty()) return p.bad(Errc::parse_error, path, "a core needs at least one CPU");
      if (core_packages != nullptr) {
        GPUAFF_TRY(long long pk, p.integer((*core_packages)[i], Parser::at("core_packages", i), -1,
                                           std::numeric_limits<int>::max()));
        c.package = static_cast<int>(pk);
      } else if (const Package* pk = t.package_of_cpu(c.first())) {
        c.package = pk->id;
      }
      t.cores.push_back(c);
    }
    std::stable_sort(t.cores.begin(), t.cores.end(), [](const Core& a, const Core& b) { return a.first() < b.first(); });
  }
  return {};
}

inline Result<void> parse_core_complexes(const Parser& p, const Json& doc, Topology& t) {
  auto group = [&](const Json& o, const std::string& path, std::size_t /*position*/) -> Result<void> {
    CacheGroup g;
    GPUAFF_TRY(const Json* level, p.require(o, path, "level"));
    GPUAFF_TRY(long long lv, p.integer(*level, Parser::join(path, "level"), 0, 16));
    g.level = static_cast<int>(lv);
    GPUAFF_TRY(const Json* c, p.require(o, path, "cpus"));
    GPUAFF_TRY(g.cpus, p.cpus(*c, Parser::join(path, "cpus")));
    t.core_complexes.push_back(g);
    return {};
  };
  GPUAFF_TRY_VOID(p.each_object(doc, "core_complexes", false, group));
  std::stable_sort(t.core_complexes.begin(), t.core_complexes.end(),
                   [](const CacheGroup& a, const CacheGroup& b) { return a.cpus.first() < b.cpus.first(); });
  return {};
}

/// One pci_devices entry.
inline Result<PciDevice> parse_pci_device(const Parser& p, const Json& o, const std::string& path) {
  PciDevice d;
  GPUAFF_TRY(const Json* bdf, p.require(o, path, "bdf"));
  GPUAFF_TRY_VOID(p.expect(*bdf, Parser::join(path, "bdf"), Json::value_t::string, "a PCI address string"));
  auto addr = PciAddress::parse(bdf->get_ref<const std::string&>());
  if (!addr) return p.bad(Errc::parse_error, Parser::join(path, "bdf"), addr.error().message());
  d.address = *addr;
  GPUAFF_TRY(const Json* cls, p.require(o, path, "class"));
  GPUAFF_TRY(long long clsv, p.hex(*cls, Parser::join(path, "class"), 0xffffff));
  d.class_code = static_cast<std::uint32_t>(clsv);
  GPUAFF_TRY(const Json* vendor, p.require(o, path, "vendor"));
  GPUAFF_TRY(long long vv, p.hex(*vendor, Parser::join(path, "vendor"), 0xffff));
  d.vendor = static_cast<std::uint16_t>(vv);
  if (const Json* dev = Parser::find(o, "device")) {
    GPUAFF_TRY(long long dv, p.hex(*dev, Parser::join(path, "device"), 0xffff));
    d.device = static_cast<std::uint16_t>(dv);
  }
  if (const Json* node = Parser::find(o, "numa_node")) {
    GPUAFF_TRY(long long nv, p.integer(*node, Parser::join(path, "numa_node"), -1, CpuSet::capacity - 1));
    d.numa_node = static_cast<int>(nv);
  }
  const Json* local = Parser::find(o, "local_cpus");
  if (local != nullptr) {
    GPUAFF_TRY(d.local_cpus, p.cpus(*local, Parser::join(path, "local_cpus")));
  }
  d.has_local_cpus = local != nullptr;
  if (const Json* has = Parser::find(o, "has_local_cpus")) {
    GPUAFF_TRY_VOID(p.expect(*has, Parser::join(path, "has_local_cpus"), Json::value_t::boolean, "true or false"));
    d.has_local_cpus = has->get<bool>();
  }
  if (const Json* mode = Parser::find(o, "compute_partition")) {  // AMD: the GPUs HIP makes of it
    std::string at = Parser::join(path, "compute_partition");
    GPUAFF_TRY_VOID(p.expect(*mode, at, Json::value_t::string, "SPX, DPX, TPX, QPX or CPX"));
    d.compute_partitions = compute_partition_count(mode->get_ref<const std::string&>());
    if (d.compute_partitions == 0) return p.bad(Errc::parse_error, at, "is not SPX, DPX, TPX, QPX or CPX");
  }
  return d;
}

inline Result<void> parse_pci_devices(const Parser& p, const Json& doc, Topology& t) {
  auto device = [&](const Json& o, const std::string& path, std::size_t /*position*/) -> Result<void> {
    GPUAFF_TRY(PciDevice d, parse_pci_device(p, o, path));
    t.pci_devices.push_back(d);
    return {};
  };
  GPUAFF_TRY_VOID(p.each_object(doc, "pci_devices", false, device));
  std::vector<PciAddress> addresses;
  for (const auto& d : t.pci_devices) addresses.push_back(d.address);
  if (auto dup = find_duplicate_address(addresses))
    return p.bad(Errc::parse_error, Parser::join(Parser::at("pci_devices", dup->second), "bdf"), "device ",
                 addresses[dup->second].to_string(), " is listed twice (also at ",
                 Parser::join(Parser::at("pci_devices", dup->first), "bdf"), ")");
  std::stable_sort(t.pci_devices.begin(), t.pci_devices.end(),
                   [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
  return {};
}

/// One gpus entry, at position `i`: it names a PCI device, which supplies its locality.
inline Result<Gpu> parse_gpu(const Parser& p, const Json& o, const std::string& path, std::size_t i, const Topology& t) {
  Gpu g;
  g.index = static_cast<int>(i);
  if (const Json* idx = Parser::find(o, "index")) {
    GPUAFF_TRY(long long iv, p.integer(*idx, Parser::join(path, "index"), 0, std::numeric_limits<int>::max()));
    if (iv != static_cast<long long>(i))
      return p.bad(Errc::parse_error, Parser::join(path, "index"), "index ", iv, " at position ", i,
                   "; gpus must be listed by index 0, 1, 2, ...");
  }
  GPUAFF_TRY(const Json* bdf, p.require(o, path, "bdf"));
  GPUAFF_TRY_VOID(p.expect(*bdf, Parser::join(path, "bdf"), Json::value_t::string, "a PCI address string"));
  auto addr = PciAddress::parse(bdf->get_ref<const std::string&>());
  if (!addr) return p.bad(Errc::parse_error, Parser::join(path, "bdf"), addr.error().message());
  const PciDevice* d = t.find_pci(*addr);
  if (d == nullptr)
    return p.bad(Errc::parse_error, Parser::join(path, "bdf"), "GPU ", addr->to_string(),
                 " is not among pci_devices; add a pci_devices entry for it");
  g.pci = *d;
  // "partition": {"index": k, "of": n}: one of the n GPUs HIP makes of a
  // partitioned AMD device (contract section 6); n is the device's mode.
  if (const Json* part = Parser::find(o, "partition")) {
    std::string at = Parser::join(path, "partition");
    GPUAFF_TRY_VOID(p.expect(*part, at, Json::value_t::object, "an object {\"index\": k, \"of\": n}"));
    GPUAFF_TRY(const Json* of, p.require(*part, at, "of"));
    GPUAFF_TRY(long long n, p.integer(*of, Parser::join(at, "of"), 1, 8));
    if (n != d->compute_partitions)
      return p.bad(Errc::parse_error, Parser::join(at, "of"), n, " partitions, and the pci_devices entry of ",
                   addr->to_string(), " says ", d->compute_partitions, " (compute_partition); change both");
    GPUAFF_TRY(const Json* k, p.require(*part, at, "index"));
    GPUAFF_TRY(long long kv, p.integer(*k, Parser::join(at, "index"), 0, n - 1));
    g.partition = static_cast<int>(kv);
  }
  if (const Json* node = Parser::find(o, "numa_node")) {
    GPUAFF_TRY(long long nv, p.integer(*node, Parser::join(path, "numa_node"), -1, CpuSet::capacity - 1));
    if (nv != d->numa_node)
      return p.bad(Errc::parse_error, Parser::join(path, "numa_node"), "node ", nv,
                   " disagrees with the pci_devices entry of ", addr->to_string(), " (", d->numa_node,
                   "); change both");
  }
  if (const Json* uuid = Parser::find(o, "uuid")) {
    GPUAFF_TRY_VOID(p.expect(*uuid, Parser::join(path, "uuid"), Json::value_t::string, "a string"));
    const auto& u = uuid->get_ref<const std::string&>();
    if (u.size() > decltype(g.uuid)::capacity)
      return p.bad(Errc::out_of_range, Parser::join(path, "uuid"), "longer than ", decltype(g.uuid)::capacity,
                   " characters");
    g.uuid = std::string_view(u);
  }
  return g;
}

/// A list of names (strings of at most 64 characters) at obj[key]; absent: none.
inline Result<std::vector<FixedString<64>>> parse_names(const Parser& p, const Json& o, const std::string& path,
                                                        const char* key) {
  std::vector<FixedString<64>> out;
  GPUAFF_TRY(const Json* arr, p.array(o, path, key, false));
  if (arr == nullptr) return out;
  for (std::size_t i = 0; i < arr->size(); ++i) {
    std::string at = Parser::at(Parser::join(path, key), i);
    GPUAFF_TRY_VOID(p.expect((*arr)[i], at, Json::value_t::string, "a name string"));
    const auto& n = (*arr)[i].get_ref<const std::string&>();
    if (n.empty() || n.size() > FixedString<64>::capacity)
      return p.bad(Errc::out_of_range, at, "a name must have 1 to ", FixedString<64>::capacity, " characters");
    // The names go into lists the libraries split on ',' ':' '^' (and into
    // `bind --format env`): only what the kernel gives an interface.
    if (!detail::interface_name_ok(n))
      return p.bad(Errc::parse_error, at, "a name holds letters, digits, '_', '.' and '-' only, as the kernel gives them");
    out.emplace_back(std::string_view(n));
  }
  return out;
}

/// obj["bdf"]: a required PCI address string.
inline Result<PciAddress> parse_bdf(const Parser& p, const Json& o, const std::string& path) {
  GPUAFF_TRY(const Json* bdf, p.require(o, path, "bdf"));
  GPUAFF_TRY_VOID(p.expect(*bdf, Parser::join(path, "bdf"), Json::value_t::string, "a PCI address string"));
  auto addr = PciAddress::parse(bdf->get_ref<const std::string&>());
  if (!addr) return p.bad(Errc::parse_error, Parser::join(path, "bdf"), addr.error().message());
  return *addr;
}

/// The top-level "nics" list: network devices and their names.
inline Result<void> parse_nics(const Parser& p, const Json& doc, Topology& t) {
  auto nic = [&](const Json& o, const std::string& path, std::size_t /*position*/) -> Result<void> {
    Nic n;
    GPUAFF_TRY(n.address, parse_bdf(p, o, path));
    if (t.find_nic(n.address) != nullptr)
      return p.bad(Errc::parse_error, Parser::join(path, "bdf"), "NIC ", n.address.to_string(), " is listed twice");
    if (const Json* node = Parser::find(o, "numa_node")) {
      GPUAFF_TRY(long long nv, p.integer(*node, Parser::join(path, "numa_node"), -1, CpuSet::capacity - 1));
      n.numa_node = static_cast<int>(nv);
    }
    GPUAFF_TRY(auto names, parse_names(p, o, path, "names"));
    GPUAFF_TRY(n.rdma_names, parse_names(p, o, path, "rdma"));
    for (const auto& r : n.rdma_names)
      if (std::find(names.begin(), names.end(), r) == names.end())
        return p.bad(Errc::parse_error, Parser::join(path, "rdma"), "'", r.view(), "' is not among \"names\"");
    GPUAFF_TRY(n.cxi_names, parse_names(p, o, path, "cxi"));
    for (const auto& c : n.cxi_names)
      if (std::find(names.begin(), names.end(), c) == names.end())
        return p.bad(Errc::parse_error, Parser::join(path, "cxi"), "'", c.view(), "' is not among \"names\"");
    for (const auto& name : names)
      if (std::find(n.rdma_names.begin(), n.rdma_names.end(), name) == n.rdma_names.end() &&
          std::find(n.cxi_names.begin(), n.cxi_names.end(), name) == n.cxi_names.end())
        n.net_names.push_back(name);
    if (const Json* port = Parser::find(o, "rdma_port")) {
      GPUAFF_TRY(long long pv, p.integer(*port, Parser::join(path, "rdma_port"), 1, 255));
      n.rdma_port = static_cast<int>(pv);
    }
    t.nics.push_back(std::move(n));
    return {};
  };
  GPUAFF_TRY_VOID(p.each_object(doc, "nics", false, nic));
  std::stable_sort(t.nics.begin(), t.nics.end(), [](const Nic& a, const Nic& b) { return a.address < b.address; });
  return {};
}

/// A gpus entry's "nics" (each naming a top-level NIC) and "memory_nodes".
inline Result<void> parse_gpu_near(const Parser& p, const Json& o, const std::string& path, const Topology& t,
                                   Gpu& g) {
  GPUAFF_TRY(const Json* nics, p.array(o, path, "nics", false));
  for (std::size_t i = 0; nics != nullptr && i < nics->size(); ++i) {
    std::string at = Parser::at(Parser::join(path, "nics"), i);
    const Json& e = (*nics)[i];
    GPUAFF_TRY_VOID(p.expect(e, at, Json::value_t::object, "an object"));
    GPUAFF_TRY(PciAddress addr, parse_bdf(p, e, at));
    if (t.find_nic(addr) == nullptr)
      return p.bad(Errc::parse_error, Parser::join(at, "bdf"), "NIC ", addr.to_string(),
                   " is not among the top-level nics; add it there");
    GPUAFF_TRY(const Json* path_v, p.require(e, at, "path"));
    GPUAFF_TRY_VOID(p.expect(*path_v, Parser::join(at, "path"), Json::value_t::string, "a path class string"));
    const auto& word = path_v->get_ref<const std::string&>();
    auto k = std::find(std::begin(pci_path_names), std::end(pci_path_names), std::string_view(word));
    if (k == std::end(pci_path_names))
      return p.bad(Errc::parse_error, Parser::join(at, "path"), "unknown path class '", std::string_view(word).substr(0, 16),
                   "' (expected PIX, PXB, PHB, NODE or SYS)");
    g.nics.push_back(NicPath{addr, static_cast<PciPath>(k - std::begin(pci_path_names))});
  }
  std::stable_sort(g.nics.begin(), g.nics.end(), [](const NicPath& a, const NicPath& b) { return a.path < b.path; });
  GPUAFF_TRY(const Json* mem, p.array(o, path, "memory_nodes", false));
  for (std::size_t i = 0; mem != nullptr && i < mem->size(); ++i) {
    std::string at = Parser::at(Parser::join(path, "memory_nodes"), i);
    GPUAFF_TRY(long long id, p.integer((*mem)[i], at, 0, CpuSet::capacity - 1));
    if (t.find_node(static_cast<int>(id)) == nullptr)
      return p.bad(Errc::parse_error, at, "node ", id, " is not among numa_nodes");
    g.memory_nodes.push_back(static_cast<int>(id));
  }
  return {};
}

inline Result<void> parse_gpus(const Parser& p, const Json& doc, Topology& t) {
  // A partitioned device's GPUs are listed one by one with "partition"; a
  // file written before that lists the device once, and its partitions come
  // from pci_devices' compute_partition.
  std::vector<bool> one_by_one;
  auto gpu = [&](const Json& o, const std::string& path, std::size_t i) -> Result<void> {
    GPUAFF_TRY(Gpu g, parse_gpu(p, o, path, i, t));
    GPUAFF_TRY_VOID(parse_gpu_near(p, o, path, t, g));
    bool listed_part = Parser::find(o, "partition") != nullptr;
    for (std::size_t k = 0; k < t.gpus.size(); ++k)
      if (t.gpus[k].pci.address == g.pci.address && (!listed_part || !one_by_one[k] || t.gpus[k].partition == g.partition))
        return p.bad(Errc::parse_error, Parser::join(path, "bdf"), "GPU ", g.pci.address.to_string(),
                     listed_part ? std::string(" partition ") + std::to_string(g.partition) : std::string(),
                     " is listed twice");
    t.gpus.push_back(g);
    one_by_one.push_back(listed_part);
    return {};
  };
  GPUAFF_TRY_VOID(p.each_object(doc, "gpus", false, gpu));
  std::vector<Gpu> all;
  for (std::size_t k = 0; k < t.gpus.size(); ++k) {
    if (one_by_one[k]) {
      all.push_back(t.gpus[k]);
    } else {
      for (Gpu& part : expand_partitions({t.gpus[k]})) all.push_back(std::move(part));
    }
  }
  for (std::size_t k = 0; k < all.size(); ++k) all[k].index = static_cast<int>(k);
  t.gpus = std::move(all);
  return {};
}

/// hidden_gpus: the GPU-class pci_devices entries that are not the process's,
/// each a PCI address string or an object {"bdf", "nics", "memory_nodes"} (what
/// is near it, as in "gpus"); `near` gets each one's nics and memory nodes.
inline Result<void> parse_hidden_gpus(const Parser& p, const Json& doc, Topology& t, std::vector<Gpu>& near) {
  GPUAFF_TRY(const Json* arr, p.array(doc, "", "hidden_gpus", false));
  if (arr == nullptr) return {};
  for (std::size_t i = 0; i < arr->size(); ++i) {
    std::string path = p.at("hidden_gpus", i);
    const Json& e = (*arr)[i];
    Gpu g;
    if (e.is_object()) {
      GPUAFF_TRY(g.pci.address, parse_bdf(p, e, path));
      GPUAFF_TRY_VOID(parse_gpu_near(p, e, path, t, g));
    } else {
      GPUAFF_TRY_VOID(p.expect(e, path, Json::value_t::string, "a PCI address string or an object with \"bdf\""));
      auto addr = PciAddress::parse(e.get_ref<const std::string&>());
      if (!addr) return p.bad(Errc::parse_error, path, addr.error().message());
      g.pci.address = *addr;
    }
    const PciDevice* d = t.find_pci(g.pci.address);
    if (d == nullptr || !d->is_gpu())
      return p.bad(Errc::parse_error, path, g.pci.address.to_string(),
                   " is not a GPU among pci_devices; list only GPUs there");
    t.hidden_gpus.push_back(g.pci.address);
    near.push_back(std::move(g));
  }
  return {};
}

/// notes: an array of one-line strings.
inline Result<void> parse_notes(const Parser& p, const Json& doc, Topology& t) {
  GPUAFF_TRY(const Json* notes, p.array(doc, "", "notes", false));
  if (notes == nullptr) return {};
  for (std::size_t i = 0; i < notes->size(); ++i) {
    GPUAFF_TRY_VOID(p.expect((*notes)[i], Parser::at("notes", i), Json::value_t::string, "a string"));
    t.notes.push_back((*notes)[i].get<std::string>());
  }
  return {};
}

/// Every GPU the document knows: each GPU-class pci_devices entry and each
/// device a "gpus" entry names, in bus order, with the UUIDs of "gpus"
/// (Topology::host_gpus); what is near a hidden one comes from `hidden`.
inline std::vector<Gpu> host_gpus_of(const Topology& t, const std::vector<Gpu>& hidden) {
  std::vector<Gpu> all;
  for (const auto& d : t.pci_devices) {
    const Gpu* listed = nullptr;
    for (const auto* list : {&t.gpus, &hidden})
      for (const auto& g : *list)
        if (g.pci.address == d.address) listed = &g;
    if (!d.is_gpu() && listed == nullptr) continue;
    Gpu g;
    g.index = static_cast<int>(all.size());
    g.pci = d;
    if (listed != nullptr) {
      g.uuid = listed->uuid;
      g.nics = listed->nics;
      g.memory_nodes = listed->memory_nodes;
    }
    all.push_back(g);
  }
  // One runtime's GPUs, as the document numbers them: its listed GPUs' vendor.
  const std::vector<Gpu>& named = !t.gpus.empty() ? t.gpus : hidden;
  std::uint16_t vendor = !named.empty() ? named.front().pci.vendor : numbered_vendor(all, GpuVendor::automatic);
  return expand_partitions(runtime_gpus(std::move(all), vendor));
}

inline Result<Topology> parse(const Json& doc, std::string_view origin) {
  Parser p(origin);
  GPUAFF_TRY_VOID(p.expect(doc, "", Json::value_t::object, "a JSON object (as gpuaff topo writes in JSON)"));
  Topology t;
  t.origin = origin;
  GPUAFF_TRY_VOID(parse_cpu_sets(p, doc, t));
  GPUAFF_TRY_VOID(parse_packages(p, doc, t));
  GPUAFF_TRY_VOID(parse_nodes(p, doc, t));
  GPUAFF_TRY_VOID(parse_cores(p, doc, t));
  GPUAFF_TRY_VOID(parse_core_complexes(p, doc, t));
  GPUAFF_TRY_VOID(parse_pci_devices(p, doc, t));
  GPUAFF_TRY_VOID(parse_nics(p, doc, t));
  GPUAFF_TRY_VOID(parse_gpus(p, doc, t));
  std::vector<Gpu> hidden;
  GPUAFF_TRY_VOID(parse_hidden_gpus(p, doc, t, hidden));
  t.host_gpus = host_gpus_of(t, hidden);
  GPUAFF_TRY_VOID(parse_notes(p, doc, t));
  return t;
}

// The parts of a document, in the order to_json() writes them.

/// A NIC's "names": its RDMA names first, then its CXI names, then its interfaces.
inline OrderedJson nic_names_json(const Nic& n) {
  OrderedJson a = OrderedJson::array();
  for (const auto& x : n.rdma_names) a.push_back(std::string(x.view()));
  for (const auto& x : n.cxi_names) a.push_back(std::string(x.view()));
  for (const auto& x : n.net_names) a.push_back(std::string(x.view()));
  return a;
}

inline OrderedJson packages_json(const Topology& t) {
  OrderedJson packages = OrderedJson::array();
  for (const auto& p : t.packages) packages.push_back(OrderedJson{{"id", p.id}, {"cpus", p.cpus.to_list()}});
  return packages;
}

/// numa_nodes: each with its distances, in the order of the nodes.
inline OrderedJson nodes_json(const Topology& t) {
  OrderedJson nodes = OrderedJson::array();
  for (const auto& n : t.nodes) {
    OrderedJson d = OrderedJson::array();
    for (int x : n.distances) d.push_back(x);
    nodes.push_back(OrderedJson{{"id", n.id}, {"cpus", n.cpus.to_list()}, {"distances", std::move(d)}});
  }
  return nodes;
}

/// cores: each core's threads; core_packages (below) holds their packages.
inline OrderedJson cores_json(const Topology& t) {
  OrderedJson cores = OrderedJson::array();
  for (const auto& c : t.cores) cores.push_back(c.threads.to_list());
  return cores;
}

inline OrderedJson core_packages_json(const Topology& t) {
  OrderedJson core_packages = OrderedJson::array();
  for (const auto& c : t.cores) core_packages.push_back(c.package);
  return core_packages;
}

inline OrderedJson core_complexes_json(const Topology& t) {
  OrderedJson ccx = OrderedJson::array();
  for (const auto& g : t.core_complexes) ccx.push_back(OrderedJson{{"level", g.level}, {"cpus", g.cpus.to_list()}});
  return ccx;
}

/// pci_devices: a partitioned AMD device also gives its compute partition
/// mode, from which the reader makes its GPUs again.
inline OrderedJson pci_devices_json(const Topology& t) {
  OrderedJson pci = OrderedJson::array();
  for (const auto& d : t.pci_devices) {
    OrderedJson o;
    o["bdf"] = std::string(d.address.to_string().view());
    o["class"] = hex_text(d.class_code, 6);
    o["vendor"] = hex_text(d.vendor, 4);
    o["device"] = hex_text(d.device, 4);
    o["numa_node"] = d.numa_node;
    o["local_cpus"] = d.local_cpus.to_list();
    o["has_local_cpus"] = d.has_local_cpus;
    constexpr std::string_view modes[] = {"", "SPX", "DPX", "TPX", "QPX", "", "", "", "CPX"};
    if (d.compute_partitions > 1 && d.compute_partitions <= 8)
      o["compute_partition"] = std::string(modes[static_cast<std::size_t>(d.compute_partitions)]);
    pci.push_back(std::move(o));
  }
  return pci;
}

/// A GPU's "nics" (nearest first) and "memory_nodes", for "gpus" and "hidden_gpus".
inline void add_gpu_near(OrderedJson& o, const Topology& t, const Gpu& g) {
  OrderedJson near = OrderedJson::array();
  for (const auto& np : g.nics) {
    const Nic* n = t.find_nic(np.nic);
    near.push_back(OrderedJson{{"bdf", std::string(np.nic.to_string().view())},
                               {"names", n != nullptr ? nic_names_json(*n) : OrderedJson::array()},
                               {"path", std::string(to_string(np.path))}});
  }
  o["nics"] = std::move(near);
  o["memory_nodes"] = g.memory_nodes;
}

inline OrderedJson gpus_json(const Topology& t) {
  OrderedJson gpus = OrderedJson::array();
  for (const auto& g : t.gpus) {
    // Every GPU as bind numbers it; a partition of an AMD device says which (contract section 6).
    OrderedJson o;
    o["index"] = gpus.size();
    o["bdf"] = std::string(g.pci.address.to_string().view());
    if (g.pci.compute_partitions > 1) o["partition"] = OrderedJson{{"index", g.partition}, {"of", g.pci.compute_partitions}};
    o["uuid"] = std::string(g.uuid.view());
    o["numa_node"] = g.pci.numa_node;
    add_gpu_near(o, t, g);
    gpus.push_back(std::move(o));
  }
  return gpus;
}

inline OrderedJson nics_json(const Topology& t) {
  OrderedJson nics = OrderedJson::array();
  for (const auto& n : t.nics) {
    OrderedJson rdma = OrderedJson::array();
    for (const auto& r : n.rdma_names) rdma.push_back(std::string(r.view()));
    OrderedJson o{{"bdf", std::string(n.address.to_string().view())},
                  {"names", nic_names_json(n)},
                  {"numa_node", n.numa_node},
                  {"rdma", std::move(rdma)},
                  {"rdma_port", n.rdma_port}};
    if (n.cxi()) {
      OrderedJson cxi = OrderedJson::array();
      for (const auto& c : n.cxi_names) cxi.push_back(std::string(c.view()));
      o["cxi"] = std::move(cxi);
    }
    nics.push_back(std::move(o));
  }
  return nics;
}

/// hidden_gpus: each hidden GPU's address and what is near it (from host_gpus).
inline OrderedJson hidden_gpus_json(const Topology& t) {
  OrderedJson hidden = OrderedJson::array();
  for (const auto& a : t.hidden_gpus) {
    OrderedJson o;
    o["bdf"] = std::string(a.to_string().view());
    for (const auto& g : t.host_gpus)
      if (g.pci.address == a) add_gpu_near(o, t, g);
    hidden.push_back(std::move(o));
  }
  return hidden;
}

}  // namespace detail::json

inline std::string to_json(const Topology& t, int indent) {
  using namespace detail::json;
  OrderedJson j;
  j["format_version"] = json_format_version;
  j["root"] = std::string(t.origin.view());
  j["allowed_cpus"] = t.allowed.to_list();
  if (!t.recorded_allowed.empty()) j["recorded_allowed_cpus"] = t.recorded_allowed.to_list();
  j["online_cpus"] = t.online.to_list();
  j["mems_allowed"] = t.mems_allowed.to_list();
  j["packages"] = packages_json(t);
  j["numa_nodes"] = nodes_json(t);
  j["cores"] = cores_json(t);
  j["core_packages"] = core_packages_json(t);
  j["core_complexes"] = core_complexes_json(t);
  j["pci_devices"] = pci_devices_json(t);
  j["gpus"] = gpus_json(t);
  j["nics"] = nics_json(t);
  if (!t.hidden_gpus.empty()) j["hidden_gpus"] = hidden_gpus_json(t);
  OrderedJson notes = OrderedJson::array();
  for (const auto& n : t.notes) notes.push_back(n);
  j["notes"] = std::move(notes);
  // Replace invalid UTF-8 (an origin path may hold any bytes) instead of throwing.
  return j.dump(indent < 0 ? -1 : indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline Result<Topology> topology_from_json(std::string_view text, std::string_view origin) {
  detail::json::Json doc;
  try {
    doc = detail::json::Json::parse(text.begin(), text.end());
  } catch (const detail::json::Json::exception& e) {
    // nlohmann's what() is "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string_view what = e.what();
    if (auto k = what.find("] "); k != std::string_view::npos) what.remove_prefix(k + 2);
    return fail(Errc::parse_error, "topology JSON '", origin, "' is not valid JSON: ", what,
                "; write it with gpuaff topo in JSON");
  }
  return detail::json::parse(doc, origin);
}

inline Result<Topology> JsonSource::load() {
  std::string text;
  if (int e = detail::read_whole_file(options_.path, text); e != 0) {
    return Unexpected<Error>(make_sys_error(Errc::io_error, e, "cannot read topology JSON '", options_.path, "': ",
                                            detail::errno_text(e),
                                            "; write one with gpuaff topo (its JSON format) and name that file"));
  }
  GPUAFF_TRY(Topology t, topology_from_json(text, options_.path));

  // The process's GPUs: every GPU the file knows (host_gpus) but the hidden ones.
  std::vector<Gpu> mine;
  for (const auto& g : t.host_gpus)
    if (std::find(t.hidden_gpus.begin(), t.hidden_gpus.end(), g.pci.address) == t.hidden_gpus.end()) mine.push_back(g);
  GPUAFF_TRY(auto visible, select_visible_gpus(std::move(mine), options_.visible.with_environment()));
  for (std::size_t i = 0; i < visible.size(); ++i) visible[i].index = static_cast<int>(i);
  t.gpus = std::move(visible);
  return t;
}

/// Reads a JSON topology file with every GPU visible: the JSON reader of the
/// front door (Readers::json, source/load.hpp).
inline Result<Topology> read_json_topology(const std::string& path) {
  return JsonSource(JsonSource::Options{.path = path, .visible = VisibleDevices{.list = std::nullopt, .use_environment = false}})
      .load();
}

}  // namespace v0
}  // namespace gpuaff
