// SPDX-License-Identifier: Apache-2.0
// The launch options as one value (gpuaff/launch/options.hpp) and the front
// door (gpuaff/launch/front.hpp): the table's rows, setting options from
// text with the command line's checks, the library's option words spelled
// for the command line and for Python, the stage of each failure, and the
// plan a process carries (GPUAFF_PLAN).
//
// dgx-h100 (fixtures/dgx-h100): 2 sockets x 56 cores, SMT2 with split
// numbering; node 0 = 0-55,112-167 holds GPUs 0-3 (0000:1b:00.0,
// 0000:43:00.0, 0000:52:00.0, 0000:61:00.0), node 1 = 56-111,168-223 holds
// GPUs 4-7.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/launch/plan_variable.hpp"
#include "support/check.hpp"

using gpuaff::Errc;
using gpuaff::LaunchOptions;
using gpuaff::LaunchStage;
using gpuaff::Spelling;

namespace {

std::string message(const gpuaff::Error& e) { return std::string(e.message()); }

gpuaff::Environment env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

LaunchOptions on_dgx() {
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "root", gpuaff_test::fixture("dgx-h100")));
  return o;
}

}  // namespace

TEST_CASE("every row's flag is its key with dashes, keys are unique, and every row with a flag can be set") {
  std::set<std::string_view> keys;
  for (const auto& row : gpuaff::launch_options) {
    CHECK_MESSAGE(keys.insert(row.key).second, row.key);
    if (row.flag.empty()) continue;
    std::string flag = "--" + std::string(row.key);
    for (char& c : flag)
      if (c == '_') c = '-';
    CHECK_MESSAGE(row.flag == flag, row.key);
    CHECK_MESSAGE((row.set != nullptr), row.key);
    CHECK_MESSAGE(!row.help.empty(), row.key);
  }
}

TEST_CASE("a choice row's value name lists exactly the words its setter takes") {
  for (const auto& row : gpuaff::launch_options) {
    if (row.type != gpuaff::OptionType::choice) continue;
    std::string_view words = row.value_name;
    while (!words.empty()) {
      auto bar = words.find('|');
      std::string word(words.substr(0, bar));
      LaunchOptions o;
      CHECK_MESSAGE(gpuaff::set_option(o, row.key, word), row.key, " ", word);
      words = bar == std::string_view::npos ? std::string_view() : words.substr(bar + 1);
    }
    LaunchOptions o;
    auto bad = gpuaff::set_option(o, row.key, "nonsense");
    REQUIRE(!bad);
    CHECK(bad.error().code() == Errc::invalid_argument);
    CHECK(message(bad.error()).find(std::string(row.key) + "=nonsense") == 0);
  }
}

TEST_CASE("set_option applies the command line's checks, in the library's words") {
  LaunchOptions o;
  struct Case {
    const char* key;
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{"nproc", "0", "nproc=0 is not allowed: at least 1"},
                        Case{"nproc", "x", "nproc=x is not a positive integer"},
                        Case{"gpu", "99999999999", "gpu=99999999999 is out of range: at most 2147483647"},
                        Case{"max_cores", "0", "max_cores=0 is not allowed"},
                        Case{"root", "", "root='' is not a path"},
                        Case{"topology", "", "topology='' is not a path"},
                        Case{"pci", "", "pci='' names no device"},
                        Case{"pci", "zz:00.0", "pci=zz:00.0 is not a PCI address"},
                        Case{"policy", "exclusiv", "unknown policy 'exclusiv'"},
                        Case{"unknown_node", "node9x", "unknown_node=node9x is not valid"},
                        Case{"balanced", "yes", "balanced=yes is not true or false"},
                        Case{"source", "lstopo", "source=lstopo is not a reader"},
                        Case{"no_such_option", "1", "unknown option 'no_such_option'"}}) {
    auto r = gpuaff::set_option(o, c.key, c.text);
    REQUIRE_MESSAGE(!r, c.key, "=", c.text);
    CHECK(r.error().code() == Errc::invalid_argument);
    CHECK_MESSAGE(message(r.error()).find(c.says) == 0, message(r.error()));
  }
  auto nul = gpuaff::set_option(o, "root", std::string_view("/x\0junk", 7));
  CHECK(!nul);
  REQUIRE(gpuaff::set_option(o, "gpu", "all"));
  CHECK(o.all_gpus);
  CHECK(!o.gpu);
  REQUIRE(gpuaff::set_option(o, "unknown_node", "3"));
  CHECK(o.job.assume_node == 3);
  REQUIRE(gpuaff::set_option(o, "pci", "17:00.0"));
  CHECK(o.pci->to_string().view() == "0000:17:00.0");
}

