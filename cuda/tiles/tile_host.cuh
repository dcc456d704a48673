// Host-side helpers shared by the tile launchers (error checks, device properties, launch with
// an optional thread-block cluster along z).
#pragma once
#include <cuda_runtime.h>

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

// Sets the kernel's dynamic shared memory limit (once per kernel and size) and launches it on
// `stream` with a cluster of `cluster_z` blocks along z when cluster_z > 1 (sm_90).
template <class Kernel, class Params>
void launch_tile_kernel(Kernel kernel, dim3 grid, int threads, size_t smem, int cluster_z,
                        cudaStream_t stream, const Params& p) {
  if (smem > 48 * 1024)
    GS_TILE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
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

// Compute capability (10 * major + minor) of the code the kernel runs on this device: cluster
// paths exist only in sm_90 code.
template <class Kernel> int binary_version(Kernel kernel) {
  cudaFuncAttributes attr;
  GS_TILE_CHECK(cudaFuncGetAttributes(&attr, kernel));
  return attr.binaryVersion;
}

// Blocks of `kernel` resident per SM with this block size and shared memory.
template <class Kernel> int blocks_per_sm(Kernel kernel, int threads, size_t smem) {
  int n = 0;
  if (smem > 48 * 1024)
    GS_TILE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
  GS_TILE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  return n < 1 ? 1 : n;
}

}  // namespace gnnsparse::tiles
