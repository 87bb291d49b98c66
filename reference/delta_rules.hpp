/// reference/delta_rules.hpp -- one token of every fast-weight update, written like the paper.
///
/// Notation (SPEC section 1): the memory W in R^{d_v x d_phi} maps key features to values;
/// kappa = phi(k) in R^{d_phi}; v in R^{d_v}. Each step updates W in place and returns what it
/// read and wrote, so a reader (or the routing schemes of Sec.4) can see the error:
/// ~~~
///   v_bar   = the key read of the (decayed) old state          (Eq.9,  Eq.25)
///   r       = v - v_bar, the paper's write error                (Eq.10, Eq.26)
///   written = the vector that multiplies kappa^T in the update  (beta r; GDN2: Eq.23's r)
/// ~~~
///
/// Decays: the paper has alpha in (0, 1]; alpha = 0 (full forgetting, the limit of a very negative
/// log-gate g = log alpha, where exp(g) underflows) is accepted too, so the range checked is [0, 1].
///
/// These are the ground truth. They are deliberately naive: explicit loops, one token at a time,
/// no cleverness. The chunked and CUDA kernels are checked against them.
/// @file
#pragma once

#include <string>
#include <vector>

#include "reference/check.hpp"

namespace linattn::ref {

template <class T>
using Vec = std::vector<T>;

/// What one token's update read and wrote.
/// @ingroup readwrite
template <class T>
struct StepTrace {
  Vec<T> v_bar;    ///< read of the (decayed) old state with the key, Eq.9 / Eq.25
  Vec<T> r;        ///< paper's error r = v - v_bar, Eq.10 / Eq.26
  Vec<T> written;  ///< vector written along kappa: W_i = W~ + written kappa^T
};

// ---------------------------------------------------------------------------------------------
// Small building blocks (each a line of the paper).
// ---------------------------------------------------------------------------------------------

/// y = W x (W is d_v x d_phi, x in R^{d_phi}). Eq.8 with x = phi(q); Eq.9 with x = kappa.
/// Note the order: Eq.3 of the PDF prints phi(q)^T W, which does not type-check for
/// W in R^{d_v x d_phi}; the correct read is W phi(q) (SPEC section 7, erratum 1).
/// \f$ y = W x \f$, \f$ W \in \mathbb{R}^{d_v \times d_\phi} \f$.
/// @ingroup readwrite
template <class T>
Vec<T> read(const Tensor<T>& W, const Vec<T>& x) {
  check_rank("read", "W", W, 2);
  check_finite("read", "W", W);
  check_vec("read", "x", x, W.size(1));
  Vec<T> y(static_cast<size_t>(W.size(0)), T(0));
  for (index_t i = 0; i < W.size(0); ++i)
    for (index_t j = 0; j < W.size(1); ++j) y[i] += W(i, j) * x[j];
  return y;
}

/// W <- W + a b^T (outer-product write).
/// \f$ W \leftarrow W + a b^\top \f$.
/// @ingroup readwrite
template <class T>
void add_outer(const Tensor<T>& W, const Vec<T>& a, const Vec<T>& b) {
  check_rank("add_outer", "W", W, 2);
  check_vec("add_outer", "a", a, W.size(0));
  check_vec("add_outer", "b", b, W.size(1));
  for (index_t i = 0; i < W.size(0); ++i)
    for (index_t j = 0; j < W.size(1); ++j) W(i, j) += a[i] * b[j];
}

namespace detail {
template <class T>
void check_W(const std::string& fn, const Tensor<T>& W, const Vec<T>& kappa, const Vec<T>& v) {
  check_rank(fn, "W", W, 2);
  check_finite(fn, "W", W);
  check_vec(fn, "kappa", kappa, W.size(1));
  check_vec(fn, "v", v, W.size(0));
}
template <class T>
StepTrace<T> trace(const Vec<T>& v, Vec<T> v_bar) {
  StepTrace<T> tr;
  tr.r.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) tr.r[i] = v[i] - v_bar[i];
  tr.v_bar = std::move(v_bar);
  return tr;
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// The updates.
// ---------------------------------------------------------------------------------------------

/// Linear attention (Eqs.4-5): W_i = W_{i-1} + v_i kappa_i^T. Trace: v_bar = W_{i-1} kappa
/// (Eq.9), r = v - v_bar (Eq.10), written = v.
/// \f$ W_i = W_{i-1} + v_i \kappa_i^\top \f$.
/// @param W       [d_v, d_phi] the memory W_{i-1}, updated in place to W_i
/// @param kappa   [d_phi] the key features phi(k)
/// @param v       [d_v] the value
/// @return the StepTrace: v_bar, r and the vector written along kappa
/// @ingroup linear_attention
template <class T>
StepTrace<T> linear_attention_step(const Tensor<T>& W, const Vec<T>& kappa, const Vec<T>& v) {
  detail::check_W("linear_attention_step", W, kappa, v);
  StepTrace<T> tr = detail::trace(v, read(W, kappa));
  tr.written = v;
  add_outer(W, v, kappa);
  return tr;
}

/// DeltaNet (Eq.14): v_bar = W_{i-1} kappa (Eq.9), r = v - v_bar (Eq.10),
/// W_i = W_{i-1} + beta r kappa^T  [= W_{i-1}(I - beta kappa kappa^T) + beta v kappa^T].
/// One gradient step with learning rate beta on L(W) = 1/2 ||W kappa - v||^2.
/// \f$ W_i = W_{i-1} + \beta\, (v - W_{i-1}\kappa)\, \kappa^\top \f$.
/// @param W       [d_v, d_phi] the memory W_{i-1}, updated in place to W_i
/// @param kappa   [d_phi] the key features phi(k)
/// @param v       [d_v] the value
/// @param beta    write strength in [0, 1]
/// @return the StepTrace: v_bar, r and the vector written along kappa
/// @ingroup deltanet
template <class T>
StepTrace<T> deltanet_step(const Tensor<T>& W, const Vec<T>& kappa, const Vec<T>& v, T beta) {
  detail::check_W("deltanet_step", W, kappa, v);
  check_scalar_range("deltanet_step", "beta", beta, 0.0, 1.0);
  StepTrace<T> tr = detail::trace(v, read(W, kappa));
  tr.written.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) tr.written[i] = beta * tr.r[i];
  add_outer(W, tr.written, kappa);
  return tr;
}

/// Gated DeltaNet (Eqs.15-17), decay FIRST, then the error against the decayed state:
/// v_bar = alpha W_{i-1} kappa (Eq.15), r = v - v_bar (Eq.16), W_i = alpha W_{i-1} + beta r kappa^T
/// (Eq.17). alpha in (0, 1] is a scalar per head and token.
/// \f$ W_i = \alpha W_{i-1} + \beta\, (v - \alpha W_{i-1}\kappa)\, \kappa^\top \f$.
/// @param W       [d_v, d_phi] the memory W_{i-1}, updated in place to W_i
/// @param kappa   [d_phi] the key features phi(k)
/// @param v       [d_v] the value
/// @param alpha   decay in [0, 1], applied before the read
/// @param beta    write strength in [0, 1]
/// @return the StepTrace: v_bar, r and the vector written along kappa
/// @ingroup gdn
template <class T>
StepTrace<T> gdn_step(const Tensor<T>& W, const Vec<T>& kappa, const Vec<T>& v, T alpha, T beta) {
  detail::check_W("gdn_step", W, kappa, v);
  check_scalar_range("gdn_step", "alpha", alpha, 0.0, 1.0);
  check_scalar_range("gdn_step", "beta", beta, 0.0, 1.0);
  for (T& x : W) x *= alpha;  // W~ = alpha W_{i-1}
  StepTrace<T> tr = detail::trace(v, read(W, kappa));
  tr.written.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) tr.written[i] = beta * tr.r[i];
  add_outer(W, tr.written, kappa);
  return tr;
}