TEST_CASE("NVIDIA-mode options under a PyTorch policy are a usage error, even at their default value") {
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
  REQUIRE(gpuaff::set_option(o, "balanced", "true"));  // the default, but given: still a mistake
  auto e = gpuaff::check_options(o);
  REQUIRE(!e);
  CHECK(e.error().code() == Errc::invalid_argument);
  CHECK(message(e.error()).find("balanced=true does not apply to policy=exclusive") == 0);
  CHECK(message(e.error()).find("unique-contiguous") != std::string::npos);
  CHECK(gpuaff::spell_options(message(e.error()), Spelling::command_line).find(
            "--balanced does not apply to --policy exclusive") == 0);
  CHECK(gpuaff::spell_options(message(e.error()), Spelling::python).find(
            "balanced=True does not apply to policy='exclusive'") == 0);
  REQUIRE(gpuaff::set_option(o, "policy", "unique-contiguous"));
  CHECK(gpuaff::check_options(o));
}

TEST_CASE("one machine and one device: naming two is a usage error") {
  LaunchOptions o = on_dgx();
  REQUIRE(gpuaff::set_option(o, "topology", "x.json"));
  CHECK(!gpuaff::check_options(o));
  LaunchOptions d;
  REQUIRE(gpuaff::set_option(d, "gpu", "1"));
  REQUIRE(gpuaff::set_option(d, "pci", "0000:1b:00.0"));
  auto e = gpuaff::check_options(d);
  REQUIRE(!e);
  CHECK(gpuaff::spell_options(message(e.error()), Spelling::command_line).find("--gpu N, --pci BDF and --local-rank") == 0);
}

TEST_CASE("option words are spelled for the command line and for Python, and nothing else is touched") {
  struct Case {
    const char* library;
    const char* cli;
    const char* python;
  };
  for (const Case& c : {
           Case{"or pass unreachable=nearest to use", "or pass --unreachable nearest to use",
                "or pass unreachable='nearest' to use"},
           Case{"no GPU 9 (gpu=9): 8 visible", "no GPU 9 (--gpu 9): 8 visible", "no GPU 9 (gpu=9): 8 visible"},
           Case{"leave out nic_env=true", "leave out --nic-env", "leave out nic_env=True"},
           Case{"or balanced=false;", "or --no-balanced;", "or balanced=False;"},
           Case{"visible_devices='0,x': entry 2", "--visible-devices '0,x': entry 2", "visible_devices='0,x': entry 2"},
           Case{"fix or unset visible_devices", "fix or unset --visible-devices", "fix or unset visible_devices"},
           Case{"LOCAL_RANK=3 is more than nproc=2", "LOCAL_RANK=3 is more than --nproc 2",
                "LOCAL_RANK=3 is more than nproc=2"},
           Case{"the policy gives GPU 3 no CPU", "the policy gives GPU 3 no CPU", "the policy gives GPU 3 no CPU"},
           Case{"pass root=/ or a directory", "pass --root / or a directory", "pass root='/' or a directory"},
           Case{"scope=socket: NUMA node 1", "--scope socket: NUMA node 1", "scope='socket': NUMA node 1"},
           Case{"pci=0000:17:00.0 is not", "--pci 0000:17:00.0 is not", "pci='0000:17:00.0' is not"},
           Case{"CUDA_VISIBLE_DEVICES=0 x_policy=node", "CUDA_VISIBLE_DEVICES=0 x_policy=node",
                "CUDA_VISIBLE_DEVICES=0 x_policy=node"},
           // Quoted outside text stays as it is: a variable's value that holds option words.
           Case{"LOCAL_RANK='x gpu=3 nic_env=true' is not; pass gpu=N", "LOCAL_RANK='x gpu=3 nic_env=true' is not; pass --gpu N",
                "LOCAL_RANK='x gpu=3 nic_env=true' is not; pass gpu=N"},
           Case{"X='0': entry 'visible_devices' is not", "X='0': entry 'visible_devices' is not",
                "X='0': entry 'visible_devices' is not"},
           // An apostrophe opens no quote; an unclosed quote none either.
           Case{"the GPU's node; pass gpu=N", "the GPU's node; pass --gpu N", "the GPU's node; pass gpu=N"},
           Case{"a 'stray quote gpu=2", "a 'stray quote --gpu 2", "a 'stray quote gpu=2"},
       }) {
    CHECK(gpuaff::spell_options(c.library, Spelling::command_line) == c.cli);
    CHECK(gpuaff::spell_options(c.library, Spelling::python) == c.python);
    CHECK(gpuaff::spell_options(c.library, Spelling::library) == c.library);
  }
}

