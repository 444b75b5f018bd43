// SPDX-License-Identifier: Apache-2.0
#pragma once
// The launch layer: what a launcher needs to bind one process of a job to
// its GPU. The local rank and local size from launcher variables
// (launch/launcher.hpp), the words its options are given in
// (launch/choices.hpp), the RDMA NIC of each GPU (launch/nics.hpp), and the plan of one binding and applying it
// (launch/plan.hpp). `gpuaff bind` and `gpuaff exec` are built on it.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include "gpuaff/launch/choices.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/launch/nics.hpp"
#include "gpuaff/launch/plan.hpp"
