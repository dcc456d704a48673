// Host-side helpers shared by the tile launchers (error checks, device properties, launch with
// an optional thread-block cluster along z).
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>
#include <stdexcept>
#include <string>

#define GS_TILE_CHECK(expr)                                                                    \
  do {                                                                                         \
    cudaError_t gs_err_ = (expr);                                                              \
    if (gs_err_ != cudaSuccess)                                                                \
      throw std::runtime_error(std::string("gnnsparse cuda tiles: ") + #expr + " failed: " +   \
                               cudaGetErrorString(gs_err_));                                   \
  } while (0)

namespace gnnsparse::tiles {

struct DeviceInfo {
  int sms = 0;
  int major = 0;
  int smem_optin = 0;  // max dynamic shared memory per block
};
DeviceInfo device_info();  // of the current device, cached per device

// Per-row bookkeeping in shared memory: the mask word of one (row, chunk) and the CSR position
// of the row's first entry in that chunk.
struct RowChunk {
  unsigned m;
  unsigned pad;
  long long o;
};

// Per-kernel facts queried once per device (function attributes are per context): the code
// version the kernel runs as (cluster paths exist only in sm_90 code) and the blocks resident per
// SM at its block size and shared memory. Setting the shared-memory limit happens here too, so a
// launch costs no extra driver calls.
struct KernelInfo {
  int binary_version = 0;
  int blocks_per_sm = 1;
};
template <class Kernel>
KernelInfo kernel_info(Kernel kernel, int threads, size_t smem) {
  // Keyed by the kernel's address, device and launch shape: kernels of one signature share this
  // template instance, and each needs its own shared-memory limit and occupancy.
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int, size_t>, KernelInfo> infos;
  static std::map<std::pair<const void*, int>, size_t> limits;
  int dev = 0;
  GS_TILE_CHECK(cudaGetDevice(&dev));
  const void* key = reinterpret_cast<const void*>(kernel);
  std::lock_guard<std::mutex> lock(mu);
  auto it = infos.find({key, dev, threads, smem});
  if (it != infos.end()) return it->second;
  size_t& limit = limits.try_emplace({key, dev}, size_t(48 * 1024)).first->second;
  if (smem > limit) {
    GS_TILE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
    limit = smem;
  }
  KernelInfo info;
  cudaFuncAttributes attr;
  GS_TILE_CHECK(cudaFuncGetAttributes(&attr, kernel));
  info.binary_version = attr.binaryVersion;
  int n = 0;
  GS_TILE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  info.blocks_per_sm = n < 1 ? 1 : n;
  infos.emplace(std::make_tuple(key, dev, threads, smem), info);
  return info;
}

// Launches `kernel` on `stream` with a cluster of `cluster_z` blocks along z when cluster_z > 1
// (sm_90). kernel_info() must have been called for this kernel and shared memory size.
template <class Kernel, class Params>
void launch_tile_kernel(Kernel kernel, dim3 grid, int threads, size_t smem, int cluster_z,
                        cudaStream_t stream, const Params& p) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (cluster_z > 1) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = cluster_z;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  GS_TILE_CHECK(cudaLaunchKernelEx(&cfg, kernel, p));
}

}  // namespace gnnsparse::tiles
