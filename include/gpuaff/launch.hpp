// SPDX-License-Identifier: Apache-2.0
#pragma once
// The front door: from what a user asks to a bound process, as `gpuaff exec`,
// the SPANK plugin and the Python module do it.
//
//   gpuaff::LaunchOptions o;                       // every option, one member each (launch/options.hpp)
//   o.local_rank = true;                           // or gpuaff::set_option(o, "local_rank", "true")
//   o.policy.kind = gpuaff::PolicyKind::exclusive;
//   gpuaff::Launched l = gpuaff::launch(o);        // plan, bind every thread, fallback, variables
//   if (!l.ok()) return l.exit_code();             // l.error says what is wrong and what to do
//
// launch/front.hpp: plan(options) without applying it, a machine loaded once;
// launch/launch.hpp: launch() and what it returns; launch/launcher.hpp: the
// launchers' variables; launch/nics.hpp: each GPU's NIC set.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include "gpuaff/launch/choices.hpp"
#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/launch.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/launch/nics.hpp"
#include "gpuaff/launch/plan.hpp"
