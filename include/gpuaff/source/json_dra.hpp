// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reads the Kubernetes DRA device metadata (KEP-5304) a kubelet mounts in a
// container (docs/contract.md section 7). Needs nlohmann_json (target
// gpuaff::json), as source/json.hpp does.
//
// Layout, as the Kubernetes docs give it (kubernetes/website#54716):
//   DIR/resourceclaims/<claim>/<request>/<driver>-metadata.json
//   DIR/resourceclaimtemplates/<podClaim>/<request>/<driver>-metadata.json
// Each file holds one or more JSON objects one after the other, each the same
// DeviceMetadata in another API version; a reader takes the first it knows
// (metadata.resource.k8s.io/v1alpha1). Its requests[].devices[] carry
// `driver` and `attributes`, each attribute a typed value ({"string": ..},
// {"int": ..}, {"bool": ..}, {"version": ..}); a name without a domain is in
// the driver's domain, as in a ResourceSlice.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuaff/result.hpp"
#include "gpuaff/source/dra.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

inline constexpr const char* dra_metadata_version = "metadata.resource.k8s.io/v1alpha1";

/// The integer of a typed attribute value ({"int": N}), or nullopt.
inline std::optional<long long> dra_int(const nlohmann::json& v) {
  if (!v.is_object() || !v.contains("int") || !v["int"].is_number_integer()) return std::nullopt;
  return v["int"].get<long long>();
}

/// Adds one DeviceMetadata object's devices to `out`.
/// Errors: Errc::parse_error naming `file` for a value of the wrong shape.
inline Result<void> add_dra_devices(const nlohmann::json& object, const std::string& file, DraClaims& out) {
  auto bad = [&](const std::string& what) { return fail(Errc::parse_error, "DRA device metadata ", file, ": ", what); };
  if (!object.contains("requests")) return {};
  if (!object["requests"].is_array()) return bad("requests is not a list");
  for (const auto& request : object["requests"]) {
    if (!request.is_object() || !request.contains("devices")) continue;
    if (!request["devices"].is_array()) return bad("a request's devices is not a list");
    for (const auto& device : request["devices"]) {
      if (!device.is_object()) return bad("a device is not an object");
      std::string driver = device.contains("driver") && device["driver"].is_string() ? device["driver"].get<std::string>() : "";
      if (!device.contains("attributes") || !device["attributes"].is_object()) continue;
      std::optional<long long> cpu, node, socket;
      for (const auto& [raw, value] : device["attributes"].items()) {
        std::string name = raw.find('/') == std::string::npos ? driver + "/" + raw : raw;
        if (name == "resource.kubernetes.io/pciBusID") {
          if (!value.is_object() || !value.contains("string") || !value["string"].is_string())
            return bad("resource.kubernetes.io/pciBusID is not a {\"string\": ...} value");
          auto a = PciAddress::parse(value["string"].get<std::string>());
          if (!a) return bad("resource.kubernetes.io/pciBusID '" + value["string"].get<std::string>().substr(0, 40) +
                             "' is not a PCI address");
          if (std::find(out.pci.begin(), out.pci.end(), *a) == out.pci.end()) out.pci.push_back(*a);
        } else if (name == "dra.cpu/cpuID") {
          cpu = dra_int(value);
          if (!cpu || *cpu < 0 || *cpu >= CpuSet::capacity) return bad("dra.cpu/cpuID is not a CPU id");
        } else if (name == "dra.cpu/numaNodeID") {
          node = dra_int(value);
        } else if (name == "dra.cpu/socketID") {
          socket = dra_int(value);
        }
      }
      // The CPU driver: a device with a cpuID is one CPU (individual mode);
      // else a group by NUMA node or by socket (grouped mode).
      if (cpu) {
        out.cpu_claim = true;
        out.cpus.set(static_cast<int>(*cpu));
      } else if (node && *node >= 0) {
        out.cpu_claim = true;
        out.cpu_nodes.push_back(static_cast<int>(*node));
      } else if (socket && *socket >= 0) {
        out.cpu_claim = true;
        out.cpu_sockets.push_back(static_cast<int>(*socket));
      }
    }
  }
  return {};
}

}  // namespace detail

/// The claims of every `*-metadata.json` under `dir` (up to four levels
/// down, as the kubelet lays them out). A directory that does not exist
/// claims nothing (`files` empty).
/// Errors: Errc::io_error (a file that cannot be read), Errc::parse_error (not
/// JSON, no object of a version this reader knows, a value of the wrong
/// shape), each naming the file.
inline Result<DraClaims> read_dra_metadata(const std::string& dir) {
  namespace fs = std::filesystem;
  DraClaims out;
  out.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  std::vector<fs::path> found;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) return fail(Errc::io_error, "cannot list the DRA device metadata directory ", dir, " (", ec.message(), ")");
  for (; it != end; it.increment(ec)) {
    if (ec) return fail(Errc::io_error, "cannot list the DRA device metadata directory ", dir, " (", ec.message(), ")");
    if (it.depth() > 3) it.disable_recursion_pending();
    std::string name = it->path().filename().string();
    if (it->is_regular_file(ec) && name.size() > 14 && name.ends_with("-metadata.json")) found.push_back(it->path());
  }
  std::sort(found.begin(), found.end());
  for (const fs::path& p : found) {
    std::string rel = fs::relative(p, dir, ec).string();
    std::ifstream in(p);
    if (!in) return fail(Errc::io_error, "cannot read the DRA device metadata ", p.string());
    std::stringstream text;
    text << in.rdbuf();
    std::string all = text.str();
    std::istringstream stream(all);
    bool used = false;
    std::vector<std::string> versions;
    while (!used) {
      stream >> std::ws;
      if (stream.peek() == std::char_traits<char>::eof()) break;
      nlohmann::json object;
      try {
        stream >> object;
      } catch (const nlohmann::json::exception& e) {
        return fail(Errc::parse_error, "DRA device metadata ", p.string(), " is not JSON (", e.what(), ")");
      }
      std::string version = object.is_object() && object.contains("apiVersion") && object["apiVersion"].is_string()
                                ? object["apiVersion"].get<std::string>()
                                : std::string("(none)");
      if (version != detail::dra_metadata_version) {
        versions.push_back(version.substr(0, 60));
        continue;
      }
      GPUAFF_TRY_VOID(detail::add_dra_devices(object, p.string(), out));
      used = true;
    }
    if (!used) {
      std::string seen;
      for (const auto& v : versions) seen += (seen.empty() ? "" : ", ") + v;
      return fail(Errc::parse_error, "DRA device metadata ", p.string(), " holds no object of version ",
                  detail::dra_metadata_version, " (found: ", seen.empty() ? std::string("none") : seen, ")");
    }
    out.files.push_back(rel);
  }
  return out;
}

}  // namespace v0
}  // namespace gpuaff
