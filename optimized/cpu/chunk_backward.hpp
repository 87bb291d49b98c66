/// optimized/cpu/chunk_backward.hpp -- chunked (UT-transform) backward kernels for DeltaNet, Gated
/// DeltaNet, KDA and Gated DeltaNet-2 on the CPU, in float and double (SPEC section 4, "Backward").
///
/// Same inputs, options and result as the reference backward (reference/recurrent_backward.hpp):
/// given dL/do (`do_`, [B, T, H, V]) and optionally dL/dS_T (`dht`, [N, H, K, V]; undefined = 0),
/// return RecurrentGrads{dq, dk, dv, dg, dbeta, db, dw, dh0} for the inputs of the forward call
/// chunk_<op>(...) with the same options (scale, initial_state, cu_seqlens, use_qk_l2norm). Fields
/// that an operator does not have stay undefined, exactly as in the reference.
///
/// How (as the chunked libraries do): pass 1 runs the chunked forward and keeps only the state
/// entering each chunk; pass 2 walks the chunks in reverse, recomputes the chunk's quantities
/// (G, L, A = (I + L)^-1, w_aux, u, v_new, the causal scores P) from that state, and pulls the
/// gradient back through o and S' to v_new and the entering state, through the UT transform to L,
/// e, u0, and through the decays to the cumulative gates G, whose gradient becomes dg by a reverse
/// cumulative sum. optimized/cpu/chunk_backward.cpp implements the stages, each next to its
/// equation; docs/derivation-backward.md, section "Chunked backward", derives every line.
/// All arithmetic is in the input's precision (float: float32 states, gates and inverse).
///
/// Trace cotangents (CLER / CLER-H, SPEC section 3): optionally dL/dwritten (`dwritten`) and
/// dL/dv_bar (`dv_bar`), each [B, T, H, V] (undefined = 0), of the trace that the forward returns
/// with return_trace; the gradients are then those of
/// L = <do, o> + <dht, S_T> + <dwritten, written> + <dv_bar, v_bar>
/// (for the paper error r = v - v_bar: pass dv_bar = -dr and add dr to dv).
///
/// Threads: OpenMP over (sequence, head) pairs (opt.num_threads; 0 = OpenMP's default); the result
/// does not depend on the thread count. Errors: the forward's checks (ref::validate_recurrent,
/// chunk_size, num_threads), then do_ and dht as in the reference backward, then dwritten and
/// dv_bar (shape [B, T, H, V], finite) when defined.
/// @file
#pragma once

#include "optimized/cpu/chunk.hpp"
#include "reference/recurrent_backward.hpp"

namespace linattn::cpu {

/// @addtogroup backward
/// @{

/// Backward of chunk_delta_rule (Eq.14). Gives dq, dk, dv, dbeta, dh0.
template <class T>
ref::RecurrentGrads<T> chunk_delta_rule_backward(const Tensor<T>& q, const Tensor<T>& k,
                                                 const Tensor<T>& v, const Tensor<T>& beta,
                                                 const Tensor<T>& do_, const Tensor<T>& dht,
                                                 const ChunkOptions<T>& opt = {},
    const Tensor<T>& dwritten = Tensor<T>(), const Tensor<T>& dv_bar = Tensor<T>());

/// Backward of chunk_gated_delta_rule (Eqs.15-17). Gives dq, dk, dv, dg [B,T,H], dbeta, dh0.
template <class T>
ref::RecurrentGrads<T> chunk_gated_delta_rule_backward(const Tensor<T>& q, const Tensor<T>& k,
                                                       const Tensor<T>& v, const Tensor<T>& g,
                                                       const Tensor<T>& beta, const Tensor<T>& do_,
                                                       const Tensor<T>& dht,
                                                       const ChunkOptions<T>& opt = {},
    const Tensor<T>& dwritten = Tensor<T>(), const Tensor<T>& dv_bar = Tensor<T>());

/// Backward of chunk_kda (Eqs.18-20). Gives dq, dk, dv, dg [B,T,H,K], dbeta, dh0.
template <class T>
ref::RecurrentGrads<T> chunk_kda_backward(const Tensor<T>& q, const Tensor<T>& k,
                                          const Tensor<T>& v, const Tensor<T>& g,
                                          const Tensor<T>& beta, const Tensor<T>& do_,
                                          const Tensor<T>& dht, const ChunkOptions<T>& opt = {},
    const Tensor<T>& dwritten = Tensor<T>(), const Tensor<T>& dv_bar = Tensor<T>());

/// Backward of chunk_gdn2 (Eqs.21-24). Gives dq, dk, dv, dg [B,T,H,K], db, dw, dh0.
template <class T>
ref::RecurrentGrads<T> chunk_gdn2_backward(const Tensor<T>& q, const Tensor<T>& k,
                                           const Tensor<T>& v, const Tensor<T>& g,
                                           const Tensor<T>& b, const Tensor<T>& w,
                                           const Tensor<T>& do_, const Tensor<T>& dht,
                                           const ChunkOptions<T>& opt = {},
    const Tensor<T>& dwritten = Tensor<T>(), const Tensor<T>& dv_bar = Tensor<T>());

/// Any of the four operators by name (op = Op::linear_attn is rejected); the gates that `op`
/// uses are taken from `gates`, as in chunk_forward.
template <class T>
ref::RecurrentGrads<T> chunk_backward(ref::Op op, const Tensor<T>& q, const Tensor<T>& k,
                                      const Tensor<T>& v, const ref::Gates<T>& gates,
                                      const Tensor<T>& do_, const Tensor<T>& dht,
                                      const ChunkOptions<T>& opt = {},
    const Tensor<T>& dwritten = Tensor<T>(), const Tensor<T>& dv_bar = Tensor<T>());

/// @}

}  // namespace linattn::cpu