/// A deliberately WRONG Gated DeltaNet, kept only so the tests can show it differs from Eq.15-17
/// whenever alpha != 1: the error is computed from the undecayed state (r = v - W_{i-1} kappa)
/// and the decay is applied afterwards. Never use it for anything else.
/// @ingroup gdn
template <class T>
StepTrace<T> gdn_step_decay_after_error(const Tensor<T>& W, const Vec<T>& kappa, const Vec<T>& v,
                                        T alpha, T beta) {
  detail::check_W("gdn_step_decay_after_error", W, kappa, v);
  check_scalar_range("gdn_step_decay_after_error", "alpha", alpha, 0.0, 1.0);
  check_scalar_range("gdn_step_decay_after_error", "beta", beta, 0.0, 1.0);
  StepTrace<T> tr = detail::trace(v, read(W, kappa));  // undecayed read
  for (T& x : W) x *= alpha;
  tr.written.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) tr.written[i] = beta * tr.r[i];
  add_outer(W, tr.written, kappa);
  return tr;
}

/// Kimi Delta Attention (Eqs.18-20): D = Diag(alpha_vec), alpha_vec in (0,1]^{d_phi} per key
/// feature, multiplying W on the RIGHT (the key-feature side):
/// v_bar = W_{i-1} D kappa (Eq.18), r = v - v_bar (Eq.19), W_i = W_{i-1} D + beta r kappa^T (Eq.20).
/// \f$ W_i = W_{i-1} D + \beta\, (v - W_{i-1} D \kappa)\, \kappa^\top \f$ with
/// \f$ D = \mathrm{Diag}(\boldsymbol\alpha) \f$.
/// @param W       [d_v, d_phi] the memory W_{i-1}, updated in place to W_i
/// @param kappa   [d_phi] the key features phi(k)
/// @param v       [d_v] the value
/// @param alpha_vec [d_phi] per-key-feature decays in [0, 1]
/// @param beta    write strength in [0, 1]
/// @return the StepTrace: v_bar, r and the vector written along kappa
/// @ingroup kda
template <class T>
StepTrace<T> kda_step(const Tensor<T>& W, const Vec<T>& kappa, const Vec<T>& v,
                      const Vec<T>& alpha_vec, T beta) {
  detail::check_W("kda_step", W, kappa, v);
  check_vec_range("kda_step", "alpha_vec", alpha_vec, W.size(1), 0.0, 1.0);
  check_scalar_range("kda_step", "beta", beta, 0.0, 1.0);
  for (index_t i = 0; i < W.size(0); ++i)
    for (index_t j = 0; j < W.size(1); ++j) W(i, j) *= alpha_vec[j];  // W~ = W_{i-1} D
  StepTrace<T> tr = detail::trace(v, read(W, kappa));
  tr.written.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) tr.written[i] = beta * tr.r[i];
  add_outer(W, tr.written, kappa);
  return tr;
}

