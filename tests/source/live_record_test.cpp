#include <gpuaff/source/sysfs.hpp>
#include "support/check.hpp"
