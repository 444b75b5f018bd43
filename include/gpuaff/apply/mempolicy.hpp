// SPDX-License-Identifier: Apache-2.0
#pragma once
// The calling thread's NUMA memory policy, through raw set_mempolicy(2) and
// get_mempolicy(2) (no libnuma, no <numaif.h>).
//
// A memory policy belongs to one thread: the kernel offers no way to set it
// for another thread. Threads created afterwards and children made by fork or
// posix_spawn inherit it, and exec keeps it. In containers the calls may be
// refused (docker's default seccomp profile answers EPERM; some sandboxes
// ENOSYS or EINVAL); MemoryOptions::on_refused says whether that is an error
// or a warning with CPU-only binding.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// Where the memory a thread allocates comes from.
///
/// Naming: `first_touch` is the kernel's MPOL_LOCAL (numactl --localalloc):
/// each page on the node of the CPU that first touches it, spilling over
/// when that node is full. The command line's `--membind local` is a
/// different thing, `bind` over the GPU's node(s) (strict, like numactl
/// --membind), and parse_mem_policy reads "local" the same way.
enum class MemPolicy {
  none,         ///< leave the memory policy alone
  first_touch,  ///< the node of the CPU that first touches the page (MPOL_LOCAL, numactl --localalloc)
  bind,         ///< only the given nodes; allocation fails rather than spill over (numactl --membind)
  preferred,   ///< the first given node, falling back to others when it is full
  interleave,  ///< round-robin over the given nodes, page by page
};

/// What to do when the kernel refuses the memory policy (EPERM, ENOSYS, EINVAL).
enum class OnRefused {
  error,     ///< fail, changing nothing
  cpu_only,  ///< bind the CPUs anyway and record a warning
};

struct MemoryOptions {
  MemPolicy policy = MemPolicy::none;
  NodeSet nodes{};  ///< needed by bind, preferred and interleave; ignored by none and local
  OnRefused on_refused = OnRefused::error;
};

constexpr std::string_view to_string(MemPolicy p) {
  switch (p) {
    case MemPolicy::none: return "none";
    case MemPolicy::first_touch: return "first-touch";
    case MemPolicy::bind: return "bind";
    case MemPolicy::preferred: return "preferred";
    case MemPolicy::interleave: return "interleave";
  }
  return "unknown";
}

/// "none", "first-touch", "bind", "preferred" or "interleave"; "local" is
/// "bind" (the GPU's nodes only), as on the command line (`--membind local`).
/// Errors: Errc::invalid_argument naming the text and the accepted words.
constexpr Result<MemPolicy> parse_mem_policy(std::string_view s) {
  if (s == "local") return MemPolicy::bind;
  for (MemPolicy p : {MemPolicy::none, MemPolicy::first_touch, MemPolicy::bind, MemPolicy::preferred,
                      MemPolicy::interleave})
    if (s == to_string(p)) return p;
  return fail(Errc::invalid_argument, "unknown memory policy '", s.substr(0, 40),
              "' (expected none, first-touch, local, bind, preferred or interleave)");
}

/// A thread's memory policy as the kernel reports it, for saving and restoring.
/// `mode` is the kernel's value including mode flags, so modes gpuaff does not
/// name (preferred-many, weighted interleave) survive a save/restore.
struct SavedMemoryPolicy {
  int mode = 0;  ///< MPOL_DEFAULT
  NodeSet nodes{};
  friend bool operator==(const SavedMemoryPolicy&, const SavedMemoryPolicy&) = default;
};

namespace detail {

// The kernel's uapi values (linux/mempolicy.h), spelled out to avoid the header.
inline constexpr int mpol_default = 0;
inline constexpr int mpol_preferred = 1;
inline constexpr int mpol_bind = 2;
inline constexpr int mpol_interleave = 3;
inline constexpr int mpol_local = 4;

template <class = void>
int kernel_mode(MemPolicy p) {
  switch (p) {
    case MemPolicy::none: return -1;
    case MemPolicy::first_touch: return mpol_local;
    case MemPolicy::bind: return mpol_bind;
    case MemPolicy::preferred: return mpol_preferred;
    case MemPolicy::interleave: return mpol_interleave;
  }
  return -1;
}

/// EPERM/ENOSYS/EINVAL from the mempolicy calls: what OnRefused is about.
template <class = void>
bool is_refusal(const Error& e) {
  return e.sys_errno() == EPERM || e.sys_errno() == ENOSYS || e.sys_errno() == EINVAL;
}

template <class = void>
Error mempolicy_error(std::string_view what, int e) {
  Errc code = e == EPERM ? Errc::permission_denied : e == ENOSYS ? Errc::unsupported : Errc::system_error;
  std::string_view hint = e == EPERM   ? "; containers often forbid it (docker: --cap-add SYS_NICE or a seccomp profile "
                                         "allowing set_mempolicy), or allow CPU-only binding"
                          : e == ENOSYS ? "; this kernel or sandbox lacks NUMA memory policies; allow CPU-only binding"
                          : e == EINVAL ? "; the nodes may be outside Mems_allowed_list in /proc/self/status or have no "
                                          "memory"
                                        : "";
  return make_sys_error(code, e, what, " (", errno_text(e), ")", hint);
}

/// Validates options before anything is changed. Errors: Errc::invalid_argument.
template <class = void>
Result<void> check_memory_options(const MemoryOptions& o) {
  switch (o.policy) {
    case MemPolicy::none:
    case MemPolicy::first_touch: return {};
    case MemPolicy::bind:
    case MemPolicy::preferred:
    case MemPolicy::interleave:
      if (o.nodes.empty())
        return fail(Errc::invalid_argument, "memory policy ", to_string(o.policy),
                    " needs at least one NUMA node; none was given");
      return {};
  }
  return fail(Errc::invalid_argument, "unknown memory policy value ", static_cast<int>(o.policy));
}

}  // namespace detail

