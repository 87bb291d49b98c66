/// reference/recurrent.hpp -- sequence-level naive recurrences in the kernel-library layout.
///
/// naive_recurrent_<op> runs the per-token steps of reference/delta_rules.hpp over whole batches
/// in the layout of SPEC section 1 (that of flash-linear-attention):
/// ~~~
///   q, k      [B, T, H, K]        v                 [B, T, H, V]
///   g (GDN)   [B, T, H]           g (KDA, GDN2)     [B, T, H, K]   log-space decays, g = log alpha <= 0
///   beta      [B, T, H]           b (GDN2) [B,T,H,K], w (GDN2) [B,T,H,V]   in [0, 1]
///   state     [N, H, K, V]  (S = W^T; N = B, or the number of packed sequences)
///   o         [B, T, H, V]  o_t = S_t^T (scale q_t) = W_t (scale q_t)   (Eq.8: reads the NEW state)
/// ~~~
/// `scale` multiplies q (default K^-1/2; the paper's equations use scale 1). Packed variable-length
/// batches: B = 1 and cu_seqlens = [0, t_1, ..., T] (fla's convention); each sequence starts from its
/// own initial state and yields its own final state.
///
/// Each head's state is converted S -> W on entry and W -> S on exit (a transpose, exact), and the
/// tokens run through the paper-notation steps, so the layouts agree exactly by construction.
/// Optionally the per-token trace (v_bar, r, written; each [B, T, H, V]) is returned: the values and
/// errors that the cross-layer routing schemes of Sec.4 consume.
/// @file
#pragma once

#include <cmath>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reference/check.hpp"
#include "reference/delta_rules.hpp"
#include "reference/feature_maps.hpp"

