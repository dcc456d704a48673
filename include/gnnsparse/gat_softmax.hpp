// gnnsparse: GAT's edge softmax in pieces, for the quantized GAT attention's backward (contract and
// argument struct; host code, plain C++17). The backward needs alpha (nnz x H) twice -- in
// transpose order for dz = A^T (alpha) dout, and in CSR order for the softmax gradient -- and a
// whole (nnz, H) float32 alpha is the training's memory peak on large graphs (1.8 GiB for 124M
// edges x 4 heads, twice with the gradient's tensor). These ops keep only node-sized state and
// form alpha where it is used, from the per-node logits:
//
// Per head h, for entry k of row i of A (M x K CSR) with column c = col[k]:
//   e_k = fd[i, h] + fs[c, h];   l_k = e_k > 0 ? e_k : slope * e_k   (the product rounded alone)
//   m[i, h] = max over row i of l_k;   inv[i, h] = 1 / sum over row i of exp(l_k - m[i, h])
//   alpha_k = exp(l_k - m[i, h]) * inv[i, h]
// fd is M x H, fs is K x H, every tensor float32, row-major, contiguous (m and inv: see below).
//
// STATS (gat_softmax_stats): m and inv (M x H). An empty row gets m = 0, inv = 0 (never NaN). The
//   sum is an online softmax: each lane folds its entries in ascending order into (max, sum) with
//   one exp per entry, the lanes' states are merged by a fixed tree (ties of the max rescale
//   nothing), so the result is that of the two-pass formula within a few roundings.
// WEIGHTS_T (gat_softmax_weights_t): aT (nnz x H) in transpose order, aT[j, h] = alpha of the
//   original entry t_perm[j], formed from the transpose's structure alone (no t_perm): row c of
//   A^T (t_rowptr) lists the entries of original column c, t_col[j] is the original row i.
// GRAD (gat_softmax_grad): t (nnz x H, CSR order) holds dP (the SDDMM of the upstream gradient
//   with z) and is overwritten in place with dS: per row i and head h,
//     p_k = alpha_k t_k;  r = sum over row i of p_k (entry order per lane, lanes by a fixed tree);
//     t_k <- (p_k - alpha_k r) * (e_k > 0 ? 1 : slope)      (each product and difference rounded)
//
// LONG ROWS. A row of at least kGatLongRow entries is split into segments of kGatSegment entries,
// each taken by a whole block (a per-segment partial state in a stream-ordered scratch, folded in
// segment order), so a power-law hub of millions of entries neither serializes a launch behind
// one warp nor one block. STATS and GRAD take the list of those rows of A (long_rows: n_long
// indices of A's index type): it must hold every such row exactly once; it may also hold -1
// (padding, e.g. from torch.nonzero_static) or shorter rows, which are skipped. A long row missing
// from the list is left unwritten; a repeated one gives undefined values (never an access out of
// bounds). WEIGHTS_T is a map over the transposed entries in fixed runs and needs no list.
//
// m and inv may be row-strided (ld_m / ld_inv floats between rows, -1: H), so that a caller can
// keep a row's m and inv adjacent (one gathered segment for WEIGHTS_T).
// WEIGHTS_T, LSE form (inv = nullptr): m holds each row's log-sum-exp, lse[i, h] = m[i, h] +
//   log(sum over row i of exp(l_k - m[i, h])), and aT = exp(l_k - lse[i, h]) (within a few roundings
//   of the form above); fd may then be row-strided too (ld_fd), so that a caller can pack a row's fd
//   and lse into one gathered segment (ld_fd = ld_m = 2H). STATS and GRAD need inv and ld_fd = -1.
//
// Every output element is one fixed sequence of operations: no atomics, bitwise reproducible.
// rowptr[M] must equal nnz and 0 <= col < K (not checked on the device).
#pragma once
#include <cstdint>

#include "gnnsparse/args.hpp"

namespace gnnsparse {

// A row of at least this many entries is a long row (see LONG ROWS).
inline constexpr std::int64_t kGatLongRow = 1024;
// Entries of a long row's segment (one block each).
inline constexpr std::int64_t kGatSegment = 4096;

struct GatSoftmaxArgs {
  // STATS / GRAD: A itself (A.M rows = fd's rows, A.K = fs's rows). WEIGHTS_T: its transpose
  // (t_rowptr, t_col): A.M = fs's rows (A's columns), A.K = fd's rows. val unused.
  CsrView A;
  const void *long_rows = nullptr;  // STATS / GRAD: n_long row indices of A.itype (see LONG ROWS)
  std::int64_t n_long = 0;
  std::int64_t H = 1;
  double slope = 0.2;
  const float *fd = nullptr;  // (rows of A) x H; WEIGHTS_T: gathered by t_col
  const float *fs = nullptr;  // (columns of A) x H; WEIGHTS_T: one row per transposed row
  float *m = nullptr;         // (rows of A) x H: written by STATS, read by WEIGHTS_T and GRAD
  float *inv = nullptr;       // likewise
  std::int64_t ld_m = -1, ld_inv = -1;  // row strides of m and inv in floats (-1: H)
  std::int64_t ld_fd = -1;              // WEIGHTS_T: row stride of fd in floats (-1: H)
  float *E = nullptr;         // WEIGHTS_T: aT (nnz x H), written; GRAD: t (nnz x H), read and overwritten
};

}  // namespace gnnsparse
