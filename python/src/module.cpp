// gpuaff._gpuaff: the Python binding of the launch layer. A plan is made by
// the same code as `gpuaff bind` (tools/gpuaff/plan.cpp and load.cpp are
// compiled into this module), and applied the way `gpuaff exec` applies it
// (apply_plan: every thread, checked). The Python package (gpuaff/__init__.py)
// adds the context manager, the DataLoader worker_init_fn and the executable
// for multiprocessing on top of these functions.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../tools/gpuaff/commands.hpp"
#include "gpuaff/apply/process.hpp"
#include "gpuaff/apply/scoped_affinity.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/policy/threads.hpp"
#include "gpuaff/version.hpp"

namespace py = pybind11;
using namespace gpuaff;

namespace {

/// A library error on its way to Python: the translator below raises the
/// gpuaff.Error subclass of its Errc with the library's message.
struct PyError {
  Error error;
};

[[noreturn]] void raise(const Error& e) { throw PyError{e}; }

template <class T>
T value_or_raise(Result<T> r) {
  if (!r) raise(r.error());
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

/// What a plan is asked with: the CLI's options (one struct, filled by the
/// keyword table below) and the memory policy of exec.
struct Request {
  cli::PlanOptions plan{};
  MemPolicy membind = MemPolicy::none;
  bool target_named = false;
};

std::string text_of(std::string_view key, py::handle v) {
  if (!py::isinstance<py::str>(v)) usage(std::string(key) + "=" + std::string(py::repr(v)) + " must be a str");
  return v.cast<std::string>();
}

/// Whether `v` is an int (not a bool) in [0, last], compared as Python ints (no overflow).
bool int_in(py::handle v, long long last) {
  if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) return false;
  py::object o = py::reinterpret_borrow<py::object>(v);
  return py::int_(0) <= o && o <= py::int_(last);
}

int count_of(std::string_view key, py::handle v) {
  if (!int_in(v, 999999999)) usage(std::string(key) + "=" + std::string(py::repr(v)).substr(0, 40) + " must be a non-negative int");
  return v.cast<int>();
}

/// A count where 0 would mean "all" or "no limit" on the command line: there,
/// leaving the option out says that, so an explicit 0 is a mistake.
int positive_of(std::string_view key, py::handle v) {
  int n = count_of(key, v);
  if (n == 0) usage(std::string(key) + "=0 is not a count; leave it out (None) for every GPU / no limit");
  return n;
}

bool flag_of(std::string_view key, py::handle v) {
  if (!py::isinstance<py::bool_>(v)) usage(std::string(key) + "=" + std::string(py::repr(v)) + " must be True or False");
  return v.cast<bool>();
}

template <class E, std::size_t N>
E choice_of(std::string_view key, py::handle v, const std::array<Choice<E>, N>& choices) {
  return value_or_raise(parse_choice(key, text_of(key, v), choices));
}

using Setter = std::function<void(Request&, std::string_view, py::handle)>;

void nvidia_given(Request& r, const char* flag) { r.plan.nvidia_flags.emplace_back(flag); }

/// Every keyword a plan takes, one row each, named like the CLI's flags
/// (`--min-cores` is min_cores=). A launch option added to PlanOptions is one
/// more row here.
const std::map<std::string, Setter, std::less<>>& option_table() {
  static const std::map<std::string, Setter, std::less<>> table{
      {"gpu", [](Request& r, auto k, auto v) { r.plan.gpu = count_of(k, v), r.target_named = true; }},
      {"pci", [](Request& r, auto k, auto v) { r.plan.pci = text_of(k, v), r.target_named = true; }},
      {"local_rank", [](Request& r, auto k, auto v) { r.target_named |= r.plan.local_rank = flag_of(k, v); }},
      {"policy", [](Request& r, auto k, auto v) { r.plan.policy = text_of(k, v); }},
      // The NVIDIA-mode options also record that they were given, so that a
      // policy they do not apply to refuses them (check_nvidia_options_apply).
      {"scope", [](Request& r, auto k, auto v) { r.plan.nvidia.scope = choice_of(k, v, scope_choices), nvidia_given(r, "--scope"); }},
      {"smt", [](Request& r, auto k, auto v) { r.plan.nvidia.smt = choice_of(k, v, smt_choices), nvidia_given(r, "--smt"); }},
      {"balanced", [](Request& r, auto k, auto v) { r.plan.nvidia.balanced = flag_of(k, v), nvidia_given(r, "--balanced"); }},
      {"min_cores", [](Request& r, auto k, auto v) { r.plan.nvidia.min_cores = count_of(k, v), nvidia_given(r, "--min-cores"); }},
      {"max_cores", [](Request& r, auto k, auto v) { r.plan.nvidia.max_cores = positive_of(k, v), nvidia_given(r, "--max-cores"); }},
      {"nproc", [](Request& r, auto k, auto v) { r.plan.nproc = positive_of(k, v); }},
      {"share", [](Request& r, auto k, auto v) { r.plan.share = choice_of(k, v, share_choices); }},
      {"baseline", [](Request& r, auto k, auto v) { r.plan.baseline = choice_of(k, v, baseline_choices); }},
      {"unreachable", [](Request& r, auto k, auto v) { r.plan.unreachable = choice_of(k, v, unreachable_choices); }},
      {"unknown_node", [](Request& r, auto k, auto v) { r.plan.unknown_node = text_of(k, v); }},
      {"visible_devices", [](Request& r, auto k, auto v) { r.plan.source.visible.list = text_of(k, v); }},
      {"root", [](Request& r, auto k, auto v) { r.plan.source.root = text_of(k, v); }},
      {"topology", [](Request& r, auto k, auto v) { r.plan.source.topology_file = text_of(k, v); }},
      {"membind", [](Request& r, auto k, auto v) { r.membind = choice_of(k, v, membind_choices); }},
  };
  return table;
}

std::string option_names() {
  std::string s;
  for (const auto& [name, set] : option_table()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

/// The request the keywords name; None leaves an option at its default.
/// Errors (InvalidArgument): an unknown keyword, a value of the wrong type or
/// word, root= with topology=, more than one of gpu=, pci=, local_rank=True.
Request request_of(const py::kwargs& kw) {
  Request r;
  int targets = 0;
  for (auto [key, value] : kw) {
    std::string k = key.cast<std::string>();
    auto row = option_table().find(k);
    if (row == option_table().end()) usage("unknown option '" + k.substr(0, 40) + "'; use " + option_names());
    if (value.is_none()) continue;
    row->second(r, k, value);
    if (k == "gpu" || k == "pci" || (k == "local_rank" && r.plan.local_rank)) targets += 1;
  }
  if (!r.plan.source.root.empty() && !r.plan.source.topology_file.empty())
    usage("root= and topology= both name a machine; pass one of them");
  if (targets > 1) usage("gpu=, pci= and local_rank=True each name the device; pass one of them");
  return r;
}

/// A plan with what applying it needs to know.
struct Plan {
  LaunchPlan plan;
  bool foreign = false;  ///< read from a root or a JSON file, not this machine

  std::string memory_words() const { return std::string(name_of(membind_choices, plan.membind)); }
};

py::set set_of(const CpuSet& s) {
  py::set out;
  for (int id : s) out.add(id);
  return out;
}

/// A CpuSet from a cpulist str or an iterable of ints.
CpuSet cpus_of(py::handle v, std::string_view what) {
  if (py::isinstance<py::str>(v)) {
    auto r = CpuSet::parse_list(v.cast<std::string>());
    if (!r) raise(Error(r.error().code(), std::string(what) + ": " + std::string(r.error().message())));
    return *r;
  }
  CpuSet s;
  for (py::handle id : py::iter(v)) {
    if (!int_in(id, CpuSet::capacity - 1))
      usage(std::string(what) + ": " + std::string(py::repr(id)).substr(0, 40) + " is not a CPU id (0.." +
            std::to_string(CpuSet::capacity - 1) + ")");
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

/// The calling thread's binding for a `with` block (ScopedAffinity), restored
/// on exit on the same thread.
class ThreadGuard {
 public:
  ThreadGuard(const CpuSet& cpus, MemoryOptions memory) {
    Result<ScopedAffinity> g = Unexpected(Error());
    {
      py::gil_scoped_release nogil;
      g = ScopedAffinity::create(cpus, memory);
    }
    guard_.emplace(std::move(value_or_raise(std::move(g))));
  }
  void restore() {
    if (!guard_) return;
    Result<void> r;
    {
      py::gil_scoped_release nogil;
      r = guard_->restore();
    }
    guard_.reset();
    if (!r) raise(r.error());
  }

 private:
  std::optional<ScopedAffinity> guard_;
};

}  // namespace

PYBIND11_MODULE(_gpuaff, m) {
  m.doc() = "gpuaff's C++ launch layer (use the gpuaff package, not this module)";
  m.attr("__version__") = version_string;
  m.attr("option_names") = py::cast(option_names());

  // Never destroyed: the translator may run until the interpreter is gone.
  static auto* error_classes = new py::object(py::dict());
  m.def("_register_errors", [](py::dict classes) { *error_classes = classes; });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const PyError& e) {
      py::object cls = error_classes->attr("get")(errc_name(e.error.code()), py::reinterpret_borrow<py::object>(PyExc_RuntimeError));
      py::object exc = cls(std::string(e.error.message()));
      exc.attr("code") = errc_name(e.error.code());
      exc.attr("sys_errno") = e.error.sys_errno();
      if (e.error.sys_errno() != 0 && PyObject_IsInstance(exc.ptr(), PyExc_OSError) == 1)
        exc.attr("errno") = e.error.sys_errno();
      PyErr_SetObject(cls.ptr(), exc.ptr());
    }
  });

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
      .def_property_readonly("policy", [](const Plan& p) { return std::string(to_string(p.plan.policy.kind)); })
      .def_property_readonly("recommended_threads",
                             [](const Plan& p) { return recommended_threads(p.plan.topo, p.plan.cpus); },
                             "physical cores in the binding (OMP_NUM_THREADS)")
      .def_property_readonly("origin", [](const Plan& p) { return std::string(p.plan.topo.origin.view()); })
      .def_property_readonly("foreign", [](const Plan& p) { return p.foreign; },
                             "planned from a root or JSON file: CPUs are checked against this machine before applying")
      .def(
          "apply",
          [](const Plan& p) {
            Result<ProcessBinding> done = Unexpected(Error());
            {
              py::gil_scoped_release nogil;
              done = apply_plan(p.plan, OnRefused::error,
                                p.foreign ? PlannedOn::another_machine : PlannedOn::this_machine);
            }
            return binding_dict(value_or_raise(std::move(done)));
          },
          "Binds every thread of this process (and this thread's memory policy), as `gpuaff exec` does; "
          "on failure nothing stays changed.")
      .def("__repr__", [](const Plan& p) {
        return "<gpuaff.Plan pci=" + std::string(p.plan.target().address().to_string().view()) +
               " policy=" + std::string(to_string(p.plan.policy.kind)) + " cpus=" + p.plan.cpus.to_list() +
               " node=" + std::to_string(p.plan.node) + ">";
      });

  m.def(
      "plan",
      [](const py::kwargs& kw) {
        Request r = request_of(kw);
        if (!r.target_named) usage("name the device: gpu=N, pci='BDF' or local_rank=True");
        Result<LaunchPlan> made = Unexpected(Error());
        {
          py::gil_scoped_release nogil;
          made = cli::plan_binding(r.plan, r.membind);
        }
        return Plan{value_or_raise(std::move(made)), cli::reads_another_machine(r.plan.source)};
      },
      "The binding the keywords name (see gpuaff.plan).");

  m.def(
      "gpus",
      [](const py::kwargs& kw) {
        for (auto [key, value] : kw) {
          std::string k = key.cast<std::string>();
          if (k != "root" && k != "topology" && k != "visible_devices")
            usage("gpus() takes root=, topology= and visible_devices=, not '" + k.substr(0, 40) + "'");
        }
        Request r = request_of(kw);
        cli::SourceOptions source = r.plan.source;
        Result<Topology> topo = Unexpected(Error());
        {
          py::gil_scoped_release nogil;
          topo = cli::load_topology(source);
        }
        Topology t = value_or_raise(std::move(topo));
        py::list out;
        for (const Gpu& g : t.gpus) {
          py::dict d;
          d["index"] = g.index;
          d["pci"] = std::string(g.address().to_string().view());
          d["numa_node"] = g.numa_node();
          d["uuid"] = g.uuid.empty() ? py::object(py::none()) : py::object(py::str(std::string(g.uuid.view())));
          out.append(d);
        }
        return out;
      },
      "The visible GPUs of the machine the keywords name (root=, topology=, visible_devices=).");

  m.def("local_rank", [] {
    return value_or_raise(local_rank(process_environment())).value;
  }, "The local rank from the launcher's variables (LOCAL_RANK, SLURM_LOCALID, ...).");
  m.def("local_size", []() -> py::object {
    auto size = value_or_raise(local_size(process_environment()));
    return size ? py::object(py::int_(size->value)) : py::none();
  }, "The local size from the launcher's variables, or None when the launcher gives none.");

  m.def(
      "bind_process",
      [](py::handle cpus, const std::string& membind, py::handle memory_nodes) {
        CpuSet set = cpus_of(cpus, "cpus");
        MemoryOptions memory{.policy = value_or_raise(parse_membind(membind))};
        if (!memory_nodes.is_none()) memory.nodes = cpus_of(memory_nodes, "memory_nodes");
        Result<ProcessBinding> done = Unexpected(Error());
        {
          py::gil_scoped_release nogil;
          done = bind_process(set, memory);
        }
        return binding_dict(value_or_raise(std::move(done)));
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

  py::class_<ThreadGuard>(m, "ThreadGuard")
      .def(py::init([](const Plan& p) { return new ThreadGuard(p.plan.cpus, p.plan.memory()); }))
      .def(py::init([](py::handle cpus) { return new ThreadGuard(cpus_of(cpus, "cpus"), MemoryOptions{}); }))
      .def("restore", &ThreadGuard::restore);
}