namespace linattn::ref {

/// The options of every sequence-level call (fla's keyword arguments).
/// @ingroup sequence
template <class T>
struct RecurrentOptions {
  std::optional<T> scale;             ///< multiplies q; default K^-1/2
  Tensor<T> initial_state;            ///< [N, H, K, V] or undefined (zeros)
  bool output_final_state = false;    ///< fill RecurrentOutput::final_state
  std::vector<index_t> cu_seqlens;    ///< packed sequence offsets (B must be 1); empty = none
  bool use_qk_l2norm = false;         ///< L2-normalise q and k per head (eps 1e-6) inside
  bool return_trace = false;          ///< fill v_bar, r, written
};

/// What a sequence-level call returns: o, the final state when asked, the trace when asked.
/// @ingroup sequence
template <class T>
struct RecurrentOutput {
  Tensor<T> o;            ///< [B, T, H, V]
  Tensor<T> final_state;  ///< [N, H, K, V] when requested
  Tensor<T> v_bar;        ///< [B, T, H, V] key read of the decayed old state (Eq.9/25)
  Tensor<T> r;            ///< [B, T, H, V] paper error v - v_bar (Eq.10/26): `paper_error`
  Tensor<T> written;      ///< [B, T, H, V] vector written along kappa: `written_error`
};

/// The operators of this project, from the most general down (GDN2 > KDA > GDN > DeltaNet > LA).
/// @ingroup sequence
enum class Op { linear_attn, delta_rule, gated_delta_rule, kda, gdn2 };

/// The fla-style name of an operator ("delta_rule", "gated_delta_rule", ...).
/// @ingroup sequence
inline const char* op_name(Op op) {
  switch (op) {
    case Op::linear_attn: return "linear_attn";
    case Op::delta_rule: return "delta_rule";
    case Op::gated_delta_rule: return "gated_delta_rule";
    case Op::kda: return "kda";
    case Op::gdn2: return "gdn2";
  }
  return "?";
}

/// The gate tensors of one call. Which are used depends on the operator.
/// @ingroup sequence
template <class T>
struct Gates {
  Tensor<T> g;     ///< GDN: [B,T,H]; KDA, GDN2: [B,T,H,K]
  Tensor<T> beta;  ///< DeltaNet, GDN, KDA: [B,T,H]
  Tensor<T> b;     ///< GDN2: [B,T,H,K]
  Tensor<T> w;     ///< GDN2: [B,T,H,V]
};

/// Validate every argument of a sequence-level call; returns the number of sequences N.
/// Shared by the reference and the optimized kernels so that all report errors the same way.
/// @ingroup sequence
template <class T>
index_t validate_recurrent(const std::string& fn, Op op, const Tensor<T>& q, const Tensor<T>& k,
                           const Tensor<T>& v, const Gates<T>& gates,
                           const RecurrentOptions<T>& opt) {
  check_rank(fn, "q", q, 4);
  const index_t B = q.size(0), Tn = q.size(1), H = q.size(2), K = q.size(3);
  check_positive(fn, "q.shape[2] (H)", H);
  check_positive(fn, "q.shape[3] (K)", K);
  check_shape(fn, "k", k, {B, Tn, H, K});
  check_rank(fn, "v", v, 4);
  check_shape(fn, "v", v, {B, Tn, H, -1});
  const index_t V = v.size(3);
  check_positive(fn, "v.shape[3] (V)", V);
  check_finite(fn, "q", q);
  check_finite(fn, "k", k);
  check_finite(fn, "v", v);
  if (op == Op::gated_delta_rule) {
    check_shape(fn, "g", gates.g, {B, Tn, H});
  } else if (op == Op::kda || op == Op::gdn2) {
    check_shape(fn, "g", gates.g, {B, Tn, H, K});
  }
  if (op == Op::gated_delta_rule || op == Op::kda || op == Op::gdn2)
    check_range(fn, "g", gates.g, -INFINITY, 0.0, /*lo_open=*/true);  // log alpha: finite, <= 0
  if (op == Op::delta_rule || op == Op::gated_delta_rule || op == Op::kda) {
    check_shape(fn, "beta", gates.beta, {B, Tn, H});
    check_range(fn, "beta", gates.beta, 0.0, 1.0);
  }
  if (op == Op::gdn2) {
    check_shape(fn, "b", gates.b, {B, Tn, H, K});
    check_range(fn, "b", gates.b, 0.0, 1.0);
    check_shape(fn, "w", gates.w, {B, Tn, H, V});
    check_range(fn, "w", gates.w, 0.0, 1.0);
  }
  const index_t N = check_offsets(fn, opt.cu_seqlens, B, Tn);
  if (opt.initial_state.defined()) {
    check_shape(fn, "initial_state", opt.initial_state, {N, H, K, V});
    check_finite(fn, "initial_state", opt.initial_state);
  }
  if (opt.scale && !std::isfinite(*opt.scale))
    fail(fn, "scale", "a finite value", num_str(*opt.scale));
  return N;
}

/// The error for a result that left the range of T although every input was finite (validated first), in the
/// usual "argument ... expected ... but got ..." form, with the usual cause: with the delta rule the state grows
/// when beta ||k||^2 > 2 (the transition I - beta k k^T then has an eigenvalue below -1, SPEC section 2), which
/// unnormalised keys reach quickly. `backward`: the cotangents may be the cause too; `where` says where.
inline Error overflow_error(const std::string& fn, Op op, bool backward, const std::string& where) {
  const bool delta = op != Op::linear_attn;
  return Error(fn + ": argument '" + (delta ? "k, beta" : "q, k, v") + "'" +
               (backward ? " (or the cotangents 'do', 'dht')" : "") + " expected " +
               (delta ? "a state that stays within the floating-point range (the delta rule's state grows when "
                        "beta ||k||^2 > 2: normalise the keys with use_qk_l2norm, or lower beta)"
                      : "values small enough for the floating-point range") +
               " but got an overflow" + where);
}

/// overflow_error at one token of the per-token loop; `what` is the step's own error.
inline Error overflow_error(const std::string& fn, Op op, index_t n, index_t h, index_t t, const std::string& what) {
  return overflow_error(fn, op, false, " at sequence " + std::to_string(n) + ", head " + std::to_string(h) +
                                           ", token " + std::to_string(t) + " [" + what + "]");
}

/// The results of a call whose inputs were all finite must be finite too; a value that is not came from an
/// overflow (overflow_error). One pass over each result, after the computation, so that no caller gets a silent
/// NaN or Inf. `what` names the results, e.g. {{"o", &out.o}, {"final_state", &out.final_state}}; undefined ones
/// are skipped. `also` is appended to the message: a further cause the caller knows of (the CUDA host functions name
/// an element no kernel wrote). Used by the reference backward, the CPU kernels (optimized/cpu) and the CUDA host
/// functions (optimized/cuda/chunk_cuda.cu).
template <class T>
void require_finite_results(const std::string& fn, Op op, bool backward,
                            std::initializer_list<std::pair<const char*, const Tensor<T>*>> what,
                            const std::string& also = "") {
  for (const auto& [name, t] : what) {
    if (!t->defined()) continue;
    const T* p = t->data();
    for (index_t i = 0, n = t->numel(); i < n; ++i)
      if (!std::isfinite(p[i]))
        throw overflow_error(fn, op, backward,
                             ": '" + std::string(name) + "' of shape " + shape_str(t->shape()) + " is not finite at " +
                                 index_str(t->shape(), i) + " although every input is finite" + also);
  }
}

/// The general driver: validate, then for each sequence and head run `step` token by token.
/// step(W, kappa, v, t_abs, b, h) updates W in place and returns the StepTrace.
/// Per token: \f$ W_t = \mathrm{step}(W_{t-1}, k_t, v_t) \f$, then \f$ o_t = W_t\,(\mathrm{scale}\; q_t) \f$ (Eq.8).
/// @ingroup sequence
template <class T, class Step>
RecurrentOutput<T> run_recurrent(const std::string& fn, Op op, const Tensor<T>& q,
                                 const Tensor<T>& k, const Tensor<T>& v, const Gates<T>& gates,
                                 const RecurrentOptions<T>& opt, Step step) {
  const index_t N = validate_recurrent(fn, op, q, k, v, gates, opt);
  const index_t B = q.size(0), Tn = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  const T scale = opt.scale ? *opt.scale : T(1) / std::sqrt(T(K));
  const bool packed = !opt.cu_seqlens.empty();

  RecurrentOutput<T> out;
  out.o = Tensor<T>({B, Tn, H, V});
  if (opt.output_final_state) out.final_state = Tensor<T>({N, H, K, V});
  if (opt.return_trace) {
    out.v_bar = Tensor<T>({B, Tn, H, V});
    out.r = Tensor<T>({B, Tn, H, V});
    out.written = Tensor<T>({B, Tn, H, V});
  }
  for (index_t n = 0; n < N; ++n) {
    const index_t bb = packed ? 0 : n;
    const index_t t0 = packed ? opt.cu_seqlens[n] : 0;
    const index_t t1 = packed ? opt.cu_seqlens[n + 1] : Tn;
    for (index_t h = 0; h < H; ++h) {
      Tensor<T> W({V, K});  // the paper's memory, W = S^T
      if (opt.initial_state.defined())
        for (index_t i = 0; i < K; ++i)
          for (index_t j = 0; j < V; ++j) W(j, i) = opt.initial_state(n, h, i, j);
      for (index_t t = t0; t < t1; ++t) {
        Vec<T> qt(K), kt(K), vt(V);
        for (index_t i = 0; i < K; ++i) qt[i] = q(bb, t, h, i), kt[i] = k(bb, t, h, i);
        for (index_t j = 0; j < V; ++j) vt[j] = v(bb, t, h, j);
        if (opt.use_qk_l2norm) qt = l2_normalize(qt), kt = l2_normalize(kt);
        StepTrace<T> tr;
        Vec<T> y;
        try {  // the steps check that what they are given is finite: inside the loop, only an overflow fails
          tr = step(W, kt, vt, bb, t, h);
          for (index_t i = 0; i < K; ++i) qt[i] *= scale;
          y = read(W, qt);  // Eq.8: y_t = W_t (scale q_t), the NEW state
          for (index_t j = 0; j < V; ++j)
            if (!std::isfinite(y[j])) throw Error("o[" + std::to_string(j) + "] = " + std::to_string(y[j]));
        } catch (const Error& e) {
          throw overflow_error(fn, op, n, h, t - t0, e.what());
        }
        for (index_t j = 0; j < V; ++j) {
          out.o(bb, t, h, j) = y[j];
          if (opt.return_trace) {
            out.v_bar(bb, t, h, j) = tr.v_bar[j];
            out.r(bb, t, h, j) = tr.r[j];
            out.written(bb, t, h, j) = tr.written[j];
          }
        }
      }
      if (opt.output_final_state)
        for (index_t i = 0; i < K; ++i)
          for (index_t j = 0; j < V; ++j) out.final_state(n, h, i, j) = W(j, i);
    }
  }
  return out;
}

/// Linear attention (Eqs.4-5, 8) over a batch: S_t = S_{t-1} + k_t v_t^T, o_t = S_t^T (scale q_t).
/// q and k are taken as phi(q), phi(k) already (apply feature_map() first for other maps).
/// @param q     [B, T, H, K] queries (multiplied by opt.scale inside)
/// @param k     [B, T, H, K] keys
/// @param v     [B, T, H, V] values
/// @param opt   scale, initial state [N, H, K, V], final state, cu_seqlens, qk L2 norm, trace
/// @return o [B, T, H, V]; the final state and the trace (v_bar, r, written) when asked
/// @ingroup linear_attention
template <class T>
RecurrentOutput<T> naive_recurrent_linear_attn(const Tensor<T>& q, const Tensor<T>& k,
                                               const Tensor<T>& v,
                                               const RecurrentOptions<T>& opt = {}) {
  return run_recurrent<T>("naive_recurrent_linear_attn", Op::linear_attn, q, k, v, {}, opt,
                          [](const Tensor<T>& W, const Vec<T>& kap, const Vec<T>& vt, index_t,
                             index_t, index_t) { return linear_attention_step(W, kap, vt); });
}

/// DeltaNet (Eq.14) over a batch. beta [B, T, H] in [0, 1].
/// @param q     [B, T, H, K] queries (multiplied by opt.scale inside)
/// @param k     [B, T, H, K] keys
/// @param v     [B, T, H, V] values
/// @param beta  [B, T, H] write strengths in [0, 1]
/// @param opt   scale, initial state [N, H, K, V], final state, cu_seqlens, qk L2 norm, trace
/// @return o [B, T, H, V]; the final state and the trace (v_bar, r, written) when asked
/// @ingroup deltanet
template <class T>
RecurrentOutput<T> naive_recurrent_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                              const Tensor<T>& v, const Tensor<T>& beta,
                                              const RecurrentOptions<T>& opt = {}) {
  Gates<T> gt;
  gt.beta = beta;
  return run_recurrent<T>("naive_recurrent_delta_rule", Op::delta_rule, q, k, v, gt, opt,
                          [&](const Tensor<T>& W, const Vec<T>& kap, const Vec<T>& vt, index_t b,
                              index_t t, index_t h) {
                            return deltanet_step(W, kap, vt, beta(b, t, h));
                          });
}

