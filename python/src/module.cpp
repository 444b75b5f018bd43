// SPDX-License-Identifier: Apache-2.0
// gpuaff._gpuaff: the Python binding of the library's front door
// (gpuaff/launch/front.hpp). Keywords are the rows of the library's option
// table (gpuaff/launch/options.hpp) that Python takes; each is turned into
// the text the command line would give and set through set_option, so Python
// and the CLI accept and refuse the same values, with the same words (an
// option spelled as Python writes it: nproc=4, unreachable='nearest').
// A plan is applied by the library's launch, as `gpuaff exec` and the SPANK
// plugin apply theirs (gpuaff/launch/launch.hpp). The Python package (gpuaff/__init__.py) adds the context
// manager, the DataLoader worker_init_fn and the executable for
// multiprocessing on top of these functions. This file includes only the
// library (include/), and the JSON reader when nlohmann_json is there.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "gpuaff/apply/process.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/detail/suggest.hpp"
#include "gpuaff/apply/scoped_affinity.hpp"
#include "gpuaff/doctor/document.hpp"
#include "gpuaff/doctor/rebind.hpp"
#include "gpuaff/doctor/verdict.hpp"
#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/launch.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/launch/plan_variable.hpp"
#include "gpuaff/memory/host_buffer.hpp"
#include "gpuaff/policy/threads.hpp"
#include "gpuaff/version.hpp"
#if GPUAFF_PYTHON_HAS_JSON
#include "gpuaff/source/json_dra.hpp"
#include "gpuaff/source/json.hpp"
#endif

namespace py = pybind11;
using namespace gpuaff;

namespace {

/// Text from the library or from outside (a message quoting a file, a thread's
/// name, an environment variable) as Python gets it: control characters and
/// bytes that are not UTF-8 written as \\xHH (as the command line prints them),
/// so that a garbled file gives its gpuaff exception, never a
/// UnicodeDecodeError; option words as Python's keywords.
std::string python_text(std::string_view text) { return spell_options(detail::escape_control(text), Spelling::python); }

/// A library error on its way to Python: the translator below raises the
/// gpuaff.Error subclass of its Errc with the message in Python's spelling.
struct PyError {
  Error error;
  bool usage = true;  ///< a usage mistake (fallback='unbound' never covers one)
};

[[noreturn]] void raise(const Error& e, bool usage = true) { throw PyError{e, usage}; }

template <class T>
T value_or_raise(Result<T> r) {
  if (!r) raise(r.error(), r.error().code() == Errc::invalid_argument);
  return std::move(*r);
}

[[noreturn]] void usage(std::string message) { raise(Error(Errc::invalid_argument, message)); }

/// The Errc names the Python exception classes are registered under.
const char* errc_name(Errc c) {
  switch (c) {
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::parse_error: return "parse_error";
    case Errc::io_error: return "io_error";
    case Errc::not_found: return "not_found";
    case Errc::out_of_range: return "out_of_range";
    case Errc::empty_result: return "empty_result";
    case Errc::unknown_locality: return "unknown_locality";
    case Errc::insufficient_cores: return "insufficient_cores";
    case Errc::permission_denied: return "permission_denied";
    case Errc::system_error: return "system_error";
    case Errc::unsupported: return "unsupported";
  }
  return "system_error";
}

/// This process's environment, copied now, with the GIL held, for the
/// library to read after releasing it. A Python thread's os.environ[k] = v
/// calls putenv() holding the GIL, and getenv() racing a putenv() may read
/// the variable array while it is reallocated and freed: a crash or a torn
/// value. No library call below reads the environment any other way.
Environment environment_snapshot() {
  // One copy of every "NAME=value" entry, end to end, and where each starts:
  // two allocations, where a map of strings took two per variable, which was
  // a third of a loaded machine's plan() (benchmarks/README.md, row P). A
  // plan asks for a few dozen names; a linear search finds each.
  struct Snapshot {
    std::string text;
    std::vector<std::pair<std::size_t, std::size_t>> entries;  // offset, length of each "NAME=value"
  };
  auto snap = std::make_shared<Snapshot>();
  std::size_t total = 0, count = 0;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e, ++count) total += std::strlen(*e);
  snap->text.reserve(total);
  snap->entries.reserve(count);
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::size_t length = std::strlen(*e);
    snap->entries.emplace_back(snap->text.size(), length);
    snap->text.append(*e, length);
  }
  return [snap](std::string_view name) -> std::optional<std::string> {
    // The first entry of the name wins, as getenv() finds it.
    for (auto [offset, length] : snap->entries) {
      std::string_view entry(snap->text.data() + offset, length);
      if (entry.size() > name.size() && entry[name.size()] == '=' && entry.substr(0, name.size()) == name)
        return std::string(entry.substr(name.size() + 1));
    }
    return std::nullopt;
  };
}

Readers python_readers() {
#if GPUAFF_PYTHON_HAS_JSON
  return Readers{.json = &read_json_topology, .dra = &read_dra_metadata};
#else
  return Readers{};
#endif
}

