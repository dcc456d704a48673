// Host shim of the ESIMD calls the quantizer kernels (sycl/kernels/esimd/quantize.hpp) make beyond
// esimd_shim.hpp, for tests only, with the semantics of Intel's ESIMD specification and the doc
// comments of sycl/ext/intel/esimd/{simd.hpp, math.hpp} (intel-sycl-rt 2026.x):
//   * bitwise and shift operators of integer simd objects, element-wise (simd op simd, simd op
//     scalar), and | of masks;
//   * convert<To>(simd<From, N>): element-wise static_cast (float -> int truncates toward zero,
//     wider -> narrower integers wrap), as detail::convert_vector / __builtin_convertvector;
//   * abs, max (element-wise), hmax (the largest element).
// Included after esimd_shim.hpp when GNNSPARSE_ESIMD_HOST_SHIM is defined.
#pragma once
#include <type_traits>

#include "esimd_shim.hpp"

namespace gnnsparse_shim {
namespace esimd {

#define GNNSPARSE_SHIM_INT_OP(OP)                                                                        \
  template <typename T, int N, typename = std::enable_if_t<std::is_integral_v<T>>>                        \
  simd<T, N> operator OP(const simd<T, N> &a, const simd<T, N> &b) {                                      \
    simd<T, N> r(T(0));                                                                                   \
    for (int i = 0; i < N; ++i) r[i] = T(a[i] OP b[i]);                                                   \
    return r;                                                                                             \
  }                                                                                                       \
  template <typename T, int N, typename S,                                                                \
            typename = std::enable_if_t<std::is_integral_v<T> && std::is_integral_v<S>>>                  \
  simd<T, N> operator OP(const simd<T, N> &a, S b) {                                                      \
    simd<T, N> r(T(0));                                                                                   \
    for (int i = 0; i < N; ++i) r[i] = T(a[i] OP T(b));                                                   \
    return r;                                                                                             \
  }
GNNSPARSE_SHIM_INT_OP(^)
GNNSPARSE_SHIM_INT_OP(&)
GNNSPARSE_SHIM_INT_OP(|)
#undef GNNSPARSE_SHIM_INT_OP

// Shifts: the count is taken as is (the kernels shift by constants below the element width).
template <typename T, int N, typename S,
          typename = std::enable_if_t<std::is_integral_v<T> && std::is_integral_v<S>>>
simd<T, N> operator>>(const simd<T, N> &a, S s) {
  simd<T, N> r(T(0));
  for (int i = 0; i < N; ++i) r[i] = T(a[i] >> s);
  return r;
}
template <typename T, int N, typename S,
          typename = std::enable_if_t<std::is_integral_v<T> && std::is_integral_v<S>>>
simd<T, N> operator<<(const simd<T, N> &a, S s) {
  simd<T, N> r(T(0));
  for (int i = 0; i < N; ++i) r[i] = T(a[i] << s);
  return r;
}

template <int N>
simd_mask<N> operator|(const simd_mask<N> &a, const simd_mask<N> &b) {
  simd_mask<N> r(0);
  for (int i = 0; i < N; ++i) r[i] = std::uint16_t(a[i] || b[i]);
  return r;
}

template <typename To, typename From, int N>
simd<To, N> convert(const simd<From, N> &v) {
  simd<To, N> r(To(0));
  for (int i = 0; i < N; ++i) r[i] = static_cast<To>(v[i]);
  return r;
}

template <typename T, int N>
simd<T, N> abs(simd<T, N> v) {
  simd<T, N> r(T(0));
  for (int i = 0; i < N; ++i) r[i] = v[i] < T(0) ? T(-v[i]) : v[i];
  return r;
}

// max (math.hpp): element-wise; for floats the spec follows the hardware's max, which returns the
// other operand when one is NaN (the kernels never pass NaN: their keys map NaN to +inf).
template <typename T, int N>
simd<T, N> max(simd<T, N> a, simd<T, N> b) {
  simd<T, N> r(T(0));
  for (int i = 0; i < N; ++i) r[i] = a[i] >= b[i] ? a[i] : b[i];
  return r;
}

template <typename T0, typename T1, int N>
T0 hmax(simd<T1, N> v) {
  T0 m = T0(v[0]);
  for (int i = 1; i < N; ++i) m = T0(v[i]) > m ? T0(v[i]) : m;
  return m;
}

}  // namespace esimd
}  // namespace gnnsparse_shim