/// Gated DeltaNet-2 (Eqs.21-24): W~ = W_{i-1} D (Eq.21); erase direction e = b (.) kappa with
/// b in [0,1]^{d_phi}; write target z = w (.) v with w in [0,1]^{d_v} (Eq.22);
/// r_gdn2 = z - W~ e (Eq.23); W_i = W~ + r_gdn2 kappa^T (Eq.24; the outer product uses kappa, not e).
/// Trace: v_bar = W~ kappa, r = v - v_bar (the plain read error of Eqs.25-26 on the decayed state),
/// written = r_gdn2. With b = w = beta 1 this is exactly KDA's trace.
/// \f$ \tilde W = W_{i-1} D \f$,
/// \f$ W_i = \tilde W + \big(w \odot v - \tilde W (b \odot \kappa)\big)\, \kappa^\top \f$.
/// @param W       [d_v, d_phi] the memory W_{i-1}, updated in place to W_i
/// @param kappa   [d_phi] the key features phi(k)
/// @param v       [d_v] the value
/// @param alpha_vec [d_phi] per-key-feature decays in [0, 1]
/// @param b       [d_phi] erase gates in [0, 1]
/// @param w       [d_v] write gates in [0, 1]
/// @return the StepTrace: v_bar, r and the vector written along kappa
/// @ingroup gdn2
template <class T>
StepTrace<T> gdn2_step(const Tensor<T>& W, const Vec<T>& kappa, const Vec<T>& v,
                       const Vec<T>& alpha_vec, const Vec<T>& b, const Vec<T>& w) {
  detail::check_W("gdn2_step", W, kappa, v);
  check_vec_range("gdn2_step", "alpha_vec", alpha_vec, W.size(1), 0.0, 1.0);
  check_vec_range("gdn2_step", "b", b, W.size(1), 0.0, 1.0);
  check_vec_range("gdn2_step", "w", w, W.size(0), 0.0, 1.0);
  for (index_t i = 0; i < W.size(0); ++i)
    for (index_t j = 0; j < W.size(1); ++j) W(i, j) *= alpha_vec[j];  // W~ = W_{i-1} D
  StepTrace<T> tr = detail::trace(v, read(W, kappa));
  Vec<T> e(kappa.size()), z(v.size());
  for (size_t j = 0; j < kappa.size(); ++j) e[j] = b[j] * kappa[j];
  for (size_t i = 0; i < v.size(); ++i) z[i] = w[i] * v[i];
  const Vec<T> We = read(W, e);
  tr.written.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) tr.written[i] = z[i] - We[i];
  add_outer(W, tr.written, kappa);
  return tr;
}