bool takes_python(const OptionInfo& o) { return (o.commands & for_python) != 0 && o.set != nullptr; }

std::string keyword_names() {
  std::string s;
  for (const auto& o : launch_options)
    if (takes_python(o)) s += (s.empty() ? "" : ", ") + std::string(o.key);
  return s;
}

std::string shown(py::handle v) { return std::string(py::repr(v)).substr(0, 40); }

/// A str argument as UTF-8 text. A lone surrogate ('\\udcff', what
/// os.fsdecode() makes of a byte that is not UTF-8) has no UTF-8 form: an
/// InvalidArgument (a ValueError) naming the argument, where pybind11's cast
/// raised a RuntimeError that named nothing.
std::string utf8_of(py::handle v, std::string_view what) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(v.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    usage(std::string(what) + "=" + shown(v) + " is not text that UTF-8 can hold: it has a lone surrogate (as "
          "os.fsdecode() makes of bytes that are not UTF-8); pass the text itself");
  }
  return std::string(data, static_cast<std::size_t>(size));
}

/// The text the command line would give for a keyword's value, checked for
/// the Python type the row's type stands for.
std::string text_of(const OptionInfo& o, py::handle v) {
  std::string key(o.key);
  switch (o.type) {
    case OptionType::flag:
      if (!py::isinstance<py::bool_>(v)) usage(key + "=" + shown(v) + " must be True or False");
      return v.cast<bool>() ? "true" : "false";
    case OptionType::count:
    case OptionType::positive:
      if (key == "gpu" && (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v))) {
        // several GPUs per process: gpu=[0, 4] is the command line's --gpu 0,4
        std::string list;
        for (py::handle g : v) {
          if (!py::isinstance<py::int_>(g) || py::isinstance<py::bool_>(g))
            usage(key + "=" + shown(v) + " must be an int or a list of ints");
          list += (list.empty() ? "" : ",") + py::str(g).cast<std::string>();
        }
        if (list.empty()) usage(key + "=" + shown(v) + " names no GPU");
        return list;
      }
      if (key == "reserve_os_cores" && py::isinstance<py::str>(v)) {  // 'auto': the system's housekeeping CPUs
        if (utf8_of(v, key) != "auto") usage(key + "=" + shown(v) + " must be a non-negative int or 'auto'");
        return "auto";
      }
      if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v))
        usage(key + "=" + shown(v) + (o.type == OptionType::count ? " must be a non-negative int" : " must be a positive int"));
      return py::str(v).cast<std::string>();
    case OptionType::fraction:
      if (!py::isinstance<py::float_>(v) && !py::isinstance<py::int_>(v)) usage(key + "=" + shown(v) + " must be a number");
      return py::str(v).cast<std::string>();
    case OptionType::text:
    case OptionType::path:
    case OptionType::choice:
      if (!py::isinstance<py::str>(v)) usage(key + "=" + shown(v) + " must be a str");
      return utf8_of(v, key);
  }
  return {};
}

/// The options the keywords name; None leaves an option at its default.
/// Errors (InvalidArgument): an unknown keyword, a value of the wrong type,
/// and every check of set_option and check_options.
/// The keywords that name the machine: gpuaff.load() takes them, Machine.plan() does not.
bool names_machine(std::string_view k) {
  return k == "root" || k == "topology" || k == "source" || k == "hwloc_xml" || k == "visible_devices" || k == "vendor";
}

LaunchOptions options_of(const py::kwargs& kw, std::initializer_list<std::string_view> only = {},
                         bool plan_of_loaded = false) {
  LaunchOptions o;
  for (auto [key, value] : kw) {
    std::string k = utf8_of(key, "a keyword");
    if (plan_of_loaded && names_machine(k))
      usage(k + "= belongs to gpuaff.load(); a loaded machine plans with the other keywords");
    const OptionInfo* row = find_option(k);
    bool allowed = only.size() == 0 || std::find(only.begin(), only.end(), k) != only.end();
    if (row == nullptr || !takes_python(*row) || !allowed) {
      std::string valid;
      std::vector<std::string_view> keys;
      for (const auto& row_info : launch_options)
        if (takes_python(row_info) && (only.size() == 0 || std::find(only.begin(), only.end(), row_info.key) != only.end()))
          keys.push_back(row_info.key);
      for (auto n : keys) valid += (valid.empty() ? "" : ", ") + std::string(n);
      std::string_view guess = detail::closest(k, keys);
      usage("unknown option '" + k.substr(0, 40) + "'" + (guess.empty() ? std::string() : "; did you mean " + std::string(guess) + "?") +
            "; use " + valid);
    }
    if (value.is_none()) continue;
    auto set = set_option(o, k, text_of(*row, value));
    if (!set) raise(set.error());
  }
  if (auto ok = check_options(o); !ok) raise(ok.error());
  return o;
}