/// Gated DeltaNet (Eqs.15-17) over a batch. g [B, T, H] = log alpha <= 0; beta [B, T, H].
/// @param q     [B, T, H, K] queries (multiplied by opt.scale inside)
/// @param k     [B, T, H, K] keys
/// @param v     [B, T, H, V] values
/// @param g     [B, T, H] log-decays g = log alpha <= 0
/// @param beta  [B, T, H] write strengths in [0, 1]
/// @param opt   scale, initial state [N, H, K, V], final state, cu_seqlens, qk L2 norm, trace
/// @return o [B, T, H, V]; the final state and the trace (v_bar, r, written) when asked
/// @ingroup gdn
template <class T>
RecurrentOutput<T> naive_recurrent_gated_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                                    const Tensor<T>& v, const Tensor<T>& g,
                                                    const Tensor<T>& beta,
                                                    const RecurrentOptions<T>& opt = {}) {
  Gates<T> gt;
  gt.g = g;
  gt.beta = beta;
  return run_recurrent<T>("naive_recurrent_gated_delta_rule", Op::gated_delta_rule, q, k, v, gt,
                          opt,
                          [&](const Tensor<T>& W, const Vec<T>& kap, const Vec<T>& vt, index_t b,
                              index_t t, index_t h) {
                            return gdn_step(W, kap, vt, std::exp(g(b, t, h)), beta(b, t, h));
                          });
}

