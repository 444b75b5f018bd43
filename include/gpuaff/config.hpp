// SPDX-License-Identifier: Apache-2.0
#pragma once
// Checked first by every public header: gpuaff is C++20 (concepts, constexpr
// std::vector and std::sort), and an older -std would otherwise bury this
// one line under hundreds of errors from inside the headers.

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "gpuaff needs C++20 (-std=c++20)"
#endif
