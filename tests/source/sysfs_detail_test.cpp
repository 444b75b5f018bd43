// SPDX-License-Identifier: Apache-2.0
// SysfsDetail::binding must not change any binding: on every fixture tree, each
// policy for each GPU (and for a --pci NIC), the memory nodes and the resolved
// node are the same, errors included, as with SysfsDetail::full. The truth here
// is the full-detail load; what binding detail may leave out is listed in
// sysfs.hpp, and this test is what says the policies do not read it.
#include <gpuaff/policy/policy.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "support/check.hpp"

namespace {

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name[0] != '.') out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

/// The directories under fixtures/ laid out like `/`.
std::vector<std::string> fixture_trees() {
  std::vector<std::string> out;
  for (const auto& name : list(gpuaff_test::fixture(""))) {
    struct stat st {};
    if (::stat(gpuaff_test::fixture(name + "/sys").c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(name);
  }
  return out;
}

gpuaff::Topology load(const std::string& name, gpuaff::SysfsDetail detail, std::vector<gpuaff::PciAddress> extra = {}) {
  gpuaff::SysfsSource s(gpuaff::SysfsOptions{.root = gpuaff_test::fixture(name),
                                             .visible = {.use_environment = false},
                                             .extra_pci = std::move(extra),
                                             .detail = detail});
  auto t = s.load();
  REQUIRE_MESSAGE(t, name, ": ", t ? std::string() : std::string(t.error().message()));
  return *t;
}

template <class T>
std::string text(const gpuaff::Result<T>& r) {
  if (!r) return "error: " + std::string(r.error().message());
  if constexpr (std::is_same_v<T, int>) return std::to_string(*r);
  else return r->to_list();
}

/// Every answer a binding can give for GPU `gpu` of `t`, as text.
std::string answers(const gpuaff::Topology& t, int gpu) {
  std::string s;
  for (auto job : {gpuaff::JobOptions{}, gpuaff::JobOptions{.unknown_node = gpuaff::UnknownNode::node0}}) {
    for (gpuaff::PolicyKind k : gpuaff::all_policy_kinds)
      s += std::string(gpuaff::to_string(k)) + " " + text(gpuaff::bind(t, gpu, gpuaff::PolicySpec{.kind = k}, job)) + "\n";
    s += "memory " + text(gpuaff::memory_nodes(t, gpu, job)) + "\n";
    s += "node " + text(gpuaff::resolve_gpu_node(t, gpu, job)) + "\n";
  }
  return s;
}

}  // namespace

TEST_CASE("binding detail gives every fixture the same bindings as full detail") {
  auto trees = fixture_trees();
  CHECK(trees.size() >= 20);  // fixtures/ holds some 25 trees; an empty list would prove nothing
  for (const auto& name : trees) {
    CAPTURE(name);
    gpuaff::Topology full = load(name, gpuaff::SysfsDetail::full);
    gpuaff::Topology binding = load(name, gpuaff::SysfsDetail::binding);
    REQUIRE(full.gpus.size() == binding.gpus.size());
    for (int g = 0; g < static_cast<int>(full.gpus.size()); ++g) {
      CAPTURE(g);
      CHECK(answers(binding, g) == answers(full, g));
    }
    // Every PCI device that is not a GPU as a --pci target (NICs with a node and
    // without one, bridges, a BMC VGA), all read in one load per detail.
    std::vector<gpuaff::PciAddress> others;
    for (const auto& n : list(gpuaff_test::fixture(name) + "/sys/bus/pci/devices")) {
      auto a = gpuaff::PciAddress::parse(n);
      REQUIRE(a);
      bool gpu = std::any_of(full.gpus.begin(), full.gpus.end(), [&](const gpuaff::Gpu& x) { return x.address() == *a; });
      if (!gpu) others.push_back(*a);
    }
    gpuaff::Topology fx = load(name, gpuaff::SysfsDetail::full, others);
    gpuaff::Topology bx = load(name, gpuaff::SysfsDetail::binding, others);
    for (const auto& a : others) {
      CAPTURE(a.to_string().view());
      int fi = -1;
      int bi = -1;
      auto ft = gpuaff::with_pci_target(fx, a, &fi);
      auto bt = gpuaff::with_pci_target(bx, a, &bi);
      REQUIRE(ft);
      REQUIRE(bt);
      CHECK(answers(*bt, bi) == answers(*ft, fi));
    }
  }
}