/// A plan with what applying it needs to know.
struct Plan {
  LaunchPlan plan;
  LaunchOptions options;

  std::string memory_words() const { return std::string(name_of(membind_choices, plan.membind)); }
};

/// The Plan `make(o, &stage)` gives (gpuaff.plan, Machine.plan), made with
/// the GIL released (the library refuses a plan whose device is not named).
/// Raises what it fails with.
/// A LaunchPlan (3 KB, with vectors of its own) is made where Python holds it,
/// in the Plan.
template <class Make>
std::unique_ptr<Plan> plan_of(LaunchOptions o, Make&& make) {
  LaunchStage stage = LaunchStage::plan;
  auto held = std::make_unique<Plan>();
  Result<void> made = [&] {
    py::gil_scoped_release nogil;
    return make(held->plan, o, &stage);
  }();
  if (!made) raise(made.error(), usage_mistake(made.error(), stage));
  held->options = std::move(o);
  return held;
}

/// The visible GPUs, one dict each (gpuaff.gpus(), Machine.gpus).
py::list gpu_dicts(const Topology& topo) {
  py::list out;
  for (const Gpu& g : topo.gpus) {
    py::dict d;
    d["index"] = g.index;
    d["pci"] = std::string(g.address().to_string().view());
    d["numa_node"] = g.numa_node();
    d["uuid"] = g.uuid.empty() ? py::object(py::none()) : py::object(py::str(detail::escape_control(g.uuid.view())));
    out.append(d);
  }
  return out;
}

py::set set_of(const CpuSet& s) {
  py::set out;
  for (int id : s) out.add(id);
  return out;
}

/// A CpuSet from a cpulist str or an iterable of ints.
CpuSet cpus_of(py::handle v, std::string_view what) {
  // bytes iterate as numbers: b"0" would be CPU 48.
  if (py::isinstance<py::bytes>(v) || py::isinstance<py::bytearray>(v) || py::isinstance<py::memoryview>(v))
    usage(std::string(what) + ": " + shown(v) + " is bytes, not a cpulist; pass a str (decode the bytes: b'0-3'.decode()) "
          "or a list of CPU ids");
  if (py::isinstance<py::str>(v)) {
    auto r = CpuSet::parse_list(utf8_of(v, what));
    if (!r) raise(Error(r.error().code(), std::string(what) + ": " + std::string(r.error().message())));  // escaped when raised
    return *r;
  }
  CpuSet s;
  for (py::handle id : py::iter(v)) {
    bool ok = py::isinstance<py::int_>(id) && !py::isinstance<py::bool_>(id) &&
              py::int_(0) <= py::reinterpret_borrow<py::object>(id) &&
              py::reinterpret_borrow<py::object>(id) <= py::int_(CpuSet::capacity - 1);
    if (!ok)
      usage(std::string(what) + ": " + shown(id) + " is not a CPU id (0.." + std::to_string(CpuSet::capacity - 1) + ")");
    s.set(id.cast<int>());
  }
  return s;
}

py::dict binding_dict(const ProcessBinding& b) {
  py::dict d;
  d["cpus"] = set_of(b.cpus);
  d["threads_bound"] = b.threads_bound;
  d["threads_exited"] = b.threads_exited;
  d["memory_applied"] = b.memory_applied;
  d["warnings"] = b.warnings;
  return d;
}

/// The library's document of a verdict (gpuaff/doctor/document.hpp) as
/// Python values: the keys of `gpuaff doctor --format json`; messages in
/// Python's spelling, text escaped as the command line prints it, id sets as
/// sets, pages per node keyed by node id.
py::object python_of(const DocValue& d) {
  return std::visit(
      [](const auto& x) -> py::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>) {
          return py::none();
        } else if constexpr (std::is_same_v<T, bool>) {
          return py::bool_(x);
        } else if constexpr (std::is_same_v<T, long long>) {
          return py::int_(x);
        } else if constexpr (std::is_same_v<T, double>) {
          return py::float_(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return py::str(detail::escape_control(x));
        } else if constexpr (std::is_same_v<T, DocMessage>) {
          return py::str(python_text(x.text));
        } else if constexpr (std::is_same_v<T, DocIds>) {
          return set_of(*CpuSet::parse_list(x.list));  // written by CpuSet::to_list
        } else if constexpr (std::is_same_v<T, DocNodeCounts>) {
          py::dict out;
          for (const auto& [node, n] : x) out[py::int_(node)] = n;
          return out;
        } else if constexpr (std::is_same_v<T, DocArray>) {
          py::list out;
          for (const auto& e : x) out.append(python_of(e));
          return out;
        } else {
          py::dict out;
          for (const auto& [k, e] : x) out[py::str(k)] = python_of(e);
          return out;
        }
      },
      d.v);
}

py::dict verdict_dict(const Verdict& v) { return python_of(verdict_document(v)); }

