/// reference/recurrent_backward.hpp -- the reference backward of the sequence-level recurrences.
///
/// For a loss L with known dL/do (`do_`, [B, T, H, V]) and dL/dS_T (`dht`, [N, H, K, V], optional),
/// naive_recurrent_<op>_backward returns dL/d(every input): q, k, v, the log-decays g, beta (or b
/// and w) and the initial state. It is the reverse-time recurrence of the per-token update, in the
/// paper's notation (W = S^T in R^{d_v x d_phi}; docs/derivation-backward.md derives every line):
///
/// ~~~
///   forward, per token:  W~ = W_{t-1} D            D = Diag(alpha), alpha = exp(g)       (Eq.21)
///                        e = b (.) kappa,  z = w (.) v                                   (Eq.22)
///                        r = z - W~ e                                                    (Eq.23)
///                        W_t = W~ + r kappa^T                                            (Eq.24)
///                        y_t = W_t x_t          x_t = scale q_t                          (Eq.8)
///   backward, t = T..1, carrying dW (= dL/dW_t; starts at dht^T):
///                        dW += dy x^T;           dx = W_t^T dy
///                        dr = dW kappa;          dkappa = dW^T r
///                        dz = dr;  de = -W~^T dr; dW~ = dW - dr e^T
///                        dw = dz (.) v;  dv = dz (.) w;  db = de (.) kappa;  dkappa += de (.) b
///                        dg_j = sum_i dW~_ij W~_ij  (= alpha_j dL/dalpha_j);  dW_{t-1} = dW~ D
///   and dh0 = dW_0^T.
/// ~~~
///
/// GDN2 is the general case; the others are specialisations of the gates (exact, by the chain rule):
/// ~~~
///   KDA  b = w = beta 1            -> dbeta = sum_j db_j + sum_i dw_i
///   GDN  as KDA, alpha = exp(g) 1  -> dg = sum_j dg_j
///   DeltaNet  as GDN with alpha = 1;   linear attention: alpha = 1, b = 0, w = 1.
/// ~~~
/// The forward states are recomputed inside with the forward's own per-token steps
/// (reference/delta_rules.hpp) and kept, O(T d_v d_phi) memory per head. use_qk_l2norm is supported
/// (chain rule through l2_normalize, eps 1e-6). Proven by finite differences in
/// proofs_tests/test_gradcheck_reference.cpp.
/// @file
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "reference/check.hpp"
#include "reference/delta_rules.hpp"
#include "reference/layers_backward.hpp"
#include "reference/recurrent.hpp"