TEST_CASE("the front door plans from options set as text, as the command line gives them") {
  LaunchOptions o = on_dgx();
  REQUIRE(gpuaff::set_option(o, "gpu", "3"));
  REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
  auto p = gpuaff::plan(o, env_of({}));
  REQUIRE_MESSAGE(p, (p ? "" : message(p.error())));
  // Node 0's 56 physical cores split among its four GPUs, 14 each in order:
  // GPU 3 gets cores 42-55 and their siblings 154-167.
  CHECK(p->cpus.to_list() == "42-55,154-167");
  CHECK(p->device_source == "gpu=3");
  CHECK(p->target().address().to_string().view() == "0000:61:00.0");
}

TEST_CASE("under local_rank the launcher's variables pick the GPU and say so") {
  LaunchOptions o = on_dgx();
  o.local_rank = true;
  auto p = gpuaff::plan(o, env_of({{"LOCAL_RANK", "5"}}));
  REQUIRE_MESSAGE(p, (p ? "" : message(p.error())));
  CHECK(p->visible_gpu == 5);
  CHECK(p->device_source == "LOCAL_RANK=5");
  CHECK(p->cpus.to_list() == "56-111,168-223");  // node 1: GPUs 4-7
}

TEST_CASE("every failure says at which stage it happened, and whether it is a usage mistake") {
  LaunchStage stage = LaunchStage::apply;
  SUBCASE("a malformed launcher variable: options") {
    LaunchOptions o = on_dgx();
    o.local_rank = true;
    auto p = gpuaff::plan(o, env_of({{"LOCAL_RANK", "x"}}), {}, &stage);
    REQUIRE(!p);
    CHECK(stage == LaunchStage::options);
    CHECK(gpuaff::usage_mistake(p.error(), stage));
  }
  SUBCASE("a root that is not there: machine") {
    LaunchOptions o;
    REQUIRE(gpuaff::set_option(o, "root", "/nonexistent/gpuaff-root"));
    o.gpu = 0;
    auto p = gpuaff::plan(o, env_of({}), {}, &stage);
    REQUIRE(!p);
    CHECK(stage == LaunchStage::machine);
    CHECK(p.error().code() == Errc::io_error);
    CHECK(!gpuaff::usage_mistake(p.error(), stage));
  }
  SUBCASE("a UUID that matches no GPU: visibility, a usage mistake though not_found") {
    LaunchOptions o = on_dgx();
    o.gpu = 0;
    auto p = gpuaff::plan(o, env_of({{"CUDA_VISIBLE_DEVICES", "GPU-deadbeef"}}), {}, &stage);
    REQUIRE(!p);
    CHECK(stage == LaunchStage::visibility);
    CHECK(gpuaff::usage_mistake(p.error(), stage));
  }
  SUBCASE("a GPU the machine does not have: plan, not a usage mistake") {
    LaunchOptions o = on_dgx();
    o.gpu = 8;
    auto p = gpuaff::plan(o, env_of({}), {}, &stage);
    REQUIRE(!p);
    CHECK(stage == LaunchStage::plan);
    CHECK(p.error().code() == Errc::not_found);
    CHECK(!gpuaff::usage_mistake(p.error(), stage));
    CHECK(message(p.error()).find("(gpu=8)") != std::string::npos);
  }
  SUBCASE("a PCI device that is not there: device") {
    LaunchOptions o = on_dgx();
    REQUIRE(gpuaff::set_option(o, "pci", "0000:77:00.0"));
    auto p = gpuaff::plan(o, env_of({}), {}, &stage);
    REQUIRE(!p);
    CHECK(stage == LaunchStage::device);
    CHECK(p.error().code() == Errc::not_found);
  }
  SUBCASE("a JSON topology without a JSON reader: a usage mistake, naming what to include") {
    LaunchOptions o;
    REQUIRE(gpuaff::set_option(o, "topology", gpuaff_test::fixture("dgx-h100.json")));
    o.gpu = 0;
    auto p = gpuaff::plan(o, env_of({}), {}, &stage);
    REQUIRE(!p);
    CHECK(p.error().code() == Errc::invalid_argument);
    CHECK(gpuaff::usage_mistake(p.error(), stage));
    CHECK(message(p.error()).find("gpuaff/source/json.hpp") != std::string::npos);
  }
}

