// Device queries that never throw when there is no driver or GPU (CI compiles without one).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "gnnsparse/cuda.hpp"

namespace gnnsparse::cuda {

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return n;
}

std::string device_name(int device) {
  const int n = device_count();
  if (device < 0 || device >= n)
    throw std::invalid_argument("gnnsparse cuda: device index " + std::to_string(device) +
                                " out of range (" + std::to_string(n) + " devices)");
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // as GS_CUDA_CHECK: the next call starts clean
    throw std::runtime_error(std::string("gnnsparse cuda: cudaGetDeviceProperties failed: ") +
                             cudaGetErrorString(e));
  }
  return prop.name;
}

}  // namespace gnnsparse::cuda
