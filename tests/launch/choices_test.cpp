// SPDX-License-Identifier: Apache-2.0
// The words launch options are given in, parsed into the library's types.
#include <doctest/doctest.h>

#include "gpuaff/gpuaff.hpp"
#include "gpuaff/launch.hpp"  // with the umbrella: the launch layer declares nothing twice

using gpuaff::Errc;
using gpuaff::MemPolicy;

TEST_CASE("--membind words map onto the kernel memory policies") {
  CHECK(*gpuaff::parse_membind("none") == MemPolicy::none);
  // local is the GPU's node(s) only: MPOL_BIND, as numactl --membind; bind is a synonym.
  CHECK(*gpuaff::parse_membind("local") == MemPolicy::bind);
  CHECK(*gpuaff::parse_membind("bind") == MemPolicy::bind);
  CHECK(*gpuaff::parse_membind("preferred") == MemPolicy::preferred);
  CHECK(*gpuaff::parse_membind("interleave") == MemPolicy::interleave);
  CHECK(gpuaff::name_of(gpuaff::membind_choices, MemPolicy::bind) == "local");
  CHECK(gpuaff::choice_names(gpuaff::membind_choices, "|") == "none|local|bind|preferred|interleave");
}

TEST_CASE("an unknown word is an error naming the option, the word and the choices") {
  auto r = gpuaff::parse_membind("first-touch");
  REQUIRE(!r);
  CHECK(r.error().code() == Errc::invalid_argument);
  CHECK(r.error().message() == "membind=first-touch is not valid; use none|local|bind|preferred|interleave");
  CHECK(!gpuaff::parse_membind("Local"));  // words are case-sensitive, as the command line's
  auto f = gpuaff::parse_bind_format("yaml");
  REQUIRE(!f);
  CHECK(f.error().message() == "format=yaml is not valid; use cpulist|mask|numactl|json|env");
}

TEST_CASE("every other option word parses to its value") {
  CHECK(*gpuaff::parse_scope("socket") == gpuaff::Scope::socket);
  CHECK(*gpuaff::parse_scope("node") == gpuaff::Scope::node);
  CHECK(*gpuaff::parse_smt("one") == gpuaff::Smt::one);
  CHECK(*gpuaff::parse_smt("all") == gpuaff::Smt::all);
  CHECK(*gpuaff::parse_bind_format("numactl") == gpuaff::BindFormat::numactl);
  CHECK(*gpuaff::parse_topo_format("json") == gpuaff::TopoFormat::json);
  CHECK(*gpuaff::parse_color("auto") == gpuaff::ColorMode::automatic);
  CHECK(*gpuaff::parse_color("never") == gpuaff::ColorMode::never);
  CHECK(*gpuaff::parse_fallback("unbound") == gpuaff::Fallback::unbound);  // spawn's Fallback, the same choice
  CHECK(!gpuaff::parse_scope("package"));
  CHECK(!gpuaff::parse_smt("two"));
  CHECK(!gpuaff::parse_topo_format("cpulist"));
  CHECK(!gpuaff::parse_fallback("ignore"));
}

TEST_CASE("--unknown-node is error, node0, or a node id, kept beside the job's other options") {
  auto e = gpuaff::parse_unknown_node("error", gpuaff::JobOptions{.nproc = 4});
  REQUIRE(e);
  CHECK(e->unknown_node == gpuaff::UnknownNode::error);
  CHECK(e->assume_node == -1);
  CHECK(e->nproc == 4);
  auto z = gpuaff::parse_unknown_node("node0");
  REQUIRE(z);
  CHECK(z->unknown_node == gpuaff::UnknownNode::node0);
  auto n = gpuaff::parse_unknown_node("3", gpuaff::JobOptions{.nproc = 2});
  REQUIRE(n);
  CHECK(n->assume_node == 3);
  CHECK(n->unknown_node == gpuaff::UnknownNode::error);
  CHECK(n->nproc == 2);
  for (std::string bad : {"-1", "node1", "", "0x1"}) {
    auto r = gpuaff::parse_unknown_node(bad);
    INFO(bad);
    REQUIRE(!r);
    // The library's words: the option as unknown_node=VALUE ('' for an empty one).
    CHECK(r.error().message() ==
          "unknown_node=" + (bad.empty() ? std::string("''") : bad) + " is not valid; use error, node0 or a NUMA node id such as 1");
  }
}