/// What gpuaff.bind(), bound() and use_executable() get from the library's
/// launch (gpuaff/launch/launch.hpp): the plan, the warnings to give (in
/// Python's spelling), the variables to export, and for bound() the calling
/// thread's binding, restored by restore() on the same thread.
struct PyLaunched {
  std::optional<Plan> plan;
  std::vector<std::string> warnings;
  std::vector<std::pair<std::string, std::string>> env;
  std::optional<ScopedAffinity> guard;
  bool unbound = false;

  void restore() {
    if (!guard) return;
    Result<void> r;
    {
      py::gil_scoped_release nogil;
      r = guard->restore();
    }
    guard.reset();
    if (!r) raise(r.error(), false);
  }
};

LaunchApply launch_apply(const std::string& apply) {
  if (apply == "process") return LaunchApply::process;
  if (apply == "thread") return LaunchApply::thread;
  if (apply == "later") return LaunchApply::later;
  usage("apply='" + apply.substr(0, 20) + "' is not process, thread or later");
}

/// The library's launch of a Plan made earlier, or of the plan the keywords
/// name, with the GIL released. Raises what it fails with.
PyLaunched launch_of(py::object plan_or_none, const std::string& apply, const std::string& running,
                     const py::kwargs& kw) {
  LaunchCall call{.apply = launch_apply(apply), .running = running};
  std::optional<Launched> done;
  std::optional<LaunchOptions> options;
  const Plan* made = nullptr;
  if (plan_or_none.is_none()) options = options_of(kw);
  else made = &plan_or_none.cast<const Plan&>();  // gpuaff/__init__.py checked its type
  if (made != nullptr) options = made->options;
  Environment env = environment_snapshot();
  {
    py::gil_scoped_release nogil;
    if (made == nullptr) done.emplace(launch(*options, env, python_readers(), call));
    else done.emplace(launch(made->plan, made->options, call));
  }
  Launched& l = *done;
  if (!l.ok()) raise(*l.error, l.usage_mistake());
  PyLaunched out;
  for (const auto& w : l.warnings) out.warnings.push_back(python_text(w));
  out.env = std::move(l.env);
  out.guard = std::move(l.guard);
  out.unbound = l.unbound;
  if (l.plan && !l.unbound) out.plan = Plan{std::move(*l.plan), std::move(*options)};
  return out;
}

const char* type_name(OptionType t) {
  switch (t) {
    case OptionType::flag: return "flag";
    case OptionType::count: return "count";
    case OptionType::positive: return "positive";
    case OptionType::text: return "text";
    case OptionType::path: return "path";
    case OptionType::choice: return "choice";
    case OptionType::fraction: return "fraction";
  }
  return "text";
}

/// The exception translator: a library error raises the gpuaff.Error subclass of its class.
void define_errors(py::module_& m) {
  // Never destroyed: the translator may run until the interpreter is gone.
  static auto* error_classes = new py::object(py::dict());
  m.def("_register_errors", [](py::dict classes) { *error_classes = classes; });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const PyError& e) {
      py::object cls = error_classes->attr("get")(errc_name(e.error.code()), py::reinterpret_borrow<py::object>(PyExc_RuntimeError));
      py::object exc = cls(python_text(e.error.message()));
      exc.attr("code") = errc_name(e.error.code());
      exc.attr("sys_errno") = e.error.sys_errno();
      exc.attr("usage_mistake") = e.usage;
      if (e.error.sys_errno() != 0 && PyObject_IsInstance(exc.ptr(), PyExc_OSError) == 1)
        exc.attr("errno") = e.error.sys_errno();
      PyErr_SetObject(cls.ptr(), exc.ptr());
    }
  });
}

/// gpuaff.OPTIONS and _gpuaff.options(): the rows of the option table Python takes.
void define_options(py::module_& m) {
  m.def("options", [] {
    py::list out;
    for (const auto& o : launch_options) {
      if (!takes_python(o)) continue;
      py::dict d;
      d["key"] = std::string(o.key);
      d["flag"] = std::string(o.flag);
      d["type"] = type_name(o.type);
      d["value_name"] = std::string(o.value_name);
      d["default"] = std::string(o.default_text);
      d["help"] = std::string(o.help);
      out.append(d);
    }
    return out;
  }, "The keywords plan() takes, one dict each, from the library's option table.");
}

