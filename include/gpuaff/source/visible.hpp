// SPDX-License-Identifier: Apache-2.0
#pragma once
// Which GPUs a job sees, and in which order (docs/contract.md section 2).
//
// The process's GPUs (the host's less those the container hides: the sources
// drop NVIDIA GPUs missing from proc/driver/nvidia/gpus/) are listed in PCI
// bus-id order. Then:
//   --visible-devices LIST (VisibleDevices::list) selects among ALL of them, every vendor;
//   otherwise CUDA_VISIBLE_DEVICES selects among the NVIDIA GPUs, and
//   ROCR_VISIBLE_DEVICES then HIP_VISIBLE_DEVICES among the AMD GPUs (ROCr filters
//   first, HIP indexes into what ROCr left, as the ROCm runtimes do). HIP reads
//   CUDA_VISIBLE_DEVICES in place of an unset HIP_VISIBLE_DEVICES; so does gpuaff
//   on a machine whose GPUs include AMD ones and no NVIDIA one. On a machine with
//   both vendors CUDA_VISIBLE_DEVICES applies to the NVIDIA GPUs only (one value
//   cannot index two vendors' lists; a HIP job there sets HIP_VISIBLE_DEVICES or
//   ROCR_VISIBLE_DEVICES).
//   A variable whose vendor has no GPU here is checked (a malformed value is
//   still an error) and then ignored, as that vendor's runtime is never loaded:
//   Slurm sets CUDA_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES for every GPU job.
// The visible GPUs get index = position. A vendor without a variable keeps its
// GPUs in bus order; a vendor with one has its bus-order slots refilled, in the
// variable's order, by the GPUs it selected (on a one-vendor machine: the
// variable's order, as CUDA and HIP number devices).
//
// Entry rules (a value is a comma-separated list; blanks around entries are ignored):
//   - "" (set but empty): no GPU of that vendor is visible (CUDA's behaviour).
//   - every entry a decimal integer: indices into that vendor's GPUs
//     (for --visible-devices: into all GPUs).
//   - otherwise every entry must be a UUID prefix: "GPU-..." matching exactly one
//     GPU's UUID (from proc/driver/nvidia/gpus/<bdf>/information). A MIG instance
//     means its parent GPU: "MIG-GPU-<uuid>/<gi>/<ci>" and "MIG-<uuid>/<gi>/<ci>"
//     name the parent "GPU-<uuid>". A bare "MIG-<uuid>" (the R470+ form) is the MIG
//     device's own UUID, which sysfs and the nvidia information file do not list:
//     it names the one NVIDIA GPU of the process when the process has exactly one
//     (a MIG container: the driver lists only the parent GPU), and is otherwise an
//     error telling the user to name the parent GPU with --visible-devices. Several
//     MIG instances of one GPU map to that GPU once each (they are distinct CUDA devices).
//   - CUDA treats the first invalid entry as the end of the list ("0,abc" = "0",
//     "-1" = none). That silently hides typos, so gpuaff rejects the whole value
//     with an error naming the variable and the entry instead.
//   - empty entries ("0,,1"), unknown or ambiguous UUID prefixes, duplicates (a
//     MIG instance listed twice too, however it is spelled), out-of-range indices
//     and MIG entries of neither form ("MIG-GPU-x/zz") are errors too.
//   - HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES take indices only: AMD UUIDs live
//     in the KFD topology (/sys/class/kfd), which gpuaff does not read, so a UUID
//     entry there is rejected rather than guessed.
// Intel GPUs have no variable here; they stay visible unless --visible-devices
// says otherwise.
//
// select_visible_gpus() is pure. Reading the environment is explicit:
// VisibleDevices::from_environment() or VisibleDevices::with_environment().

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// What decides GPU visibility. Sources call with_environment() when loading.
struct VisibleDevices {
  /// --visible-devices: when set, overrides every variable below; selects among all GPUs.
  std::optional<std::string> list{};
  /// with_environment() fills the unset variables below from the process environment.
  bool use_environment = true;
  std::optional<std::string> cuda_visible_devices{};  ///< value of CUDA_VISIBLE_DEVICES, if set
  std::optional<std::string> hip_visible_devices{};   ///< value of HIP_VISIBLE_DEVICES, if set
  std::optional<std::string> rocr_visible_devices{};  ///< value of ROCR_VISIBLE_DEVICES, if set
  /// CUDA_DEVICE_ORDER as the job has it: "" when the environment leaves it unset
  /// (CUDA's default, FASTEST_FIRST); nullopt: not known (nothing is checked).
  /// gpuaff numbers GPUs in PCI bus-id order, as CUDA does with PCI_BUS_ID
  /// (see device_order_warning()).
  std::optional<std::string> cuda_device_order{};

