// optimized/cuda/common.cuh -- what every kernel version shares: the launch parameters, the chunk
// table of a (possibly packed) batch, typed loads and stores, and CUDA error checking.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace linattn::cuda::detail {

#define LINATTN_CUDA_CHECK(expr)                                                               \
  do {                                                                                         \
    cudaError_t err_ = (expr);                                                                 \
    if (err_ != cudaSuccess)                                                                   \
      throw std::runtime_error(std::string("linattn::cuda: ") + #expr + " failed: " +          \
                               cudaGetErrorString(err_) + " (" + __FILE__ + ":" +              \
                               std::to_string(__LINE__) + ")");                                \
  } while (0)

/// Which gate a call carries: none (DeltaNet), one scalar per token and head (GDN), or one per
/// key channel (KDA, GDN2).
enum GateKind : int { kGateNone = 0, kGateScalar = 1, kGateChannel = 2 };

/// Everything a kernel needs, by value. Sequences: n in [0, N) covers tokens [seq(n), seq(n+1))
/// of the flattened token axis (B * T tokens; packed batches have B = 1). Chunks of 64 tokens
/// never cross a sequence boundary; the chunk table lists them all, in sequence order.
struct KParams {
  int op = 0;        ///< ref::Op as int
  int gate = 0;      ///< GateKind
  bool gdn2 = false; ///< erase gate b [.,K] and write gate w [.,V] instead of beta
  int B = 1, T = 0, H = 1, K = 1, V = 1, N = 1;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* g = nullptr;
  const void* beta = nullptr;
  const void* b = nullptr;
  const void* w = nullptr;
  void* o = nullptr;
  float scale = 1.f;
  const float* h0 = nullptr;  ///< [N, H, K, V] or null
  float* ht = nullptr;        ///< [N, H, K, V] or null
  const int* cu = nullptr;    ///< device [N + 1] token offsets; null: sequence n = [n T, n T + T)
  const int* chunk_tok0 = nullptr;  ///< device [num_chunks]: first token of each chunk
  const int* chunk_seq = nullptr;   ///< device [num_chunks]: its sequence
  const int* seq_chunk0 = nullptr;  ///< device [N]: index of the first chunk of each sequence
  int num_chunks = 0;
  int chunks_per_seq = 0;  ///< when cu is null: ceil(T / 64)
  void* ws = nullptr;      ///< workspace of the version
  /// Backward with a SavedForward with states: the saved v_new, A and S (bwd_common.cuh's bwd_ws places
  /// them here, [rows V | rows C | num_chunks H K V] float32, instead of in ws); null otherwise.
  float* keep = nullptr;
};

__device__ __forceinline__ int seq_begin(const KParams& p, int n) { return p.cu ? p.cu[n] : n * p.T; }
__device__ __forceinline__ int seq_end(const KParams& p, int n) { return p.cu ? p.cu[n + 1] : n * p.T + p.T; }

/// First token and length of chunk c (of the whole batch).
__device__ __forceinline__ void chunk_of(const KParams& p, int c, int& tok0, int& len) {
  int n, c_in;
  if (p.chunk_tok0) {
    tok0 = p.chunk_tok0[c];
    n = p.chunk_seq[c];
  } else {
    n = c / p.chunks_per_seq;
    c_in = c - n * p.chunks_per_seq;
    tok0 = n * p.T + c_in * 64;
  }
  const int end = seq_end(p, n);
  len = min(64, end - tok0);
}

__device__ __forceinline__ float ld(const float* p) { return *p; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(float* p, float x) { *p = x; }
__device__ __forceinline__ void st(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

/// F1 (docs/derivation-backward.md): G_i = g_0 + ... + g_i, the cumulative log-decay inside a chunk of
/// Lc tokens, in place in float64: sG[i * ldg + d] holds g_i of gate channel d < KGs on entry, G_i on
/// return (one thread per channel; callers synchronise before and after).
__device__ __forceinline__ void cumsum_log_decays(double* sG, int ldg, int KGs, int Lc, int tid, int nt) {
  for (int d = tid; d < KGs; d += nt) {
    double acc = 0.0;
    for (int i = 0; i < Lc; ++i) acc += sG[i * ldg + d], sG[i * ldg + d] = acc;
  }
}

}  // namespace linattn::cuda::detail