/// Plan, plan(): one binding, computed and checked.
void define_plan(py::module_& m) {
  py::class_<Plan>(m, "Plan", "One process's binding, computed and checked before anything is applied.")
      .def_property_readonly("cpus", [](const Plan& p) { return set_of(p.plan.cpus); }, "the CPUs (a set of ids)")
      .def_property_readonly("cpulist", [](const Plan& p) { return p.plan.cpus.to_list(); }, "the CPUs as a cpulist")
      .def_property_readonly(
          "gpu", [](const Plan& p) { return p.plan.visible_gpu >= 0 ? py::object(py::int_(p.plan.visible_gpu)) : py::none(); },
          "the visible GPU index; None for a PCI device that is not a visible GPU")
      .def_property_readonly("pci", [](const Plan& p) { return std::string(p.plan.target().address().to_string().view()); })
      .def_property_readonly("node", [](const Plan& p) { return p.plan.node; }, "the device's NUMA node")
      .def_property_readonly("memory_nodes", [](const Plan& p) { return set_of(p.plan.memory_nodes); })
      .def_property_readonly("membind", &Plan::memory_words, "the memory policy applied over memory_nodes")
      .def_property_readonly("host_nodes", [](const Plan& p) { return set_of(p.plan.host_nodes); },
                             "the memory nodes for the rank's pinned host buffers (the GPU's node)")
      .def_property_readonly("policy", [](const Plan& p) { return std::string(to_string(p.plan.policy.kind)); })
      .def_property_readonly("recommended_threads",
                             [](const Plan& p) {
                               Result<int> n = Unexpected(Error());
                               Environment env = environment_snapshot();
                               {
                                 py::gil_scoped_release nogil;
                                 n = plan_threads(p.plan, p.options, env, python_readers());
                               }
                               if (!n) raise(n.error());
                               return *n;
                             },
                             "physical cores in the binding (OMP_NUM_THREADS)")
      .def_property_readonly("origin", [](const Plan& p) { return detail::escape_control(p.plan.topo.origin.view()); })
      .def_property_readonly("foreign", [](const Plan& p) { return p.options.machine.another_machine(); },
                             "planned from a root or JSON file: CPUs are checked against this machine before applying")
      .def_property_readonly("gpu_source", [](const Plan& p) { return python_text(p.plan.device_source); },
                             "where the device choice came from: 'LOCAL_RANK=3', 'gpu=3'")
      .def_property_readonly("warnings", [](const Plan& p) {
        std::vector<std::string> out;
        for (const auto& w : p.plan.warnings) out.push_back(python_text(w));
        return out;
      }, "settings that are likely not what was meant; they change nothing")
      .def_property_readonly("environment", [](const Plan& p) {
        py::dict env;
        for (const auto& [name, value] : detail::launch_variables(p.plan, p.options)) env[py::str(name)] = value;
        return env;
      }, "the variables bind() sets in os.environ once applied: GPUAFF_PLAN, the NIC variables (nic_env), OMP_NUM_THREADS (omp_threads)")
      .def_property_readonly("gpus", [](const Plan& p) {
        std::vector<int> all;
        if (p.plan.visible_gpu >= 0) all.push_back(p.plan.visible_gpu);
        all.insert(all.end(), p.plan.more_visible_gpus.begin(), p.plan.more_visible_gpus.end());
        return all;
      }, "every visible GPU the plan serves (gpu=[0, 4]: [0, 4]); [] for a PCI device that is not one")
      .def_property_readonly("part", [](const Plan& p) {
        return p.plan.ranks_per_gpu > 1 ? py::object(py::make_tuple(p.plan.part, p.plan.ranks_per_gpu)) : py::object(py::none());
      }, "ranks_per_gpu: (part, parts) of the GPU's share these CPUs are; None for one rank per GPU")
      .def_property_readonly("roles", [](const Plan& p) -> py::object {
        if (!p.plan.roles) return py::none();
        py::dict d;
        for (std::size_t k = 0; k < role_names.size(); ++k) {
          const CpuSet& cpus = p.plan.roles->of(static_cast<Role>(k));
          if (!cpus.empty()) d[py::str(std::string(role_names[k]))] = set_of(cpus);
        }
        return d;
      }, "roles=: {'main': {CPUs}, 'comm': ..., 'data': ..., 'compute': ...} (roles that have CPUs); None without roles")
      .def_property_readonly("host_nic_set", [](const Plan& p) { return p.plan.host_nic_set; },
                             "with nic_env: the rails on host_nodes (\"mlx5_0:1\", \"cxi0\"), for transfers of host buffers")
      .def_property_readonly("nic_set", [](const Plan& p) { return p.plan.nic_set; },
                             "nic_env: the GPU's NIC set as the libraries name it (['mlx5_0:1']); [] without")
      .def_property_readonly("nic_path", [](const Plan& p) {
        return p.plan.nic_path ? py::object(py::str(std::string(to_string(*p.plan.nic_path)))) : py::object(py::none());
      }, "nic_env: the set's PCIe path class from the GPU ('PIX' ... 'SYS'); None without")
      .def_property_readonly("fallback", [](const Plan& p) { return std::string(name_of(fallback_choices, p.options.fallback)); })
      .def("__repr__", [](const Plan& p) {
        return "<gpuaff.Plan pci=" + std::string(p.plan.target().address().to_string().view()) +
               " policy=" + std::string(to_string(p.plan.policy.kind)) + " cpus=" + p.plan.cpus.to_list() +
               " node=" + std::to_string(p.plan.node) + ">";
      });

  m.def(
      "plan",
      [](const py::kwargs& kw) {
        return plan_of(options_of(kw), [env = environment_snapshot()](LaunchPlan& p, const LaunchOptions& o, LaunchStage* stage) {
          return detail::plan_into(p, o, env, python_readers(), stage);
        });
      },
      "The binding the keywords name (see gpuaff.plan).");
}

