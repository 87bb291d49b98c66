/// optimized/cpu/chunk.hpp -- chunked (WY / UT-transform) forward kernels for DeltaNet, Gated
/// DeltaNet, KDA and Gated DeltaNet-2 on the CPU, in float and double (SPEC section 4).
///
/// Same layout, options and results as the naive reference (reference/recurrent.hpp):
/// ~~~
///   q, k [B, T, H, K], v [B, T, H, V], log-decays g <= 0 ([B, T, H] scalar or [B, T, H, K] per key
///   channel), beta [B, T, H], b [B, T, H, K], w [B, T, H, V]; state [N, H, K, V]; o [B, T, H, V].
/// ~~~
/// The sequence is cut into chunks of C = chunk_size tokens (16, 32 or 64; the last one may be
/// partial; chunks never cross the sequence boundaries of a packed batch), and each chunk is one
/// step of the state recurrence done with matrix products instead of C rank-1 updates:
/// ~~~
///   cumulative gates G -> L -> A = (I + L)^-1 -> w_aux, u -> v_new, o, S'
/// ~~~
/// (optimized/cpu/chunk.cpp implements the stages, each next to its equation).
/// All arithmetic is in the input's precision: float inputs keep a float32 state and float32
/// cumulative gates, double inputs double.
///
/// Threads: OpenMP over (sequence, head) pairs. Errors: every argument is checked by
/// ref::validate_recurrent (the reference's own checks), plus chunk_size and num_threads.
/// return_trace is supported: v_bar, r = v - v_bar and written (= v_new of the chunked form) are
/// computed from the same chunk quantities (one more C x K x V product per chunk).
/// @file
#pragma once

#include <vector>

#include "reference/recurrent.hpp"

namespace linattn::cpu {

/// @addtogroup cpu_kernels
/// @{

template <class T>
struct ChunkOptions : ref::RecurrentOptions<T> {
  index_t chunk_size = 64;  ///< C in {16, 32, 64}
  int num_threads = 0;      ///< OpenMP threads over (sequence, head) pairs; 0 = OpenMP's default
};

/// DeltaNet (Eq.14), chunked. beta [B, T, H].
template <class T>
ref::RecurrentOutput<T> chunk_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                         const Tensor<T>& v, const Tensor<T>& beta,
                                         const ChunkOptions<T>& opt = {});

/// Gated DeltaNet (Eqs.15-17), chunked. g [B, T, H] log-decays, beta [B, T, H].
template <class T>
ref::RecurrentOutput<T> chunk_gated_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                               const Tensor<T>& v, const Tensor<T>& g,
                                               const Tensor<T>& beta,
                                               const ChunkOptions<T>& opt = {});

/// Kimi Delta Attention (Eqs.18-20), chunked. g [B, T, H, K] per-channel log-decays, beta [B, T, H].
template <class T>
ref::RecurrentOutput<T> chunk_kda(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                  const Tensor<T>& g, const Tensor<T>& beta,
                                  const ChunkOptions<T>& opt = {});

/// Gated DeltaNet-2 (Eqs.21-24), chunked. g [B, T, H, K], b [B, T, H, K], w [B, T, H, V].
template <class T>
ref::RecurrentOutput<T> chunk_gdn2(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                   const Tensor<T>& g, const Tensor<T>& b, const Tensor<T>& w,
                                   const ChunkOptions<T>& opt = {});

/// Any of the four operators by name (op = Op::linear_attn is rejected): the gates that `op` uses
/// are taken from `gates` (GDN: g, beta; KDA: g, beta; GDN2: g, b, w; DeltaNet: beta).
template <class T>
ref::RecurrentOutput<T> chunk_forward(ref::Op op, const Tensor<T>& q, const Tensor<T>& k,
                                      const Tensor<T>& v, const ref::Gates<T>& gates,
                                      const ChunkOptions<T>& opt = {});

/// The intermediates of one chunk of one (sequence, head), exactly as the kernel computed them
/// (for tests and notebooks). n = len is the number of tokens in the chunk (<= C), rows are the
/// chunk's tokens in order, and in the notation of SPEC section 4 (S layout, K x V state):
template <class T>
struct ChunkStages {
  index_t seq = 0;   ///< sequence index n (the batch index, or the packed sequence)
  index_t head = 0;  ///< head index h
  index_t t0 = 0;    ///< first token of the chunk, an index into the T axis of the inputs
  index_t len = 0;   ///< tokens in the chunk
  Tensor<T> G;       ///< [n, K] cumulative log-decays within the chunk (scalar decays repeated)
  Tensor<T> e;       ///< [n, K] row vectors e_i = beta_i k_i, or b_i (.) k_i for GDN2
  Tensor<T> u0;      ///< [n, V] write targets u0_i = beta_i v_i, or w_i (.) v_i for GDN2
  Tensor<T> L;       ///< [n, n] strictly lower: L_ij = sum_d e_id k_jd exp(G_id - G_jd), i > j
  Tensor<T> A;       ///< [n, n] (I + L)^-1, unit lower triangular
  Tensor<T> w_aux;   ///< [n, K] A (e (.) exp(G))
  Tensor<T> u;       ///< [n, V] A u0
  Tensor<T> S_in;    ///< [K, V] state entering the chunk
  Tensor<T> v_new;   ///< [n, V] u - w_aux S_in (= the vectors written along k, the trace's `written`)
  Tensor<T> S_out;   ///< [K, V] state leaving the chunk
};

/// Run the chunked kernel of `op` and return every chunk's intermediates (in the order
/// sequence, head, chunk). Slow (it copies everything); meant for tests and notebooks.
template <class T>
std::vector<ChunkStages<T>> chunk_intermediates(ref::Op op, const Tensor<T>& q,
                                                const Tensor<T>& k, const Tensor<T>& v,
                                                const ref::Gates<T>& gates,
                                                const ChunkOptions<T>& opt = {});

/// @}

}  // namespace linattn::cpu