/// Kimi Delta Attention (Eqs.18-20) over a batch. g [B, T, H, K] = log alpha_vec <= 0 per key
/// channel; beta [B, T, H].
/// @param q     [B, T, H, K] queries (multiplied by opt.scale inside)
/// @param k     [B, T, H, K] keys
/// @param v     [B, T, H, V] values
/// @param g     [B, T, H, K] per-key-channel log-decays <= 0
/// @param beta  [B, T, H] write strengths in [0, 1]
/// @param opt   scale, initial state [N, H, K, V], final state, cu_seqlens, qk L2 norm, trace
/// @return o [B, T, H, V]; the final state and the trace (v_bar, r, written) when asked
/// @ingroup kda
template <class T>
RecurrentOutput<T> naive_recurrent_kda(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                       const Tensor<T>& g, const Tensor<T>& beta,
                                       const RecurrentOptions<T>& opt = {}) {
  Gates<T> gt;
  gt.g = g;
  gt.beta = beta;
  const index_t K = q.dim() == 4 ? q.size(3) : 0;
  return run_recurrent<T>("naive_recurrent_kda", Op::kda, q, k, v, gt, opt,
                          [&](const Tensor<T>& W, const Vec<T>& kap, const Vec<T>& vt, index_t b,
                              index_t t, index_t h) {
                            Vec<T> a(K);
                            for (index_t i = 0; i < K; ++i) a[i] = std::exp(g(b, t, h, i));
                            return kda_step(W, kap, vt, a, beta(b, t, h));
                          });
}

