// SPDX-License-Identifier: Apache-2.0
#pragma once
// Checked first by every public header: gpuaff is C++20 (concepts, constexpr
// std::vector and std::sort), and an older -std would otherwise bury this
// one line under hundreds of errors from inside the headers.

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "gpuaff needs C++20 (-std=c++20)"
#endif

// Deferred functions. The reader (source/sysfs.hpp and the files it reads
// with), the apply layer and the policies a trainer rarely names are written
// as function templates of one unused parameter, `template <class = void>`,
// called like any function. A translation unit that includes the umbrella
// compiles their bodies, and the sorts and containers they instantiate, only
// if it calls them: compiling an ordinary inline function's body, used or
// not, is most of what a header costs (benchmarks/README.md, row 6). Only
// the first declaration carries the default. A class whose members only the
// reader calls (detail::RootDir, detail::SysfsReader) is a class template of
// the same kind, `BasicX<>`, named by an alias `X`: its members are compiled
// where they are called. A member that calls deferred functions (a policy's
// evaluate, ScopedAffinity::create, CpuSet::parse_list) is a member template
// of the same kind, and the registry of policies dispatches by a switch, not
// by function pointers: taking a function's address compiles it.
