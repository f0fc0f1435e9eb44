#pragma once
// libnrt-sim: nrt_version_t and nrt_get_version live in nrt.h; this header exists so code that
// includes the real runtime's "nrt/nrt_version.h" compiles unchanged.
#include "nrt/nrt.h"