namespace linattn::ref {

/// @addtogroup backward
/// @{

/// Gradients of one token's update and read.
template <class T>
struct StepGrads {
  Vec<T> dx;      ///< [d_phi] wrt the read vector x = scale q (Eq.8)
  Vec<T> dkappa;  ///< [d_phi]
  Vec<T> dv;      ///< [d_v]
  Vec<T> dg;      ///< [d_phi] wrt g = log alpha_vec
  Vec<T> db;      ///< [d_phi]
  Vec<T> dw;      ///< [d_v]
};

/// The reverse of one GDN2 token, Eqs.21-24 and the read y = W_t x of Eq.8 (see the file comment).
/// `dW` [d_v, d_phi] holds dL/dW_t on entry (from later tokens and the final-state gradient) and
/// dL/dW_{t-1} on exit. W_prev is W_{t-1}; the token's intermediate values are recomputed from it.
template <class T>
StepGrads<T> gdn2_step_backward(const Tensor<T>& W_prev, const Vec<T>& kappa, const Vec<T>& v,
                                const Vec<T>& alpha_vec, const Vec<T>& b, const Vec<T>& w,
                                const Vec<T>& x, const Vec<T>& dy, const Tensor<T>& dW) {
  const std::string fn = "gdn2_step_backward";
  detail::check_W(fn, W_prev, kappa, v);
  const index_t dv_ = W_prev.size(0), dphi = W_prev.size(1);
  check_vec_range(fn, "alpha_vec", alpha_vec, dphi, 0.0, 1.0);
  check_vec(fn, "b", b, dphi);
  check_vec(fn, "w", w, dv_);
  check_vec(fn, "x", x, dphi);
  check_vec(fn, "dy", dy, dv_);
  check_shape(fn, "dW", dW, {dv_, dphi});

  // Forward, recomputed.
  Tensor<T> Wd({dv_, dphi});  // W~ = W_{t-1} D                                   (Eq.21)
  for (index_t i = 0; i < dv_; ++i)
    for (index_t j = 0; j < dphi; ++j) Wd(i, j) = W_prev(i, j) * alpha_vec[j];
  Vec<T> e(dphi), z(dv_);  // e = b (.) kappa, z = w (.) v                          (Eq.22)
  for (index_t j = 0; j < dphi; ++j) e[j] = b[j] * kappa[j];
  for (index_t i = 0; i < dv_; ++i) z[i] = w[i] * v[i];
  const Vec<T> We = read(Wd, e);
  Vec<T> r(dv_);  // r = z - W~ e                                                    (Eq.23)
  for (index_t i = 0; i < dv_; ++i) r[i] = z[i] - We[i];
  Tensor<T> Wt = Wd.clone();  // W_t = W~ + r kappa^T                              (Eq.24)
  add_outer(Wt, r, kappa);

  StepGrads<T> g;
  // Read, y = W_t x (Eq.8): dW_t += dy x^T, dx = W_t^T dy.
  add_outer(dW, dy, x);
  g.dx = read(transpose(Wt), dy);
  // Eq.24, W_t = W~ + r kappa^T: dr = dW_t kappa, dkappa = dW_t^T r, dW~ = dW_t (+ Eq.23 below).
  const Vec<T> dr = read(dW, kappa);
  g.dkappa = read(transpose(dW), r);
  // Eq.23, r = z - W~ e: dz = dr, de = -W~^T dr, dW~ -= dr e^T.
  const Vec<T> dz = dr;
  Vec<T> de = read(transpose(Wd), dr);
  for (T& t : de) t = -t;
  Vec<T> mdr(dr);
  for (T& t : mdr) t = -t;
  add_outer(dW, mdr, e);  // dW now holds dL/dW~
  // Eq.22, z = w (.) v and e = b (.) kappa.
  g.dw.resize(dv_), g.dv.resize(dv_), g.db.resize(dphi);
  for (index_t i = 0; i < dv_; ++i) g.dw[i] = dz[i] * v[i], g.dv[i] = dz[i] * w[i];
  for (index_t j = 0; j < dphi; ++j) g.db[j] = de[j] * kappa[j], g.dkappa[j] += de[j] * b[j];
  // Eq.21, W~ = W_{t-1} D with alpha = exp(g): dg_j = sum_i dW~_ij W~_ij, dW_{t-1} = dW~ D.
  g.dg.assign(dphi, T(0));
  for (index_t i = 0; i < dv_; ++i)
    for (index_t j = 0; j < dphi; ++j) {
      g.dg[j] += dW(i, j) * Wd(i, j);
      dW(i, j) *= alpha_vec[j];
    }
  return g;
}

/// Gradients of a sequence-level call. Only those of the operator's inputs are defined:
/// dg ([B,T,H] GDN; [B,T,H,K] KDA, GDN2), dbeta ([B,T,H] DeltaNet, GDN, KDA), db and dw (GDN2).
/// dh0 [N, H, K, V] is always given: the gradient wrt the initial state (zeros when none was given).
template <class T>
struct RecurrentGrads {
  Tensor<T> dq, dk, dv, dg, dbeta, db, dw, dh0;
};

namespace detail {

/// One token's gates as GDN2 gates (alpha_vec, b, w): the specialisations of the file comment.
template <class T>
void gdn2_gates_of(Op op, const Gates<T>& gt, index_t bb, index_t t, index_t h, index_t K,
                   index_t V, Vec<T>& alpha, Vec<T>& b, Vec<T>& w) {
  alpha.assign(K, T(1)), b.assign(K, T(0)), w.assign(V, T(1));  // linear attention
  if (op == Op::linear_attn) return;
  if (op == Op::gdn2) {
    for (index_t i = 0; i < K; ++i) b[i] = gt.b(bb, t, h, i);
    for (index_t j = 0; j < V; ++j) w[j] = gt.w(bb, t, h, j);
  } else {
    b.assign(K, gt.beta(bb, t, h)), w.assign(V, gt.beta(bb, t, h));
  }
  if (op == Op::gated_delta_rule) alpha.assign(K, std::exp(gt.g(bb, t, h)));
  if (op == Op::kda || op == Op::gdn2)
    for (index_t i = 0; i < K; ++i) alpha[i] = std::exp(gt.g(bb, t, h, i));
}

/// Advance W by one token with the forward's own per-token step (reference/delta_rules.hpp).
template <class T>
void forward_step(Op op, const Tensor<T>& W, const Vec<T>& kappa, const Vec<T>& v,
                  const Vec<T>& alpha, const Vec<T>& b, const Vec<T>& w) {
  switch (op) {
    case Op::linear_attn: linear_attention_step(W, kappa, v); return;
    case Op::delta_rule: deltanet_step(W, kappa, v, b[0]); return;
    case Op::gated_delta_rule: gdn_step(W, kappa, v, alpha[0], b[0]); return;
    case Op::kda: kda_step(W, kappa, v, alpha, b[0]); return;
    case Op::gdn2: gdn2_step(W, kappa, v, alpha, b, w); return;
  }
}

template <class T>
RecurrentGrads<T> recurrent_backward(const std::string& fn, Op op, const Tensor<T>& q,
                                     const Tensor<T>& k, const Tensor<T>& v, const Gates<T>& gt,
                                     const Tensor<T>& do_, const Tensor<T>& dht,
                                     const RecurrentOptions<T>& opt) {
  const index_t N = validate_recurrent(fn, op, q, k, v, gt, opt);
  const index_t B = q.size(0), Tn = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  check_shape(fn, "do", do_, {B, Tn, H, V});
  check_finite(fn, "do", do_);
  if (dht.defined()) {
    check_shape(fn, "dht", dht, {N, H, K, V});
    check_finite(fn, "dht", dht);
  }
  const T scale = opt.scale ? *opt.scale : T(1) / std::sqrt(T(K));
  const bool packed = !opt.cu_seqlens.empty();

  RecurrentGrads<T> gr;
  gr.dq = Tensor<T>({B, Tn, H, K});
  gr.dk = Tensor<T>({B, Tn, H, K});
  gr.dv = Tensor<T>({B, Tn, H, V});
  gr.dh0 = Tensor<T>({N, H, K, V});
  if (op == Op::gated_delta_rule) gr.dg = Tensor<T>({B, Tn, H});
  if (op == Op::kda || op == Op::gdn2) gr.dg = Tensor<T>({B, Tn, H, K});
  if (op == Op::delta_rule || op == Op::gated_delta_rule || op == Op::kda)
    gr.dbeta = Tensor<T>({B, Tn, H});
  if (op == Op::gdn2) gr.db = Tensor<T>({B, Tn, H, K}), gr.dw = Tensor<T>({B, Tn, H, V});

  for (index_t n = 0; n < N; ++n) {
    const index_t bb = packed ? 0 : n;
    const index_t t0 = packed ? opt.cu_seqlens[n] : 0;
    const index_t t1 = packed ? opt.cu_seqlens[n + 1] : Tn;
    for (index_t h = 0; h < H; ++h) {
      // Pass 1: the forward, keeping each token's W_{t-1}, kappa and GDN2 gates.
      struct Token {
        Tensor<T> W_prev;
        Vec<T> kappa, alpha, b, w;
      };
      std::vector<Token> tok;
      Tensor<T> W({V, K});
      if (opt.initial_state.defined())
        for (index_t i = 0; i < K; ++i)
          for (index_t j = 0; j < V; ++j) W(j, i) = opt.initial_state(n, h, i, j);
      for (index_t t = t0; t < t1; ++t) {
        Token tk;
        tk.kappa.resize(K);
        Vec<T> vt(V);
        for (index_t i = 0; i < K; ++i) tk.kappa[i] = k(bb, t, h, i);
        for (index_t j = 0; j < V; ++j) vt[j] = v(bb, t, h, j);
        if (opt.use_qk_l2norm) tk.kappa = l2_normalize(tk.kappa);
        gdn2_gates_of(op, gt, bb, t, h, K, V, tk.alpha, tk.b, tk.w);
        tk.W_prev = W.clone();
        try {  // inputs were validated: inside the loop only an overflow fails the steps' checks
          forward_step(op, W, tk.kappa, vt, tk.alpha, tk.b, tk.w);
        } catch (const Error& e) {
          throw overflow_error(fn, op, n, h, t - t0, e.what());
        }
        tok.push_back(std::move(tk));
      }
      // Pass 2: backwards in time, dW = dL/dW_t starting from the final-state gradient.
      Tensor<T> dW({V, K});
      if (dht.defined())
        for (index_t i = 0; i < K; ++i)
          for (index_t j = 0; j < V; ++j) dW(j, i) = dht(n, h, i, j);
      for (index_t t = t1 - 1; t >= t0; --t) {
        const Token& tk = tok[t - t0];
        Vec<T> qt(K), vt(V), dy(V);
        for (index_t i = 0; i < K; ++i) qt[i] = q(bb, t, h, i);
        for (index_t j = 0; j < V; ++j) vt[j] = v(bb, t, h, j), dy[j] = do_(bb, t, h, j);
        Vec<T> x = opt.use_qk_l2norm ? l2_normalize(qt) : qt;
        for (T& xi : x) xi *= scale;
        StepGrads<T> sg;
        try {
          sg = gdn2_step_backward(tk.W_prev, tk.kappa, vt, tk.alpha, tk.b, tk.w, x, dy, dW);
        } catch (const Error& e) {
          throw overflow_error(fn + " (backward in time)", op, n, h, t - t0, e.what());
        }
        for (T& d : sg.dx) d *= scale;  // x = scale q_hat
        if (opt.use_qk_l2norm) {
          Vec<T> kt(K);
          for (index_t i = 0; i < K; ++i) kt[i] = k(bb, t, h, i);
          sg.dx = l2_normalize_backward(qt, sg.dx), sg.dkappa = l2_normalize_backward(kt, sg.dkappa);
        }
        for (index_t i = 0; i < K; ++i) gr.dq(bb, t, h, i) = sg.dx[i], gr.dk(bb, t, h, i) = sg.dkappa[i];
        for (index_t j = 0; j < V; ++j) gr.dv(bb, t, h, j) = sg.dv[j];
        // The gate specialisations, reduced by the chain rule.
        T sum_db = 0, sum_dw = 0, sum_dg = 0;
        for (index_t i = 0; i < K; ++i) sum_db += sg.db[i], sum_dg += sg.dg[i];
        for (index_t j = 0; j < V; ++j) sum_dw += sg.dw[j];
        if (gr.dbeta.defined()) gr.dbeta(bb, t, h) = sum_db + sum_dw;
        if (op == Op::gated_delta_rule) gr.dg(bb, t, h) = sum_dg;
        if (op == Op::kda || op == Op::gdn2)
          for (index_t i = 0; i < K; ++i) gr.dg(bb, t, h, i) = sg.dg[i];
        if (op == Op::gdn2) {
          for (index_t i = 0; i < K; ++i) gr.db(bb, t, h, i) = sg.db[i];
          for (index_t j = 0; j < V; ++j) gr.dw(bb, t, h, j) = sg.dw[j];
        }
      }
      for (index_t i = 0; i < K; ++i)
        for (index_t j = 0; j < V; ++j) gr.dh0(n, h, i, j) = dW(j, i);  // dS_0 = dW_0^T
    }
  }
  // A gradient summed from finite terms can still overflow: say so rather than return it.
  require_finite_results<T>(fn, op, /*backward=*/true,
                         {{"dq", &gr.dq}, {"dk", &gr.dk}, {"dv", &gr.dv}, {"dg", &gr.dg}, {"dbeta", &gr.dbeta},
                          {"db", &gr.db}, {"dw", &gr.dw}, {"dh0", &gr.dh0}});
  return gr;
}
}  // namespace detail

/// Backward of naive_recurrent_linear_attn (Eqs.4-5, 8). Gives dq, dk, dv, dh0.
template <class T>
RecurrentGrads<T> naive_recurrent_linear_attn_backward(const Tensor<T>& q, const Tensor<T>& k,
                                                       const Tensor<T>& v, const Tensor<T>& do_,
                                                       const Tensor<T>& dht,
                                                       const RecurrentOptions<T>& opt = {}) {
  return detail::recurrent_backward<T>("naive_recurrent_linear_attn_backward", Op::linear_attn, q,
                                       k, v, {}, do_, dht, opt);
}

/// Backward of naive_recurrent_delta_rule (Eq.14). Gives dq, dk, dv, dbeta, dh0.
template <class T>
RecurrentGrads<T> naive_recurrent_delta_rule_backward(const Tensor<T>& q, const Tensor<T>& k,
                                                      const Tensor<T>& v, const Tensor<T>& beta,
                                                      const Tensor<T>& do_, const Tensor<T>& dht,
                                                      const RecurrentOptions<T>& opt = {}) {
  Gates<T> gt;
  gt.beta = beta;
  return detail::recurrent_backward<T>("naive_recurrent_delta_rule_backward", Op::delta_rule, q, k,
                                       v, gt, do_, dht, opt);
}

/// Backward of naive_recurrent_gated_delta_rule (Eqs.15-17). Gives dq, dk, dv, dg [B,T,H], dbeta, dh0.
template <class T>
RecurrentGrads<T> naive_recurrent_gated_delta_rule_backward(
    const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
    const Tensor<T>& beta, const Tensor<T>& do_, const Tensor<T>& dht,
    const RecurrentOptions<T>& opt = {}) {
  Gates<T> gt;
  gt.g = g;
  gt.beta = beta;
  return detail::recurrent_backward<T>("naive_recurrent_gated_delta_rule_backward",
                                       Op::gated_delta_rule, q, k, v, gt, do_, dht, opt);
}

/// Backward of naive_recurrent_kda (Eqs.18-20). Gives dq, dk, dv, dg [B,T,H,K], dbeta, dh0.
template <class T>
RecurrentGrads<T> naive_recurrent_kda_backward(const Tensor<T>& q, const Tensor<T>& k,
                                               const Tensor<T>& v, const Tensor<T>& g,
                                               const Tensor<T>& beta, const Tensor<T>& do_,
                                               const Tensor<T>& dht,
                                               const RecurrentOptions<T>& opt = {}) {
  Gates<T> gt;
  gt.g = g;
  gt.beta = beta;
  return detail::recurrent_backward<T>("naive_recurrent_kda_backward", Op::kda, q, k, v, gt, do_,
                                       dht, opt);
}

/// Backward of naive_recurrent_gdn2 (Eqs.21-24). Gives dq, dk, dv, dg [B,T,H,K], db, dw, dh0.
template <class T>
RecurrentGrads<T> naive_recurrent_gdn2_backward(const Tensor<T>& q, const Tensor<T>& k,
                                                const Tensor<T>& v, const Tensor<T>& g,
                                                const Tensor<T>& b, const Tensor<T>& w,
                                                const Tensor<T>& do_, const Tensor<T>& dht,
                                                const RecurrentOptions<T>& opt = {}) {
  Gates<T> gt;
  gt.g = g;
  gt.b = b;
  gt.w = w;
  return detail::recurrent_backward<T>("naive_recurrent_gdn2_backward", Op::gdn2, q, k, v, gt, do_,
                                       dht, opt);
}

/// @}

}  // namespace linattn::ref
