/// optimized/cpu/fused_recurrent.hpp -- the tuned token-by-token ("fused recurrent") CPU forward
/// kernels for DeltaNet, GDN, KDA and GDN2: the fair baseline for the chunked kernels of chunk.hpp.
///
/// Same layout, options, results and error checks as the naive reference
/// (reference/recurrent.hpp, whose validate_recurrent they call). They run the same per-token
/// recurrence, S_t = (I - k_t e_t^T) Diag(alpha_t) S_{t-1} + k_t u0_t^T, o_t = S_t^T (scale q_t),
/// but vectorised and with the state kept in L1: the value columns of S are independent (every
/// delta rule updates column c from column c alone), so each thread holds a K x 64 column block
/// of one head's state and runs all the tokens through it, one pass over the block per token
/// (update, read o_t, and the next token's error read, fused). float and double; OpenMP over
/// (sequence, head) pairs (OpenMP's default thread count). return_trace is supported.
/// @file
#pragma once

#include "reference/recurrent.hpp"

namespace linattn::cpu {

/// @addtogroup cpu_kernels
/// @{

/// DeltaNet (Eq.14), token by token. beta [B, T, H].
template <class T>
ref::RecurrentOutput<T> fused_recurrent_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                                   const Tensor<T>& v, const Tensor<T>& beta,
                                                   const ref::RecurrentOptions<T>& opt = {});

/// Gated DeltaNet (Eqs.15-17), token by token. g [B, T, H], beta [B, T, H].
template <class T>
ref::RecurrentOutput<T> fused_recurrent_gated_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                                         const Tensor<T>& v, const Tensor<T>& g,
                                                         const Tensor<T>& beta,
                                                         const ref::RecurrentOptions<T>& opt = {});

/// Kimi Delta Attention (Eqs.18-20), token by token. g [B, T, H, K], beta [B, T, H].
template <class T>
ref::RecurrentOutput<T> fused_recurrent_kda(const Tensor<T>& q, const Tensor<T>& k,
                                            const Tensor<T>& v, const Tensor<T>& g,
                                            const Tensor<T>& beta,
                                            const ref::RecurrentOptions<T>& opt = {});

/// Gated DeltaNet-2 (Eqs.21-24), token by token. g [B, T, H, K], b [B, T, H, K], w [B, T, H, V].
template <class T>
ref::RecurrentOutput<T> fused_recurrent_gdn2(const Tensor<T>& q, const Tensor<T>& k,
                                             const Tensor<T>& v, const Tensor<T>& g,
                                             const Tensor<T>& b, const Tensor<T>& w,
                                             const ref::RecurrentOptions<T>& opt = {});

/// Any of the four operators by name (Op::linear_attn is rejected).
template <class T>
ref::RecurrentOutput<T> fused_recurrent_forward(ref::Op op, const Tensor<T>& q,
                                                const Tensor<T>& k, const Tensor<T>& v,
                                                const ref::Gates<T>& gates,
                                                const ref::RecurrentOptions<T>& opt = {});

/// @}

}  // namespace linattn::cpu
