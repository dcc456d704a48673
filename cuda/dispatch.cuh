// Host-side dispatch from the run-time codes of gnnsparse/ops.hpp to template parameters, one
// helper per axis (in the manner of pytorch_sparse's AT_DISPATCH_REDUCTION_TYPES and DGL's
// SWITCH_OP). Each helper calls f with a tag and returns what f returns:
//
//   dispatch_dtype(a.dtype, [&](auto t) { using T = typename decltype(t)::type; ... });
//   dispatch_reduce(a.reduce, [&](auto r) { constexpr Reduce R = decltype(r)::value; ... });
//
// The cases come from the tables themselves, so a new row of a table is dispatched without an
// edit here; a new DType or IType row also needs its C++ type below (a compile error until it has
// one). An unknown code throws std::invalid_argument naming the axis and the value. The kernels
// of every row are instantiated, so a new row must also be a valid template argument of each.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gnnsparse/ops.hpp"

namespace gnnsparse::cuda_detail {

template <class T> struct TypeTag { using type = T; };
template <auto V> using ValueTag = std::integral_constant<decltype(V), V>;

// The feature type of each DType row, and the index type of each IType row.
template <DType D> struct FeatureType;
template <> struct FeatureType<DType::f32> { using type = float; };
template <> struct FeatureType<DType::f64> { using type = double; };
template <> struct FeatureType<DType::f16> { using type = __half; };
template <> struct FeatureType<DType::bf16> { using type = __nv_bfloat16; };
template <IType I> struct IndexType;
template <> struct IndexType<IType::i32> { using type = int32_t; };
template <> struct IndexType<IType::i64> { using type = int64_t; };

// Every row has its type, of the size the table gives.
#define GS_CHECK_DTYPE_(name, code, np_name, bytes)                                      \
  static_assert(sizeof(typename FeatureType<DType::name>::type) == (bytes),             \
                "FeatureType<DType::" #name "> does not have the size of its table row");
#define GS_CHECK_ITYPE_(name, code, np_name, bytes)                                      \
  static_assert(sizeof(typename IndexType<IType::name>::type) == (bytes),               \
                "IndexType<IType::" #name "> does not have the size of its table row");
GNNSPARSE_DTYPE_TABLE(GS_CHECK_DTYPE_)
GNNSPARSE_ITYPE_TABLE(GS_CHECK_ITYPE_)
#undef GS_CHECK_DTYPE_
#undef GS_CHECK_ITYPE_

[[noreturn]] inline void unknown_code(const char* axis, int code) {
  throw std::invalid_argument(std::string("gnnsparse cuda: unknown ") + axis + " code " +
                              std::to_string(code));
}

// The rows of each table, as enumerators.
#define GS_DTYPE_ROW_(name, ...) DType::name,
#define GS_ITYPE_ROW_(name, ...) IType::name,
#define GS_REDUCE_ROW_(name, ...) Reduce::name,
#define GS_SDDMM_OP_ROW_(name, ...) SddmmOp::name,
#define GS_EDGE_FN_ROW_(name, ...) EdgeFn::name,
#define GS_PRECISION_ROW_(name, ...) Precision::name,
inline constexpr DType kDTypeRows[] = {GNNSPARSE_DTYPE_TABLE(GS_DTYPE_ROW_)};
inline constexpr IType kITypeRows[] = {GNNSPARSE_ITYPE_TABLE(GS_ITYPE_ROW_)};
inline constexpr Reduce kReduceRows[] = {GNNSPARSE_REDUCE_TABLE(GS_REDUCE_ROW_)};
inline constexpr SddmmOp kSddmmOpRows[] = {GNNSPARSE_SDDMM_OP_TABLE(GS_SDDMM_OP_ROW_)};
inline constexpr EdgeFn kEdgeFnRows[] = {GNNSPARSE_EDGE_FN_TABLE(GS_EDGE_FN_ROW_)};
inline constexpr Precision kPrecisionRows[] = {GNNSPARSE_PRECISION_TABLE(GS_PRECISION_ROW_)};
#undef GS_DTYPE_ROW_
#undef GS_ITYPE_ROW_
#undef GS_REDUCE_ROW_
#undef GS_SDDMM_OP_ROW_
#undef GS_EDGE_FN_ROW_
#undef GS_PRECISION_ROW_

// f(ValueTag<row>{}) for the row of Rows equal to v; unknown_code(axis, v) when there is none.
template <const auto& Rows, std::size_t I = 0, class E, class F>
auto dispatch_row(E v, const char* axis, F&& f) -> std::invoke_result_t<F&, ValueTag<Rows[0]>> {
  if constexpr (I < std::size(Rows)) {
    if (v == Rows[I]) return f(ValueTag<Rows[I]>{});
    return dispatch_row<Rows, I + 1>(v, axis, f);
  } else {
    unknown_code(axis, int(v));
  }
}

// One helper per axis. dtype and itype pass a TypeTag of the C++ type, the others a ValueTag.
template <class F> decltype(auto) dispatch_dtype(DType v, F&& f) {
  return dispatch_row<kDTypeRows>(v, "dtype", [&](auto d) {
    return f(TypeTag<typename FeatureType<decltype(d)::value>::type>{});
  });
}
template <class F> decltype(auto) dispatch_itype(IType v, F&& f) {
  return dispatch_row<kITypeRows>(v, "index type", [&](auto i) {
    return f(TypeTag<typename IndexType<decltype(i)::value>::type>{});
  });
}
template <class F> decltype(auto) dispatch_reduce(Reduce v, F&& f) {
  return dispatch_row<kReduceRows>(v, "reduce", f);
}
template <class F> decltype(auto) dispatch_sddmm_op(SddmmOp v, F&& f) {
  return dispatch_row<kSddmmOpRows>(v, "sddmm op", f);
}
template <class F> decltype(auto) dispatch_edge_fn(EdgeFn v, F&& f) {
  return dispatch_row<kEdgeFnRows>(v, "edge function", f);
}
// Precision is not a template axis (no kernel uses tensor cores yet); only its code is checked.
inline void check_precision(Precision v) {
  dispatch_row<kPrecisionRows>(v, "precision", [](auto) {});
}
// Feature and index type together, as every op needs both: f(TypeTag<T>, TypeTag<I>).
template <class F> decltype(auto) dispatch_types(DType dtype, IType itype, F&& f) {
  return dispatch_dtype(dtype, [&](auto t) {
    return dispatch_itype(itype, [&](auto i) { return f(t, i); });
  });
}

// The vector width V a plan chose: Vfull (16-byte loads) or 1.
template <int Vfull, class F> decltype(auto) dispatch_vec(int vec, F&& f) {
  if (vec == Vfull) return f(ValueTag<Vfull>{});
  return f(ValueTag<1>{});
}

}  // namespace gnnsparse::cuda_detail
