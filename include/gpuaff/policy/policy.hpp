// SPDX-License-Identifier: Apache-2.0
#pragma once
// Binding policies: pure, constexpr functions from a Topology and a GPU to
// the CPUs to bind. PyTorch's node, socket, exclusive and core-complex modes;
// NVIDIA gpu_affinity's all, single, single-unique, unique-interleaved and
// unique-contiguous; run-time choice by name (policy_registry, PolicyKind,
// parse_policy, PolicySpec) and the checked entry points gpuaff::bind,
// bind_all and bind_table. The toolkit for writing one's own policy:
// BindingContext, CoreList, share(). Semantics, and where they differ from
// the originals: docs/policies.md.

#include "gpuaff/config.hpp"

#include "gpuaff/topology.hpp"
#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/locality.hpp"
#include "gpuaff/policy/pci_target.hpp"
#include "gpuaff/policy/cores.hpp"
#include "gpuaff/policy/context.hpp"
#include "gpuaff/policy/node.hpp"
#include "gpuaff/policy/socket.hpp"
#include "gpuaff/policy/exclusive.hpp"
#include "gpuaff/policy/core_complex.hpp"
#include "gpuaff/policy/nvidia.hpp"
#include "gpuaff/policy/dispatch.hpp"
#include "gpuaff/policy/threads.hpp"
#include "gpuaff/policy/split.hpp"
