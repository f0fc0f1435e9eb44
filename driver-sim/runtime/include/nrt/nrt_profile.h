#pragma once
// libnrt-sim: nrt_profile_start/stop live in nrt.h; this header exists so code that includes the
// real runtime's "nrt/nrt_profile.h" compiles unchanged. The simulator writes Chrome trace JSON,
// not NTFF.
#include "nrt/nrt.h"
