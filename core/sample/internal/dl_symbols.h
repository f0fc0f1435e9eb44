#pragma once
#if !defined(NEURON_ROOM_SAMPLE)
#error "core/sample/internal/ is private to core/sample: include its public headers instead"
#endif
// One symbol of a dlopen()ed libnrt into a typed function pointer, for the two readers of the
// library (runtime_records.cc: the datastore API; libnrt_exec.cc: the execution API).

#include <dlfcn.h>

#include <string>

namespace neuron::dl_symbols {

// `name` from `handle` into `*out`; the first name that is missing goes to `*missing`, so that
// the caller names it once after resolving them all.
template <typename F>
bool Resolve(void* handle, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

}  // namespace neuron::dl_symbols