/// The calling thread's memory policy.
/// Errors: Errc::permission_denied (EPERM), Errc::unsupported (ENOSYS),
/// Errc::system_error (other errno; Error::sys_errno has it).
template <class = void>
Result<SavedMemoryPolicy> memory_policy() {
  detail::NodeMask m{};
  int mode = 0;
  if (detail::sys().get_mempolicy(&mode, m.data(), detail::nodemask_maxnode) != 0)
    return Unexpected(detail::mempolicy_error("cannot read the memory policy (get_mempolicy)", errno));
  return SavedMemoryPolicy{mode, detail::from_nodemask(m)};
}

/// Sets the calling thread's memory policy (MemPolicy::none does nothing).
/// `preferred` uses the lowest node of `nodes`.
/// Errors: Errc::invalid_argument (a policy that needs nodes got none),
/// Errc::permission_denied (EPERM), Errc::unsupported (ENOSYS),
/// Errc::system_error (EINVAL: nodes not allowed or without memory; others).
template <class = void>
Result<void> set_memory_policy(MemPolicy policy, const NodeSet& nodes = {}) {
  GPUAFF_TRY_VOID(detail::check_memory_options(MemoryOptions{.policy = policy, .nodes = nodes}));
  if (policy == MemPolicy::none) return {};
  if (policy == MemPolicy::first_touch) {
    if (detail::sys().set_mempolicy(detail::mpol_local, nullptr, 0) == 0) return {};
    int e = errno;
    // Kernels before 3.8 lack MPOL_LOCAL: "preferred, no node" means the same.
    if (e != EINVAL || detail::sys().set_mempolicy(detail::mpol_preferred, nullptr, 0) != 0)
      return Unexpected(detail::mempolicy_error("set_mempolicy(local) was refused", e));
    return {};
  }
  NodeSet use = policy == MemPolicy::preferred ? NodeSet::single(nodes.first()) : nodes;
  detail::NodeMask m = detail::to_nodemask(use);
  if (detail::sys().set_mempolicy(detail::kernel_mode(policy), m.data(), detail::nodemask_maxnode) != 0) {
    int e = errno;
    std::string what = std::string("set_mempolicy(") + std::string(to_string(policy)) + ", nodes " + use.to_list() + ") was refused";
    return Unexpected(detail::mempolicy_error(what, e));
  }
  return {};
}

/// Puts back a policy saved by memory_policy().
/// Errors: as set_memory_policy.
template <class = void>
Result<void> restore_memory_policy(const SavedMemoryPolicy& saved) {
  detail::NodeMask m = detail::to_nodemask(saved.nodes);
  bool no_mask = saved.nodes.empty();
  if (detail::sys().set_mempolicy(saved.mode, no_mask ? nullptr : m.data(), no_mask ? 0 : detail::nodemask_maxnode) != 0)
    return Unexpected(detail::mempolicy_error("cannot restore the previous memory policy (set_mempolicy)", errno));
  return {};
}

namespace detail {

/// The memory half of a binding: saves the old policy, sets the new one, and
/// applies OnRefused. `applied` tells whether there is something to restore.
struct MemoryChange {
  SavedMemoryPolicy saved{};
  bool applied = false;
};

template <class = void>
Result<MemoryChange> change_memory_policy(const MemoryOptions& o, std::vector<std::string>& warnings) {
  GPUAFF_TRY_VOID(check_memory_options(o));
  MemoryChange c;
  if (o.policy == MemPolicy::none) return c;
  auto refused = [&](const Error& e) -> Result<MemoryChange> {
    if (o.on_refused == OnRefused::cpu_only && is_refusal(e)) {
      warnings.push_back(std::string("memory policy ") + std::string(to_string(o.policy)) + " not applied, binding CPUs only: " +
                         std::string(e.message()));
      return c;
    }
    Error out = e;
    out.append("; nothing was changed");
    return Unexpected(out);
  };
  auto saved = memory_policy();
  if (!saved) return refused(saved.error());
  auto set = set_memory_policy(o.policy, o.nodes);
  if (!set) return refused(set.error());
  c.saved = *saved;
  c.applied = true;
  return c;
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
