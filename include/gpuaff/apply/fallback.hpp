// SPDX-License-Identifier: Apache-2.0
#pragma once
// Fallback: what a launch does when the machine refuses its binding. Its own
// header so that the launch layer's option words need not pull in spawning.

#include "gpuaff/config.hpp"  // first: the C++20 check

namespace gpuaff {
inline namespace v0 {

/// What to do when the binding cannot be applied.
enum class Fallback {
  error,    ///< do not start the child; return the error
  unbound,  ///< start the child with the parent thread's mask, and record a warning
};

}  // namespace v0
}  // namespace gpuaff