  /// The four variables as the process environment has them now (use_environment = true).
  static VisibleDevices from_environment() { return VisibleDevices{}.with_environment(); }
  /// Whether the list or a variable selects among the GPUs; if not, every
  /// GPU is visible, in bus order.
  bool selects() const { return list || cuda_visible_devices || hip_visible_devices || rocr_visible_devices; }

  /// A copy whose unset variables come from the environment when use_environment is
  /// true (a copy of *this otherwise). Variables set explicitly are kept.
  VisibleDevices with_environment() const {
    VisibleDevices v = *this;
    if (!use_environment) return v;
    if (!v.cuda_visible_devices) v.cuda_visible_devices = env("CUDA_VISIBLE_DEVICES");
    if (!v.hip_visible_devices) v.hip_visible_devices = env("HIP_VISIBLE_DEVICES");
    if (!v.rocr_visible_devices) v.rocr_visible_devices = env("ROCR_VISIBLE_DEVICES");
    if (!v.cuda_device_order) v.cuda_device_order = env("CUDA_DEVICE_ORDER").value_or(std::string());
    return v;
  }

 private:
  static std::optional<std::string> env(const char* name) {
    const char* s = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read once at load
    if (s == nullptr) return std::nullopt;
    return std::string(s);
  }
};

namespace detail {

/// The NVIDIA driver's list of the process's GPUs: one directory per GPU, named
/// by its PCI address (docs/contract.md section 1).
inline constexpr std::string_view nvidia_driver_gpus = "proc/driver/nvidia/gpus";

/// The PCI addresses among the entries of that directory (others are skipped).
template <class = void>
std::vector<PciAddress> driver_gpu_addresses(const std::vector<std::string>& names) {
  std::vector<PciAddress> listed;
  for (const auto& n : names)
    if (auto a = PciAddress::parse(n)) listed.push_back(*a);
  return listed;
}

template <class = void>
bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (prefix.size() > s.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char a = s[i];
    char b = prefix[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = static_cast<char>(b - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
}

/// A MIG entry's instance, as a key two spellings of one instance share, or
/// nullopt when `e` has neither form: "MIG-<uuid>" (the MIG device's own UUID)
/// or "MIG-[GPU-]<uuid>/<gi>/<ci>" (the parent GPU's UUID, then the GPU and
/// compute instance ids, decimal). A UUID here is hex digits and '-'.
template <class = void>
std::optional<std::string> mig_instance(std::string_view e) {
  auto lower = [](std::string_view t) {
    std::string out(t);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  };
  auto uuid = [](std::string_view t) {
    bool has_hex = false;
    for (char c : t) {
      bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      if (!hex && c != '-') return false;
      has_hex = has_hex || hex;
    }
    return has_hex;
  };
  auto id = [](std::string_view t) -> std::optional<std::string> {  // decimal, leading zeros dropped
    if (t.empty() || t.size() > 9 || !is_decimal(t)) return std::nullopt;
    std::size_t first = std::min(t.find_first_not_of('0'), t.size() - 1);
    return std::string(t.substr(first));
  };
  if (!starts_with_nocase(e, "MIG-")) return std::nullopt;
  std::string_view rest = e.substr(4);
  std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return uuid(rest) ? std::optional<std::string>(lower(rest)) : std::nullopt;
  std::string_view parent = rest.substr(0, slash);
  if (starts_with_nocase(parent, "GPU-")) parent = parent.substr(4);
  std::string_view ids = rest.substr(slash + 1);
  std::size_t second = ids.find('/');
  if (second == std::string_view::npos || !uuid(parent)) return std::nullopt;
  auto gi = id(ids.substr(0, second));
  auto ci = id(ids.substr(second + 1));
  if (!gi || !ci) return std::nullopt;
  return lower(parent) + "/" + *gi + "/" + *ci;
}

/// Which selector is being applied, for messages and rules.
struct Selector {
  std::string_view name;   ///< "CUDA_VISIBLE_DEVICES", "--visible-devices", ...
  std::string_view whose;  ///< "NVIDIA GPU", "AMD GPU", "GPU" (messages add the plural "s")
  bool uuids = true;       ///< GPU-/MIG- entries allowed
};

/// The entries of a selector value: comma-separated, blanks around each
/// trimmed; an empty entry is an error.
template <class = void>
Result<std::vector<std::string_view>> selector_entries(const Selector& sel, std::string_view all,
                                                       std::string_view shown) {
  std::vector<std::string_view> entries = detail::comma_items(all);
  for (auto& e : entries) e = detail::trim(e);
  for (std::size_t k = 0; k < entries.size(); ++k) {
    if (entries[k].empty())
      return fail(Errc::invalid_argument, sel.name, "='", shown, "': entry ", static_cast<int>(k + 1),
                  " is empty; write a comma-separated list such as 0,1 or unset ", sel.name);
  }
  return entries;
}

/// The candidates that a list of indices names, in list order.
template <class = void>
Result<std::vector<Gpu>> select_by_index(const Selector& sel, std::string_view shown,
                                         const std::vector<std::string_view>& entries,
                                         const std::vector<Gpu>& candidates) {
  std::vector<Gpu> out;
  std::vector<int> taken(candidates.size(), 0);
  for (std::string_view e : entries) {
    long long v = 0;
    detail::leading_number(e, 10, 1'000'000'000LL, v);  // saturated: reported as out of range
    if (v >= static_cast<long long>(candidates.size())) {
      std::size_t n = candidates.size();
      if (n == 0)
        return fail(Errc::invalid_argument, sel.name, "='", shown, "': index ", e.substr(0, 24),
                    " is out of range: there is no ", sel.whose, "; fix ", sel.name);
      if (n == 1)
        return fail(Errc::invalid_argument, sel.name, "='", shown, "': index ", e.substr(0, 24),
                    " is out of range: there is 1 ", sel.whose, " (index 0); fix ", sel.name);
      return fail(Errc::invalid_argument, sel.name, "='", shown, "': index ", e.substr(0, 24), " is out of range: there are ",
                  n, " ", sel.whose, "s (indices 0-", n - 1, "); fix ", sel.name);
    }
    auto k = static_cast<std::size_t>(v);
    if (taken[k] != 0)
      return fail(Errc::invalid_argument, sel.name, "='", shown, "': index ", e.substr(0, 24),
                  " is listed twice; name each GPU once");
    taken[k] = 1;
    out.push_back(candidates[k]);
  }
  return out;
}

/// Checks that entry `e` of a list that is not all indices is a UUID prefix the
/// selector takes. Errors: Errc::invalid_argument naming the entry.
template <class = void>
Result<void> check_uuid_entry(const Selector& sel, std::string_view shown, std::string_view e) {
  std::string ex = detail::quotable(e.substr(0, 64));
  if (!starts_with_nocase(e, "GPU-") && !starts_with_nocase(e, "MIG-")) {
    if (is_decimal(e))
      return fail(Errc::invalid_argument, sel.name, "='", shown, "': mixes index '", ex,
                  "' with UUIDs; use either all indices or all GPU-/MIG- UUIDs");
    return fail(Errc::invalid_argument, sel.name, "='", shown, "': entry '", ex, "' is neither a GPU index nor a ",
                sel.uuids ? "GPU-/MIG- UUID prefix" : "number",
                " (CUDA and HIP would silently stop the list there; gpuaff refuses): fix or unset ", sel.name);
  }
  if (!sel.uuids)
    return fail(Errc::invalid_argument, sel.name, "='", shown, "': entry '", ex,
                "' is a UUID, but gpuaff does not know AMD GPU UUIDs (they are not in sysfs PCI data); use indices, "
                "or visible_devices=LIST");
  if (starts_with_nocase(e, "MIG-") && !mig_instance(e))
    return fail(Errc::invalid_argument, sel.name, "='", shown, "': entry '", ex,
                "' is not a MIG device: write MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci> (gi and ci decimal) as "
                "nvidia-smi -L shows it");
  return {};
}

/// Where the one NVIDIA GPU among `candidates` is, for a bare "MIG-<uuid>" entry
/// `ex`: the MIG device's own UUID is in no file gpuaff reads, but a process
/// with one NVIDIA GPU (a MIG container) can only mean that GPU.
/// Errors: Errc::invalid_argument when there is none or more than one.
template <class = void>
Result<std::size_t> only_nvidia_gpu(const Selector& sel, std::string_view shown, std::string_view ex,
                                    const std::vector<Gpu>& candidates) {
  std::size_t at = candidates.size();
  int count = 0;
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    if (candidates[k].pci.vendor != pci_vendor::nvidia) continue;
    if (count == 0) at = k;
    ++count;
  }
  if (count == 1) return at;
  return fail(Errc::invalid_argument, sel.name, "='", shown, "': '", ex,
              "' is a MIG device UUID, which no file gpuaff reads maps to its GPU, and this process has ", count,
              " NVIDIA GPUs, not one; pass visible_devices=LIST with the parent GPU's index or GPU- UUID (nvidia-smi -L)");
}

/// The candidates that a list of GPU-/MIG- UUID prefixes names, in list order
/// (a MIG instance names its parent GPU; several may name the same one).
template <class = void>
Result<std::vector<Gpu>> select_by_uuid(const Selector& sel, std::string_view shown,
                                        const std::vector<std::string_view>& entries,
                                        const std::vector<Gpu>& candidates) {
  std::vector<Gpu> out;
  std::vector<int> taken(candidates.size(), 0);
  std::vector<std::string> instances;  // the MIG instances listed so far (mig_instance)
  bool any_uuid = false;
  for (const auto& g : candidates)
    if (!g.uuid.empty()) any_uuid = true;
  // An entry that is neither an index nor a UUID is named first: "1,-1,2"
  // holds no UUID, so it is not a mix of indices and UUIDs.
  for (std::string_view e : entries)
    if (!is_decimal(e)) GPUAFF_TRY_VOID(check_uuid_entry(sel, shown, e));
  for (std::string_view e : entries) {
    std::string ex = detail::quotable(e.substr(0, 64));
    GPUAFF_TRY_VOID(check_uuid_entry(sel, shown, e));
    bool mig = starts_with_nocase(e, "MIG-");
    std::string parent;
    if (mig) {
      // Several instances of one GPU are several devices; one instance twice is not.
      std::string instance = mig_instance(e).value_or(std::string(e));
      if (std::find(instances.begin(), instances.end(), instance) != instances.end())
        return fail(Errc::invalid_argument, sel.name, "='", shown, "': '", ex,
                    "' is listed twice (the same MIG instance); name each MIG instance once");
      instances.push_back(std::move(instance));
      std::string_view rest = e.substr(4);
      std::size_t slash = rest.find('/');
      if (slash == std::string_view::npos) {
        GPUAFF_TRY(std::size_t only, only_nvidia_gpu(sel, shown, ex, candidates));
        out.push_back(candidates[only]);
        taken[only] = 1;
        continue;
      }
      rest = rest.substr(0, slash);
      parent = starts_with_nocase(rest, "GPU-") ? std::string(rest) : std::string("GPU-") + std::string(rest);
    } else {
      parent = std::string(e);
    }
    if (!any_uuid)
      return fail(Errc::not_found, sel.name, "='", shown, "': entry '", ex, "' is a UUID, but no UUID is known for the ",
                  sel.whose, "s (proc/driver/nvidia/gpus/*/information is missing); use indices");
    std::size_t match = candidates.size();
    int matches = 0;
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      if (!candidates[k].uuid.empty() && starts_with_nocase(candidates[k].uuid.view(), parent)) {
        if (matches == 0) match = k;
        ++matches;
      }
    }
    if (matches == 0)
      return fail(Errc::not_found, sel.name, "='", shown, "': no ", sel.whose, " has a UUID starting with '", ex,
                  "'; check nvidia-smi -L");
    if (matches > 1)
      return fail(Errc::invalid_argument, sel.name, "='", shown, "': '", ex, "' matches ", matches, " ", sel.whose, "s",
                  "; give a longer UUID prefix");
    if (taken[match] != 0 && !mig)
      return fail(Errc::invalid_argument, sel.name, "='", shown, "': '", ex,
                  "' names a GPU already listed; name each GPU once");
    taken[match] = 1;
    out.push_back(candidates[match]);
  }
  return out;
}

/// Applies one selector value to `candidates` (bus order); returns the selection in list order.
template <class = void>
Result<std::vector<Gpu>> apply_selector(const Selector& sel, std::string_view value,
                                        const std::vector<Gpu>& candidates) {
  std::string shown = detail::quotable(value.substr(0, 96));
  std::string_view all = detail::trim(value);
  if (all.empty()) return std::vector<Gpu>();  // set but empty: nothing of this kind is visible
  GPUAFF_TRY(auto entries, selector_entries(sel, all, shown));
  if (std::all_of(entries.begin(), entries.end(), [](std::string_view e) { return is_decimal(e); }))
    return select_by_index(sel, shown, entries, candidates);
  return select_by_uuid(sel, shown, entries, candidates);
}

/// Checks the form of a selector value whose vendor has no GPU here (it is then
/// ignored): the entry rules above, without indices or UUIDs to match.
template <class = void>
Result<void> check_selector(const Selector& sel, std::string_view value) {
  std::string shown = detail::quotable(value.substr(0, 96));
  std::string_view all = detail::trim(value);
  if (all.empty()) return {};
  GPUAFF_TRY(auto entries, selector_entries(sel, all, shown));
  if (std::all_of(entries.begin(), entries.end(), [](std::string_view e) { return is_decimal(e); })) return {};
  for (std::string_view e : entries) GPUAFF_TRY_VOID(check_uuid_entry(sel, shown, e));
  return {};
}

/// Applies the selector `value` (when set) to `candidates`, or, when the vendor
/// has no GPU here, only checks it. nullopt: nothing selects (all stay).
template <class = void>
Result<std::optional<std::vector<Gpu>>> apply_vendor_selector(const Selector& sel,
                                                              const std::optional<std::string>& value,
                                                              const std::vector<Gpu>& candidates,
                                                              bool vendor_present) {
  using Out = std::optional<std::vector<Gpu>>;
  if (!value) return Out();
  if (!vendor_present) {
    GPUAFF_TRY_VOID(check_selector(sel, *value));
    return Out();
  }
  GPUAFF_TRY(auto s, apply_selector(sel, *value, candidates));
  return Out(std::move(s));
}

}  // namespace detail

/// Whose GPUs an index counts (`vendor=`; docs/contract.md section 6): a GPU
/// index is what one runtime calls it, and each runtime sees its own vendor's
/// GPUs only. `automatic`: NVIDIA's (CUDA) when the host has any, else AMD's
/// (HIP), else Intel's (Level Zero).
enum class GpuVendor { automatic, nvidia, amd, intel };

/// The PCI vendor id of a GpuVendor; 0 for automatic.
constexpr std::uint16_t vendor_id(GpuVendor v) {
  switch (v) {
    case GpuVendor::nvidia: return pci_vendor::nvidia;
    case GpuVendor::amd: return pci_vendor::amd;
    case GpuVendor::intel: return pci_vendor::intel;
    case GpuVendor::automatic: break;
  }
  return 0;
}

/// The runtime's name of a GPU vendor id, for messages and reports.
constexpr std::string_view runtime_of(std::uint16_t vendor) {
  return vendor == pci_vendor::nvidia ? "CUDA (NVIDIA)" : vendor == pci_vendor::amd ? "HIP (AMD)"
       : vendor == pci_vendor::intel  ? "Level Zero (Intel)" : "none";
}

/// The vendor whose GPUs among `host` (every GPU of the host) are numbered:
/// the one `asked`, or by the rule above; 0 when `host` has none and none is asked.
template <class = void>
std::uint16_t numbered_vendor(const std::vector<Gpu>& host, GpuVendor asked) {
  if (asked != GpuVendor::automatic) return vendor_id(asked);
  for (std::uint16_t v : {pci_vendor::nvidia, pci_vendor::amd, pci_vendor::intel})
    if (std::any_of(host.begin(), host.end(), [v](const Gpu& g) { return g.pci.vendor == v; })) return v;
  return 0;
}

/// The GPUs of `gpus` that are `vendor`'s, in order, indices renumbered.
template <class = void>
std::vector<Gpu> runtime_gpus(std::vector<Gpu> gpus, std::uint16_t vendor) {
  std::erase_if(gpus, [vendor](const Gpu& g) { return g.pci.vendor != vendor; });
  for (std::size_t i = 0; i < gpus.size(); ++i) gpus[i].index = static_cast<int>(i);
  return gpus;
}

/// The process's GPUs among `all` (every GPU of the host): with the NVIDIA
/// driver's list `driver` (proc/driver/nvidia/gpus/; nullopt when there is none),
/// an NVIDIA GPU it does not name is not the process's and goes to `hidden`
/// (docs/contract.md section 2). Order is kept.
template <class = void>
std::vector<Gpu> process_gpus(const std::vector<Gpu>& all, const std::optional<std::vector<PciAddress>>& driver,
                              std::vector<PciAddress>& hidden) {
  std::vector<Gpu> mine;
  for (const auto& g : all) {
    bool listed = !driver || g.pci.vendor != pci_vendor::nvidia ||
                  std::find(driver->begin(), driver->end(), g.pci.address) != driver->end();
    if (listed) mine.push_back(g);
    else hidden.push_back(g.pci.address);
  }
  return mine;
}

/// The GPUs the job sees, with index = position (see the rules at the top of this file).
/// `all` is every GPU; it is put in bus-id order first. Pure: the environment is
/// not read here (see VisibleDevices::with_environment).
/// Errors: Errc::invalid_argument (garbage entry, empty entry, duplicate, out-of-range
/// index, ambiguous UUID prefix, AMD UUID, unmappable MIG UUID), Errc::not_found (UUID
/// prefix that matches no GPU, or no UUIDs known). Each names the variable or flag and the entry.
template <class = void>
Result<std::vector<Gpu>> select_visible_gpus(std::vector<Gpu> all, const VisibleDevices& visible) {
  // Bus-id order, equal addresses kept in their order (a reader's list is in
  // that order already: a Gpu is a large object, not moved without need).
  auto bus_order = [](const Gpu& a, const Gpu& b) { return a.pci.address < b.pci.address; };
  if (!std::is_sorted(all.begin(), all.end(), bus_order)) std::stable_sort(all.begin(), all.end(), bus_order);
  std::vector<Gpu> out;
  if (visible.list) {
    GPUAFF_TRY(out, detail::apply_selector({"visible_devices", "GPU", true}, *visible.list, all));
  } else if (!visible.selects()) {
    out = std::move(all);  // no variable selects: every GPU, in bus order (no copy)
  } else {
    auto is = [](std::uint16_t vendor) { return [vendor](const Gpu& g) { return g.pci.vendor == vendor; }; };
    bool have_nvidia = std::any_of(all.begin(), all.end(), is(pci_vendor::nvidia));
    bool have_amd = std::any_of(all.begin(), all.end(), is(pci_vendor::amd));
    // HIP reads CUDA_VISIBLE_DEVICES when HIP_VISIBLE_DEVICES is unset; on a
    // machine with NVIDIA GPUs too, the variable stays CUDA's (see the top).
    bool hip_reads_cuda = !visible.hip_visible_devices && have_amd && !have_nvidia;
    // A vendor's GPUs (the selectors count positions, not Gpu::index), copied
    // only where a variable selects among them.
    std::vector<Gpu> nvidia =
        visible.cuda_visible_devices && have_nvidia ? runtime_gpus(all, pci_vendor::nvidia) : std::vector<Gpu>{};
    std::vector<Gpu> amd = have_amd ? runtime_gpus(all, pci_vendor::amd) : std::vector<Gpu>{};
    GPUAFF_TRY(auto nv_sel, detail::apply_vendor_selector({"CUDA_VISIBLE_DEVICES", "NVIDIA GPU", true},
                                                          visible.cuda_visible_devices, nvidia, have_nvidia));
    GPUAFF_TRY(auto amd_sel, detail::apply_vendor_selector({"ROCR_VISIBLE_DEVICES", "AMD GPU", false},
                                                           visible.rocr_visible_devices, amd, have_amd));
    const std::optional<std::string>& hip = hip_reads_cuda ? visible.cuda_visible_devices : visible.hip_visible_devices;
    detail::Selector hip_selector{hip_reads_cuda ? "CUDA_VISIBLE_DEVICES" : "HIP_VISIBLE_DEVICES", "AMD GPU", false};
    auto hip_sel = detail::apply_vendor_selector(hip_selector, hip, amd_sel ? *amd_sel : amd, have_amd);
    if (!hip_sel && hip_reads_cuda) {
      Error e = hip_sel.error();
      e.prepend("HIP reads CUDA_VISIBLE_DEVICES for the AMD GPUs when HIP_VISIBLE_DEVICES is unset: ");
      return Unexpected<Error>(e);
    }
    GPUAFF_TRY(auto hip_pick, std::move(hip_sel));
    if (hip_pick) amd_sel = std::move(hip_pick);
    // Refill each selected vendor's bus-order slots with its selection, in order.
    std::size_t nv_next = 0;
    std::size_t amd_next = 0;
    for (const auto& g : all) {
      if (g.pci.vendor == pci_vendor::nvidia && nv_sel) {
        if (nv_next < nv_sel->size()) out.push_back((*nv_sel)[nv_next]);
        ++nv_next;
      } else if (g.pci.vendor == pci_vendor::amd && amd_sel) {
        if (amd_next < amd_sel->size()) out.push_back((*amd_sel)[amd_next]);
        ++amd_next;
      } else {
        out.push_back(g);
      }
    }
    // Several MIG instances of one GPU can select more entries than there are slots.
    if (nv_sel)
      for (; nv_next < nv_sel->size(); ++nv_next) out.push_back((*nv_sel)[nv_next]);
  }
  for (std::size_t i = 0; i < out.size(); ++i) out[i].index = static_cast<int>(i);
  return out;
}

/// gpuaff numbers GPUs in PCI bus-id order, as CUDA does under
/// CUDA_DEVICE_ORDER=PCI_BUS_ID. CUDA's default, FASTEST_FIRST, puts the
/// fastest GPUs first and agrees with bus order only when the GPUs are alike.
/// Returns a one-line warning when `order` (VisibleDevices::cuda_device_order)
/// is known and not PCI_BUS_ID while the NVIDIA GPUs among `gpus` (the process's
/// GPUs) have different PCI device ids (0 means unknown and is skipped); else nullopt.
template <class = void>
std::optional<std::string> device_order_warning(const std::vector<Gpu>& gpus,
                                                const std::optional<std::string>& order) {
  if (!order || detail::trim(*order) == "PCI_BUS_ID") return std::nullopt;
  std::vector<std::uint16_t> ids;
  for (const auto& g : gpus)
    if (g.pci.vendor == pci_vendor::nvidia && g.pci.device != 0 &&
        std::find(ids.begin(), ids.end(), g.pci.device) == ids.end())
      ids.push_back(g.pci.device);
  if (ids.size() < 2) return std::nullopt;
  std::string list;
  for (auto id : ids) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string h = "0x";
    for (int shift = 12; shift >= 0; shift -= 4) h += hex[(id >> shift) & 0xf];
    list += std::string(list.empty() ? "" : ", ") + h;
  }
  std::string now = order->empty() ? std::string("unset (CUDA's default, FASTEST_FIRST)")
                                   : "'" + order->substr(0, 32) + "'";
  return "CUDA_DEVICE_ORDER is " + now + " and this process's NVIDIA GPUs differ (PCI device ids " + list +
         "): CUDA may number them differently from gpuaff, which counts in PCI bus-id order; export "
         "CUDA_DEVICE_ORDER=PCI_BUS_ID for the job";
}

}  // namespace v0
}  // namespace gpuaff