// ---------------------------------------------------------------------------------------------
// The kernel-library layout S = W^T in R^{K x V} (SPEC section 1).
// ---------------------------------------------------------------------------------------------

/// S = W^T and back: the conversion between the paper's memory and the kernels' state.
/// @ingroup readwrite
template <class T>
Tensor<T> transpose(const Tensor<T>& M) {
  check_rank("transpose", "M", M, 2);
  Tensor<T> R({M.size(1), M.size(0)});
  for (index_t i = 0; i < M.size(0); ++i)
    for (index_t j = 0; j < M.size(1); ++j) R(j, i) = M(i, j);
  return R;
}
/// S = W^T: the paper's memory to the kernels' state (exact).
/// @ingroup readwrite
template <class T>
Tensor<T> W_to_S(const Tensor<T>& W) {
  check_rank("W_to_S", "W", W, 2);
  return transpose(W);
}
/// W = S^T: the kernels' state to the paper's memory (exact).
/// @ingroup readwrite
template <class T>
Tensor<T> S_to_W(const Tensor<T>& S) {
  check_rank("S_to_W", "S", S, 2);
  return transpose(S);
}

/// GDN2 written the way kernel libraries write it (Eq.24 transposed):
/// S_t = (I - k (b (.) k)^T) Diag(alpha) S_{t-1} + k (w (.) v)^T, read o = S^T q.
/// Independent of gdn2_step's code path, so the tests can compare the two layouts.
/// \f$ S_t = \big(I - k (b \odot k)^\top\big) \mathrm{Diag}(\boldsymbol\alpha) S_{t-1} + k (w \odot v)^\top \f$.
/// @ingroup gdn2
template <class T>
void gdn2_step_S(const Tensor<T>& S, const Vec<T>& k, const Vec<T>& v, const Vec<T>& alpha_vec,
                 const Vec<T>& b, const Vec<T>& w) {
  const std::string fn = "gdn2_step_S";
  check_rank(fn, "S", S, 2);
  check_finite(fn, "S", S);
  check_vec(fn, "k", k, S.size(0));
  check_vec(fn, "v", v, S.size(1));
  check_vec_range(fn, "alpha_vec", alpha_vec, S.size(0), 0.0, 1.0);
  check_vec_range(fn, "b", b, S.size(0), 0.0, 1.0);
  check_vec_range(fn, "w", w, S.size(1), 0.0, 1.0);
  const index_t K = S.size(0), V = S.size(1);
  for (index_t i = 0; i < K; ++i)
    for (index_t j = 0; j < V; ++j) S(i, j) *= alpha_vec[i];  // Diag(alpha) S (rows)
  Vec<T> eS(static_cast<size_t>(V), T(0));                     // (b (.) k)^T S~
  for (index_t i = 0; i < K; ++i)
    for (index_t j = 0; j < V; ++j) eS[j] += b[i] * k[i] * S(i, j);
  for (index_t i = 0; i < K; ++i)
    for (index_t j = 0; j < V; ++j) S(i, j) += k[i] * (w[j] * v[j] - eS[j]);
}

}  // namespace linattn::ref
