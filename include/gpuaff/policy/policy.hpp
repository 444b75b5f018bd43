#pragma once
// (filled in as this layer lands)
#include "gpuaff/topology.hpp"