/// Machine, load(), gpus(): a machine read once, and its GPUs.
void define_machine(py::module_& m) {
  py::class_<LoadedMachine>(m, "Machine",
                            "A machine read once (gpuaff.load): plan any visible GPU with any policy from it, "
                            "reading nothing more.")
      .def(
          "plan",
          [](const LoadedMachine& lm, const py::kwargs& kw) {
            LaunchOptions o = options_of(kw, {}, true);
            o.machine = lm.options.machine;
            o.visible_devices = lm.options.visible_devices;
            return plan_of(std::move(o), [&lm, env = environment_snapshot()](LaunchPlan& p, const LaunchOptions& opts,
                                                                    LaunchStage* stage) {
              return detail::plan_loaded_into(p, lm, opts, env, stage);
            });
          },
          "The binding the keywords name, as gpuaff.plan() gives it, from this machine.")
      .def_property_readonly("gpus", [](const LoadedMachine& lm) { return gpu_dicts(lm.topo); },
                             "the visible GPUs, as gpuaff.gpus() lists them")
      .def_property_readonly("notes", [](const LoadedMachine& lm) {
        std::vector<std::string> out;
        for (const auto& n : lm.topo.notes) out.push_back(python_text(n));
        return out;
      }, "what the reader assumed where the machine did not say (gpuaff topo's notes)")
      .def_property_readonly("origin", [](const LoadedMachine& lm) { return python_text(lm.topo.origin.view()); })
      .def("__repr__", [](const LoadedMachine& lm) {
        return "<gpuaff.Machine " + python_text(lm.topo.origin.view()) + ": " + std::to_string(lm.topo.gpus.size()) +
               " GPUs, " + std::to_string(lm.topo.online.count()) + " CPUs>";
      });

  m.def(
      "load",
      [](const py::kwargs& kw) {
        LaunchOptions o = options_of(kw, {"root", "topology", "source", "hwloc_xml", "visible_devices", "vendor", "pci",
                                          "unreachable", "nic_env", "mem_nodes"});
        Result<LoadedMachine> loaded = Unexpected(Error());
        LaunchStage stage = LaunchStage::machine;
        Environment env = environment_snapshot();
        {
          py::gil_scoped_release nogil;
          loaded = load_for_plans(o, env, python_readers(), &stage);
        }
        if (!loaded) raise(loaded.error(), usage_mistake(loaded.error(), stage));
        return std::move(*loaded);
      },
      "The machine the keywords name, read once (see gpuaff.load).");

  m.def(
      "gpus",
      [](const py::kwargs& kw) {
        LaunchOptions o = options_of(kw, {"root", "topology", "source", "visible_devices", "vendor"});
        Result<Topology> topo = Unexpected(Error());
        LaunchStage stage = LaunchStage::machine;
        Environment env = environment_snapshot();
        {
          py::gil_scoped_release nogil;
          topo = load(o, env, python_readers(), SysfsDetail::full, &stage, TopologyParts::none());
        }
        if (!topo) raise(topo.error(), usage_mistake(topo.error(), stage));
        return gpu_dicts(*topo);
      },
      "The visible GPUs of the machine the keywords name (root=, topology=, visible_devices=).");
}

/// launch(), Launched: the library's exit door, which bind(), bound() and use_executable() take.
void define_launch(py::module_& m) {
  py::class_<PyLaunched>(m, "Launched", "What a launch did (gpuaff.bind, bound, use_executable use it).")
      .def_readonly("plan", &PyLaunched::plan, "the Plan; None when it runs unbound (fallback='unbound')")
      .def_readonly("warnings", &PyLaunched::warnings, "the warnings to give, one line each")
      .def_property_readonly("environment", [](const PyLaunched& l) {
        py::dict env;
        for (const auto& [name, value] : l.env) env[py::str(name)] = value;
        return env;
      }, "the variables the bound code is given: GPUAFF_PLAN, the NIC variables, OMP_*")
      .def_readonly("unbound", &PyLaunched::unbound, "fallback='unbound' covered a refusal: nothing was bound")
      .def("restore", &PyLaunched::restore, "apply='thread': puts the calling thread's binding back");
  m.def("launch", &launch_of, py::arg("plan"), py::arg("apply"), py::arg("running"),
        "The library's launch: plans (or takes `plan`) and applies it to the process ('process'), the calling "
        "thread ('thread') or nothing yet ('later'), with every rule of gpuaff/launch/launch.hpp.");
}