TEST_CASE("the plan a process carries reads back as it was applied") {
  LaunchOptions o = on_dgx();
  o.local_rank = true;
  REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
  REQUIRE(gpuaff::set_option(o, "membind", "local"));
  auto p = gpuaff::plan(o, env_of({{"LOCAL_RANK", "6"}}));
  REQUIRE(p);
  std::string value = gpuaff::plan_variable_value(*p);
  CHECK(value.find("v1 ") == 0);
  auto back = gpuaff::parse_plan_variable(value);
  REQUIRE_MESSAGE(back, (back ? "" : message(back.error())));
  CHECK(back->gpu == 6);
  CHECK(back->pci == "0000:d1:00.0");
  CHECK(back->from == "LOCAL_RANK=6");
  CHECK(back->policy == gpuaff::PolicyKind::exclusive);
  CHECK(back->node == 1);
  // Node 1's cores 56-111 split four ways; GPU 6 is the third: 84-97 and siblings 196-209.
  CHECK(back->cpus.to_list() == "84-97,196-209");
  CHECK(back->memory_nodes.to_list() == "1");
  CHECK(back->membind == gpuaff::MemPolicy::bind);
}

TEST_CASE("a GPUAFF_PLAN that gpuaff did not write is refused, naming the variable") {
  for (const char* bad : {"", "v2 gpu=0 pci=0000:1b:00.0 cpus=0", "v1 gpu=0 cpus=0-3", "v1 gpu=x pci=0000:1b:00.0 cpus=0",
                          "v1 pci=0000:1b:00.0 cpus=", "v1 pci=0000:1b:00.0 cpus=0 policy=fastest",
                          "v1 pci=0000:1b:00.0 cpus=0-99999"}) {
    auto r = gpuaff::parse_plan_variable(bad);
    CHECK_MESSAGE(!r, bad);
    if (!r) CHECK(message(r.error()).find("GPUAFF_PLAN=") == 0);
  }
  auto later = gpuaff::parse_plan_variable("v1 pci=0000:1b:00.0 cpus=0-3 added_later=1");
  REQUIRE(later);  // unknown fields of a later v1 are ignored
  CHECK(later->cpus.to_list() == "0-3");
}

TEST_CASE("a GPUAFF_PLAN number too large for a GPU index or a node is refused, never cut to a smaller one") {
  // gpu=99999999999999999999 once read as gpu=1048576, a GPU nobody planned.
  for (const char* bad : {"v1 gpu=99999999999999999999 pci=0000:1b:00.0 cpus=0",
                          "v1 gpu=2147483648 pci=0000:1b:00.0 cpus=0", "v1 gpu=1048576 pci=0000:1b:00.0 cpus=0",
                          "v1 node=99999999999999999999 pci=0000:1b:00.0 cpus=0"}) {
    auto r = gpuaff::parse_plan_variable(bad);
    CHECK_MESSAGE(!r, bad);
    if (!r) CHECK(message(r.error()).find("GPUAFF_PLAN=") == 0);
  }
  auto big = gpuaff::parse_plan_variable("v1 gpu=1048575 node=1023 pci=0000:1b:00.0 cpus=0");
  REQUIRE(big);
  CHECK(big->gpu == 1048575);
  CHECK(big->node == 1023);
}

TEST_CASE("reserve_os_cores takes the lowest cores of every node out before the shares are computed") {
  LaunchOptions o = on_dgx();
  REQUIRE(gpuaff::set_option(o, "reserve_os_cores", "2"));
  REQUIRE(gpuaff::set_option(o, "gpu", "0"));
  auto node = gpuaff::plan(o, env_of({}));
  REQUIRE(node);
  // Node 0 keeps cores 2-55 (threads 2-55 and 114-167): cores 0 and 1 are the OS's.
  CHECK(node->cpus.to_list() == "2-55,114-167");
  REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
  // 54 cores left for 4 GPUs: 14, 14, 13, 13 (the remainder to the lowest GPUs).
  auto g0 = gpuaff::plan(o, env_of({}));
  REQUIRE(g0);
  CHECK(g0->cpus.to_list() == "2-15,114-127");
  o.gpu = 3;
  auto g3 = gpuaff::plan(o, env_of({}));
  REQUIRE(g3);
  CHECK(g3->cpus.to_list() == "43-55,155-167");
  o.gpu = 4;  // node 1 reserves its own two lowest cores, 56-57
  auto g4 = gpuaff::plan(o, env_of({}));
  REQUIRE(g4);
  CHECK(g4->cpus.to_list() == "58-71,170-183");
  auto bad = gpuaff::set_option(o, "reserve_os_cores", "-1");
  REQUIRE(!bad);
  CHECK(gpuaff::spell_options(message(bad.error()), Spelling::command_line) ==
        "--reserve-os-cores -1 is not a non-negative integer or auto (the system's housekeeping CPUs)");
}