/// Gated DeltaNet-2 (Eqs.21-24) over a batch. g [B, T, H, K] log-decays; b [B, T, H, K] erase
/// gates; w [B, T, H, V] write gates.
/// @param q     [B, T, H, K] queries (multiplied by opt.scale inside)
/// @param k     [B, T, H, K] keys
/// @param v     [B, T, H, V] values
/// @param g     [B, T, H, K] per-key-channel log-decays <= 0
/// @param b     [B, T, H, K] erase gates in [0, 1]
/// @param w     [B, T, H, V] write gates in [0, 1]
/// @param opt   scale, initial state [N, H, K, V], final state, cu_seqlens, qk L2 norm, trace
/// @return o [B, T, H, V]; the final state and the trace (v_bar, r, written) when asked
/// @ingroup gdn2
template <class T>
RecurrentOutput<T> naive_recurrent_gdn2(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                        const Tensor<T>& g, const Tensor<T>& b, const Tensor<T>& w,
                                        const RecurrentOptions<T>& opt = {}) {
  Gates<T> gt;
  gt.g = g;
  gt.b = b;
  gt.w = w;
  const index_t K = q.dim() == 4 ? q.size(3) : 0, V = v.dim() == 4 ? v.size(3) : 0;
  return run_recurrent<T>("naive_recurrent_gdn2", Op::gdn2, q, k, v, gt, opt,
                          [&](const Tensor<T>& W, const Vec<T>& kap, const Vec<T>& vt, index_t bb,
                              index_t t, index_t h) {
                            Vec<T> a(K), be(K), we(V);
                            for (index_t i = 0; i < K; ++i)
                              a[i] = std::exp(g(bb, t, h, i)), be[i] = b(bb, t, h, i);
                            for (index_t j = 0; j < V; ++j) we[j] = w(bb, t, h, j);
                            return gdn2_step(W, kap, vt, a, be, we);
                          });
}

}  // namespace linattn::ref