/// doctor(): a running process checked against its plan.
void define_doctor(py::module_& m) {
  m.def(
      "doctor",
      [](int pid, py::object min_local, const py::kwargs& kw) {
        LaunchOptions o = options_of(kw);
        DoctorOptions d;
        if (!min_local.is_none()) {
          if (!py::isinstance<py::float_>(min_local) && !(py::isinstance<py::int_>(min_local) && !py::isinstance<py::bool_>(min_local)))
            usage("min_local=" + shown(min_local) + " must be a number between 0 and 1");
          d.min_local = min_local.cast<double>();
          if (!(d.min_local >= 0.0 && d.min_local <= 1.0)) usage("min_local=" + shown(min_local) + " is not between 0 and 1");
        }
        Result<Verdict> v = Unexpected(Error());
        {
          py::gil_scoped_release nogil;
          v = examine_process(pid, o, d, python_readers());
        }
        if (!v) raise(v.error(), v.error().code() == Errc::invalid_argument);
        return verdict_dict(*v);
      },
      py::arg("pid"), py::arg("min_local") = py::none(),
      "Checks a running process against its GPUAFF_PLAN, or the plan the keywords give its GPU.");
}

/// _rebind_drifted(): this process's threads found off a plan (or its roles)
/// put back (gpuaff/doctor/rebind.hpp), for keep_bound().
void define_rebind(py::module_& m) {
  m.def(
      "_rebind_drifted",
      [](const Plan& p) {
        int pid = static_cast<int>(::getpid());
        RebindReport r;
        Result<std::vector<ThreadState>> threads = Unexpected(Error());
        {
          py::gil_scoped_release nogil;
          threads = process_threads(pid);
          if (threads) {
            Verdict v = judge(pid, detail::expectation_of(p.plan, PlanOrigin::recorded), std::move(*threads), {}, {}, {});
            r = rebind_threads(pid, rebind_targets(v));
          }
        }
        if (!threads) raise(threads.error(), false);
        py::dict out;
        py::list moved, failed;
        for (const auto& t : r.moved) {
          py::dict d;
          d["tid"] = t.tid;
          d["name"] = t.name;
          d["from"] = set_of(t.from);
          d["to"] = set_of(t.to);
          moved.append(d);
        }
        for (const auto& f : r.failed) {
          py::dict d;
          d["tid"] = f.tid;
          d["name"] = f.name;
          d["to"] = set_of(f.to);
          d["error"] = f.error;
          failed.append(d);
        }
        out["moved"] = moved;
        out["failed"] = failed;
        out["exited"] = r.exited;
        return out;
      },
      py::arg("plan"),
      "Puts back this process's threads found off the plan (or off its roles); returns moved, failed and exited.");
}

/// The launcher's variables and this process's CPUs: local_rank(), bind_process(), thread_affinity().
void define_process(py::module_& m) {
  m.def("local_rank", [] {
    return value_or_raise(local_rank(process_environment())).value;
  }, "The local rank from the launcher's variables (LOCAL_RANK, SLURM_LOCALID, ...).");
  m.def("local_size", []() -> py::object {
    auto size = value_or_raise(local_size(process_environment()));
    return size ? py::object(py::int_(size->value)) : py::none();
  }, "The local size from the launcher's variables, or None when the launcher gives none.");

  m.def(
      "bind_process",
      [](py::handle cpus, py::handle membind, py::handle memory_nodes) {
        CpuSet set = cpus_of(cpus, "cpus");
        if (!py::isinstance<py::str>(membind)) usage("membind=" + shown(membind) + " must be a str");
        MemoryOptions memory{.policy = value_or_raise(parse_membind(utf8_of(membind, "membind")))};
        if (!memory_nodes.is_none()) memory.nodes = cpus_of(memory_nodes, "memory_nodes");
        Result<ProcessBinding> done = Unexpected(Error());
        {
          py::gil_scoped_release nogil;
          done = bind_process(set, memory);
        }
        if (!done) raise(done.error(), false);
        return binding_dict(*done);
      },
      py::arg("cpus"), py::arg("membind") = "none", py::arg("memory_nodes") = py::none(),
      "Binds every thread of this process to `cpus` (a cpulist or ids); on failure every thread is put back.");

  m.def("parse_cpulist", [](py::handle text) { return set_of(cpus_of(text, "cpulist")); },
        "The CPU ids of a cpulist (\"0-3,8\") or an iterable of ids.");

  m.def("thread_affinity", [] {
    Result<CpuSet> now = Unexpected(Error());
    {
      py::gil_scoped_release nogil;
      now = thread_affinity();
    }
    return set_of(value_or_raise(std::move(now)));
  }, "The calling thread's CPUs.");
}

/// A HostBuffer for Python: the buffer protocol over its bytes, and a
/// callback run before the memory is unmapped (the torch helper unregisters
/// the pages from CUDA there), so the order is always unregister, then unmap.
struct PyHostBuffer {
  HostBuffer buffer;
  py::object on_free = py::none();
  PyHostBuffer() = default;
  PyHostBuffer(const PyHostBuffer&) = delete;
  PyHostBuffer& operator=(const PyHostBuffer&) = delete;
  ~PyHostBuffer() {
    if (!on_free.is_none()) {
      try {
        on_free();
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("gpuaff.HostBuffer's on_free callback");
      }
    }
  }
};

