// Where a kernel instance comes from when a process first needs it (host code only).
//
// load_kernel() tries, in order:
//   1. shipped native binaries for the device's architecture (ocloc -device pvc; Level Zero only),
//      loaded through zeModuleCreate(ZE_MODULE_FORMAT_NATIVE);
//   2. the persistent cache: the device binary an earlier process built for this device, runtime
//      and kernel (a file in the user's cache directory, loaded through the backend's binary path:
//      OpenCL clCreateProgramWithBinary, Level Zero zeModuleCreate(native); about 2 ms);
//   3. shipped SPIR-V (compiled at package build time, one module per instance), built for the
//      device by its driver through the kernel_compiler's SPIR-V source language (no C++ front end);
//   4. the run-time C++ compiler on the embedded sources (instances not shipped; a debug note).
// What 3 and 4 build is written back to the cache. A cache entry that is corrupt, stale or
// rejected, an unwritable cache directory, or shipped SPIR-V the driver rejects each cost one
// warning and fall through to the next source: never a crash, never another instance's kernel.
//
// Environment:
//   GNNSPARSE_CACHE_DIR   the cache directory (default: $XDG_CACHE_HOME/gnnsparse, else
//                         ~/.cache/gnnsparse); entries live under <dir>/sycl-kernels-v1/
//   GNNSPARSE_CACHE=0     no persistent cache
//   GNNSPARSE_KERNEL_DIR  where the shipped kernels are (default: <extension dir>/kernels)
//   GNNSPARSE_AOT=0       ignore shipped kernels (always compile from source; for measurements)
//   GNNSPARSE_ZE_LOADER   the Level Zero loader library (default libze_loader.so.1)
#pragma once
#include <sycl/sycl.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "instances.hpp"

namespace gnnsparse::sycl_rt {

// Notes for the user: warnings (faults that were worked around) and debug lines (where each
// kernel came from, and how long it took). The Python module turns them into RuntimeWarning and
// logging.getLogger("gnnsparse.sycl") records; without a sink, warnings go to stderr and debug
// lines too when GNNSPARSE_DEBUG=1.
enum class NoteLevel { debug, warning };
using NoteSink = void (*)(NoteLevel, const std::string &);
void set_note_sink(NoteSink sink);
void note(NoteLevel level, const std::string &text);

enum class Origin { cache, native, spirv, source };
const char *origin_name(Origin o);

struct LoadedKernel {
  sycl::kernel kernel;
  Origin origin;
};
LoadedKernel load_kernel(const sycl::context &ctx, const sycl::device &dev, Instance in);

// Every load_kernel() of this process: the instance, where it came from, how long it took.
struct LoadRecord {
  std::string name;
  Origin origin;
  double ms;
};
std::vector<LoadRecord> load_records();

// FNV-1a 64 over the embedded kernel sources (names and texts): shipped SPIR-V and cache entries
// built from other sources are never used.
std::uint64_t source_hash();

// The persistent cache directory in use ("" when off) and the shipped-kernel directory.
std::string cache_dir();
std::string kernel_dir();

// What is shipped: instance keys with SPIR-V (for the tests and the docs).
std::vector<std::uint64_t> shipped_spirv();

// The Level Zero half of loading a shipped native binary (<kernel_dir>/<arch>.gnnbin) for one
// instance, with null context and device handles: exercises the pack lookup and the
// zeModuleCreate / zeKernelCreate calls against a stand-in loader (GNNSPARSE_ZE_LOADER) on
// machines without an Intel GPU. Returns "" on success, else what failed; throws what the loader
// reports.
std::string native_binary_check(const std::string &arch, std::uint64_t key);

// FNV-1a 64 (hash of cache keys and payload checksums).
std::uint64_t fnv1a(const void *data, std::size_t n, std::uint64_t h = 1469598103934665603ull);

// The shipped-SPIR-V pack format (written by cmake/aot/gnnsparse_aot.cpp, read here):
//   "GNNSPV01" | u64 source_hash | u32 count | count x Record | strings and blobs
struct PackRecord {
  std::uint64_t key;           // Instance key
  std::uint32_t name_off, name_len;  // raw kernel name (the SPIR-V entry point)
  std::uint64_t blob_off, blob_len;  // SPIR-V module
  std::uint64_t blob_hash;     // fnv1a of the blob
};
inline constexpr char kPackMagic[8] = {'G', 'N', 'N', 'S', 'P', 'V', '0', '1'};

}  // namespace gnnsparse::sycl_rt