py::dict placement_dict(const PagePlacement& p) {
  py::dict nodes;
  for (const auto& [node, count] : p.by_node) nodes[py::int_(node)] = count;
  py::dict d;
  d["page_size"] = p.page_size;
  d["pages"] = p.pages;
  d["nodes"] = nodes;
  d["not_present"] = p.not_present;
  d["unknown"] = p.other;
  return d;
}

void define_memory(py::module_& m) {
  py::class_<PyHostBuffer>(m, "HostBuffer", py::buffer_protocol(),
                           "Host memory bound to NUMA nodes, every page faulted in and checked; a writable buffer "
                           "of `size` bytes (memoryview, numpy.frombuffer, torch.frombuffer). Unmapped when the "
                           "last reference (a view, a tensor) is gone.")
      .def_buffer([](PyHostBuffer& h) {
        return py::buffer_info(h.buffer.data(), 1, py::format_descriptor<unsigned char>::format(), 1,
                               {static_cast<py::ssize_t>(h.buffer.size())}, {1});
      })
      .def_property_readonly("size", [](const PyHostBuffer& h) { return h.buffer.size(); }, "the bytes asked for")
      .def_property_readonly("mapped", [](const PyHostBuffer& h) { return h.buffer.mapped(); },
                             "the bytes mapped: size rounded up to whole pages (what a runtime registers)")
      .def_property_readonly("address", [](const PyHostBuffer& h) { return reinterpret_cast<std::uintptr_t>(h.buffer.data()); })
      .def_property_readonly("page_size", [](const PyHostBuffer& h) { return h.buffer.page_size(); })
      .def_property_readonly("nodes", [](const PyHostBuffer& h) { return set_of(h.buffer.options().nodes); })
      .def_property_readonly("placement", [](const PyHostBuffer& h) { return placement_dict(h.buffer.placement()); },
                             "where the pages were when the allocation was checked: {'nodes': {node: pages}, ...}")
      .def("query", [](const PyHostBuffer& h) {
        Result<PagePlacement> r = Unexpected(Error());
        {
          py::gil_scoped_release nogil;
          r = h.buffer.query();
        }
        return placement_dict(value_or_raise(std::move(r)));
      }, "asks the kernel again where the pages are (move_pages)")
      .def("_set_on_free", [](PyHostBuffer& h, py::object f) { h.on_free = std::move(f); },
           "a callable run once before the memory is unmapped (gpuaff.pinned_tensor's unregister)");

  m.def(
      "host_buffer",
      [](std::size_t size, py::handle nodes, py::handle fault, py::handle huge) {
        HostBufferOptions o;
        o.nodes = cpus_of(nodes, "nodes");
        if (!py::isinstance<py::str>(fault)) usage("fault=" + shown(fault) + " must be a str");
        if (!py::isinstance<py::str>(huge)) usage("huge=" + shown(huge) + " must be a str");
        std::string f = utf8_of(fault, "fault"), h = utf8_of(huge, "huge");
        if (f == "touch") o.fault = FaultIn::touch;
        else if (f == "populate") o.fault = FaultIn::populate;
        else usage("fault='" + f.substr(0, 40) + "' is not touch or populate");
        if (h == "none") o.huge = HugePages::none;
        else if (h == "transparent") o.huge = HugePages::transparent;
        else if (h == "hugetlb") o.huge = HugePages::hugetlb;
        else usage("huge='" + h.substr(0, 40) + "' is not none, transparent or hugetlb");
        auto out = std::make_unique<PyHostBuffer>();
        Result<HostBuffer> b = Unexpected(Error());
        {
          py::gil_scoped_release nogil;
          b = allocate_host_buffer(size, o);
        }
        if (!b) raise(b.error(), false);
        out->buffer = std::move(*b);
        return out;
      },
      py::arg("size"), py::arg("nodes"), py::arg("fault") = "touch", py::arg("huge") = "none",
      "`size` bytes of host memory on `nodes` (a cpulist-style list or ids; a plan's host_nodes), faulted in and "
      "checked page by page; what cannot be placed raises, naming the node and the limit.");
}

}  // namespace

PYBIND11_MODULE(_gpuaff, m) {
  m.doc() = "gpuaff's C++ front door (use the gpuaff package, not this module)";
  m.attr("__version__") = version_string;
  m.attr("option_names") = py::cast(keyword_names());
  m.attr("plan_variable") = std::string(plan_variable);
  std::vector<std::string> policies;
  for (const PolicyInfo& p : policy_registry) policies.emplace_back(p.name);
  m.attr("policy_names") = policies;
  define_errors(m);
  define_options(m);
  define_plan(m);
  define_machine(m);
  define_launch(m);
  define_doctor(m);
  define_rebind(m);
  define_memory(m);
  define_process(m);
}
