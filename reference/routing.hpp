/// reference/routing.hpp -- cross-layer routing (Sec.4, SPEC section 3): CLER, CLER-H, CLVR, and
/// the smallest stack of layers on which their stack-level claims can be stated and tested.
///
/// ~~~
///   CLER   (Eqs.27-28)      v~_l = v_l + Gamma_l rho(r_{p(l)}): the error of the nearest lower
///                           linear layer p(l) joins layer l's value target; layer l then computes
///                           its own error against v~_l. Gamma_l is a scalar, initialised to 0.
///   CLER-H (Eq.29, s = r)   h <- h + P_l r_l after every linear layer l.
///   CLVR   (Eq.29, s = v)   h <- h + P_l v_l, the full write value (not beta-scaled).
/// ~~~
///
/// Layouts: per-token signals as in recurrent.hpp, v, r [B, T, H, V]; the residual stream
/// h [B, T, d_model]; P [d_model, H*V] acts on s flattened per token in head-major order
/// (element (h, j) of a token is entry h*V + j), so eps = P s. Low rank: P = U D with
/// U [d_model, r], D [r, H*V] (the paper notes' U_l D_l; d_model is never called D here).
/// "The error" r is either the paper's or the beta-scaled written one: see RoutedError.
///
/// Everything is naive and per token; nothing here is fast. Bad input throws linattn::Error
/// naming the argument and the expected and actual value; no argument is ever modified.
/// @file
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reference/check.hpp"
#include "reference/recurrent.hpp"
#include "reference/softmax_attention.hpp"

namespace linattn::ref {

/// @addtogroup routing
/// @{

// ---------------------------------------------------------------------------------------------
// Layer kinds and the routable predecessor p(l).
// ---------------------------------------------------------------------------------------------

/// Only linear-attention layers are routable (they have a write error); softmax layers are not.
enum class LayerKind { softmax, linear };

inline const char* to_string(LayerKind k) { return k == LayerKind::softmax ? "softmax" : "linear"; }

namespace detail {
inline void check_kinds(const std::string& fn, const std::vector<LayerKind>& kinds) {
  for (size_t l = 0; l < kinds.size(); ++l)
    if (kinds[l] != LayerKind::softmax && kinds[l] != LayerKind::linear)
      fail(fn, "kinds", "LayerKind::softmax or LayerKind::linear",
           "the value " + std::to_string(static_cast<int>(kinds[l])) + " at layer " +
               std::to_string(l));
}
inline std::vector<LayerKind> kinds_where(const std::string& fn, index_t L,
                                          bool (*softmax)(index_t)) {
  check_positive(fn, "L", L);
  std::vector<LayerKind> k(static_cast<size_t>(L));
  for (index_t i = 0; i < L; ++i) k[i] = softmax(i) ? LayerKind::softmax : LayerKind::linear;
  return k;
}
}  // namespace detail

/// Hybrid stack (SPEC section 5): layer i (0-based) is softmax iff (i + 1) % 3 == 0, i.e. blocks
/// of [linear, linear, softmax]: 2 linear : 1 softmax. Erratum 4 (SPEC section 7): a reproduction
/// note of the authors calls this 3:1; the authors' code gives 2:1, as here. L = 20: 6 softmax.
inline std::vector<LayerKind> hybrid_layer_kinds(index_t L) {
  return detail::kinds_where("hybrid_layer_kinds", L, [](index_t i) { return (i + 1) % 3 == 0; });
}
/// Pure stack: every layer linear.
inline std::vector<LayerKind> pure_layer_kinds(index_t L) {
  return detail::kinds_where("pure_layer_kinds", L, [](index_t) { return false; });
}
/// Dense stack: every layer softmax.
inline std::vector<LayerKind> dense_layer_kinds(index_t L) {
  return detail::kinds_where("dense_layer_kinds", L, [](index_t) { return true; });
}

/// p(l) of Sec.4.2 for every layer l: the nearest lower linear layer, -1 if there is none.
/// Softmax layers are skipped and do not reset the carried signal (p of the layer after a softmax
/// is the linear layer below that softmax). p(l) is defined for every l, but only linear layers
/// consume it: softmax layers neither produce nor receive routed errors.
inline std::vector<index_t> routable_predecessor(const std::vector<LayerKind>& kinds) {
  detail::check_kinds("routable_predecessor", kinds);
  std::vector<index_t> p(kinds.size());
  index_t last = -1;  // the highest linear layer seen so far
  for (size_t l = 0; l < kinds.size(); ++l) {
    p[l] = last;
    if (kinds[l] == LayerKind::linear) last = static_cast<index_t>(l);
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// What is routed: the error, and rho.
// ---------------------------------------------------------------------------------------------

/// Which "error" CLER and CLER-H carry (SPEC section 3, "What the error is").
///   paper_error    r = v - v_bar (Eqs.26, 28): the `r` of the recurrence trace. The default.
///   written_error  what the kernel writes along kappa: the trace's `written`, beta r for
///                  DeltaNet/GDN/KDA (Eq.23's r for GDN2). The authors' training code routes this.
/// Erratum 3 (SPEC section 7): the official code routes e_t = beta_t (v_t - alpha_t W_{t-1}
/// kappa_t), beta-scaled and with the decayed read, not the paper's r. Erratum 6: Sec.4's Eqs.25-28
/// write the read undecayed, W_{t-1} kappa_t; for GDN-family hosts the implemented read is decayed
/// (Eq.15). Both options here use the decayed read, because the trace of recurrent.hpp does.
/// Every result must say which option it used.
enum class RoutedError { paper_error, written_error };

inline const char* to_string(RoutedError e) {
  return e == RoutedError::paper_error ? "paper_error" : "written_error";
}

/// The routed error of one layer from its recurrence trace (run with return_trace = true).
template <class T>
Tensor<T> routed_error(const RecurrentOutput<T>& trace, RoutedError which) {
  const std::string fn = "routed_error";
  if (!trace.r.defined() || !trace.written.defined())
    fail(fn, "trace", "a trace with r and written (run the recurrence with return_trace = true)",
         "a RecurrentOutput without them");
  if (which == RoutedError::paper_error) return trace.r;
  if (which == RoutedError::written_error) return trace.written;
  fail(fn, "which", "RoutedError::paper_error or RoutedError::written_error",
       "the value " + std::to_string(static_cast<int>(which)));
}

/// rho of Eq.27: the map applied to the routed error before it is added.
enum class Rho { identity, rms_norm };

inline const char* to_string(Rho r) { return r == Rho::identity ? "identity" : "rms_norm"; }

/// x / sqrt(mean(x^2) + eps) over the last dimension, with no learned weight. For [B, T, H, V]
/// that is per token and head over d_v; for the residual stream [B, T, d_model], per token.
/// eps (default 1e-6, as the authors' RMSNorm) keeps an all-zero row at 0 instead of 0/0.
/// `fn` names the caller in errors (rho() passes its own name).
template <class T>
Tensor<T> rms_normalize(const Tensor<T>& x, T eps = T(1e-6), const std::string& fn = "rms_normalize") {
  if (!x.defined() || x.dim() < 1)
    fail(fn, "x", "a tensor of rank >= 1", x.defined() ? "a 0-D tensor" : "an undefined tensor");
  if (!(std::isfinite(eps) && eps > 0)) fail(fn, "eps", "a finite value > 0", num_str(eps));
  check_finite(fn, "x", x);
  const index_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  Tensor<T> y(x.shape());
  for (index_t i = 0; i < rows; ++i) {
    const T* xr = x.data() + i * n;
    T ms = 0;
    for (index_t j = 0; j < n; ++j) ms += xr[j] * xr[j];
    const T inv = T(1) / std::sqrt(ms / T(n) + eps);
    for (index_t j = 0; j < n; ++j) y.data()[i * n + j] = xr[j] * inv;
  }
  return y;
}

/// rho(x) (Eq.27): identity (the paper's main setting; returns a copy) or RMS-normalisation per
/// token and head over d_v (rms_normalize, eps as given).
template <class T>
Tensor<T> rho(Rho kind, const Tensor<T>& x, T eps = T(1e-6)) {
  if (!x.defined()) fail("rho", "x", "a tensor", "an undefined tensor");
  if (kind == Rho::identity) {
    check_finite("rho", "x", x);
    return x.clone();
  }
  if (kind == Rho::rms_norm) return rms_normalize(x, eps, "rho");
  fail("rho", "kind", "Rho::identity or Rho::rms_norm",
       "the value " + std::to_string(static_cast<int>(kind)));
}

// ---------------------------------------------------------------------------------------------
// CLER: value-target injection (Eqs.27-28).
// ---------------------------------------------------------------------------------------------

/// Eq.27: v~ = v + Gamma rho(r_prev) for every token and head. v, r_prev [B, T, H, V]; Gamma a
/// scalar (per layer, initialised to 0). Eq.28, the receiving layer's own error
/// r = v~ - v_bar, is then computed by that layer's recurrence run on v~ (recurrent.hpp's trace).
template <class T>
Tensor<T> cler_inject(const Tensor<T>& v, const Tensor<T>& r_prev, T Gamma,
                      Rho rho_kind = Rho::identity, T eps = T(1e-6)) {
  const std::string fn = "cler_inject";
  check_rank(fn, "v", v, 4);
  check_shape(fn, "r_prev", r_prev, v.shape());
  check_finite(fn, "v", v);
  check_finite(fn, "r_prev", r_prev);
  if (!std::isfinite(Gamma)) fail(fn, "Gamma", "a finite value", num_str(Gamma));
  const Tensor<T> routed = rho(rho_kind, r_prev, eps);
  Tensor<T> v_tilde(v.shape());
  for (index_t i = 0; i < v.numel(); ++i)
    v_tilde.data()[i] = v.data()[i] + Gamma * routed.data()[i];
  return v_tilde;
}

// ---------------------------------------------------------------------------------------------
// CLER-H and CLVR: projection into the residual stream (Eq.29).
// ---------------------------------------------------------------------------------------------

/// P_l of Eq.29, full or low rank. Exactly one of the two forms is set.
template <class T>
struct Projection {
  Tensor<T> P;     ///< full: [d_model, H*V]
  Tensor<T> U, D;  ///< low rank P = U D: U [d_model, r], D [r, H*V]
  bool low_rank() const { return U.defined() || D.defined(); }
};

namespace detail {
/// y = M x for every token: M [m, n], x [B, T, ...] holding n elements per token -> y [B, T, m].
template <class T>
Tensor<T> per_token_matvec(const std::string& fn, const std::string& arg, const Tensor<T>& M,
                           const Tensor<T>& x) {
  const index_t BT = x.size(0) * x.size(1);
  index_t n = 1;  // the per-token length: the trailing dims (known even when B or T is 0)
  for (index_t d = 2; d < x.dim(); ++d) n *= x.size(d);
  check_shape(fn, arg, M, {-1, n});
  const index_t m = M.size(0);
  Tensor<T> y({x.size(0), x.size(1), m});
  for (index_t t = 0; t < BT; ++t)
    for (index_t i = 0; i < m; ++i) {
      T acc = 0;
      for (index_t j = 0; j < n; ++j) acc += M.data()[i * n + j] * x.data()[t * n + j];
      y.data()[t * m + i] = acc;
    }
  return y;
}

/// A rows x cols matrix (acting on cols-vectors) of normal draws with std cols^-1/2 (fan-in). Drawn
/// in double and rounded to T, so a seed gives the same weights for every scalar type.
template <class T>
Tensor<T> random_matrix(std::mt19937_64& rng, index_t rows, index_t cols) {
  std::normal_distribution<double> nd(0.0, 1.0 / std::sqrt(double(cols)));
  Tensor<T> t({rows, cols});
  for (T& x : t) x = static_cast<T>(nd(rng));
  return t;
}

template <class T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  Tensor<T> y(a.shape());
  for (index_t i = 0; i < a.numel(); ++i) y.data()[i] = a.data()[i] + b.data()[i];
  return y;
}

/// Messages name the fields of a Projection called `arg` arg.P, arg.U, arg.D (plain P, U, D when
/// `arg` is empty: the tensor overloads of residual_inject).
inline std::string field_name(const std::string& arg, const char* field) {
  return arg.empty() ? std::string(field) : arg + "." + field;
}

template <class T>
void check_projection(const std::string& fn, const std::string& arg, const Projection<T>& proj,
                      index_t d_model, index_t HV) {
  auto name = [&](const char* field) { return field_name(arg, field); };
  if (!proj.low_rank()) {
    check_shape(fn, name("P"), proj.P, {d_model, HV});
    check_finite(fn, name("P"), proj.P);
    return;
  }
  if (proj.P.defined())
    fail(fn, arg, "either a full P or low-rank factors U, D", "both P and U or D");
  check_rank(fn, name("U"), proj.U, 2);
  check_shape(fn, name("U"), proj.U, {d_model, -1});
  check_positive(fn, name("U") + ".shape[1] (rank r)", proj.U.size(1));
  check_shape(fn, name("D"), proj.D, {proj.U.size(1), HV});
  check_finite(fn, name("U"), proj.U);
  check_finite(fn, name("D"), proj.D);
}

/// Validate h [B, T, d_model] and s [B, T, H, V]; returns H*V.
template <class T>
index_t check_residual_args(const std::string& fn, const Tensor<T>& h, const Tensor<T>& s) {
  check_rank(fn, "h", h, 3);
  check_rank(fn, "s", s, 4);
  check_shape(fn, "s", s, {h.size(0), h.size(1), -1, -1});
  check_finite(fn, "h", h);
  check_finite(fn, "s", s);
  return s.size(2) * s.size(3);
}

/// h + P s (full) or h + U (D s) (low rank, P never formed); arguments already validated.
template <class T>
Tensor<T> inject(const std::string& fn, const std::string& arg, const Tensor<T>& h,
                 const Tensor<T>& s, const Projection<T>& proj) {
  const Tensor<T> eps =
      proj.low_rank() ? per_token_matvec(fn, field_name(arg, "U"), proj.U,
                                         per_token_matvec(fn, field_name(arg, "D"), proj.D, s))
                      : per_token_matvec(fn, field_name(arg, "P"), proj.P, s);
  return add(h, eps);
}
}  // namespace detail

/// Eq.29: h + eps with eps = P s for every token. h [B, T, d_model], s [B, T, H, V] (s = r for
/// CLER-H, s = v for CLVR), P [d_model, H*V]. Returns a new tensor.
template <class T>
Tensor<T> residual_inject(const Tensor<T>& h, const Tensor<T>& s, const Tensor<T>& P) {
  const std::string fn = "residual_inject";
  const index_t HV = detail::check_residual_args(fn, h, s);
  Projection<T> proj;
  proj.P = P;
  detail::check_projection(fn, "", proj, h.size(2), HV);
  return detail::inject(fn, "", h, s, proj);
}

/// Eq.29 with low-rank P = U D: h + U (D s), never forming P. U [d_model, r], D [r, H*V].
template <class T>
Tensor<T> residual_inject(const Tensor<T>& h, const Tensor<T>& s, const Tensor<T>& U,
                          const Tensor<T>& D) {
  const std::string fn = "residual_inject";
  const index_t HV = detail::check_residual_args(fn, h, s);
  Projection<T> proj;
  proj.U = U;
  proj.D = D;
  if (!U.defined()) fail(fn, "U", "a tensor of shape [d_model, r]", "an empty tensor");
  detail::check_projection(fn, "", proj, h.size(2), HV);
  return detail::inject(fn, "", h, s, proj);
}

/// Eq.29 with either form of P.
template <class T>
Tensor<T> residual_inject(const Tensor<T>& h, const Tensor<T>& s, const Projection<T>& P) {
  const std::string fn = "residual_inject";
  const index_t HV = detail::check_residual_args(fn, h, s);
  detail::check_projection(fn, "P", P, h.size(2), HV);
  return detail::inject(fn, "P", h, s, P);
}

/// The paper's initialisation: a full P = 0 [d_model, HV] (HV = H*V), so a routed model equals
/// its baseline at initialisation.
template <class T>
Projection<T> zero_projection(index_t d_model, index_t HV) {
  check_positive("zero_projection", "d_model", d_model);
  check_positive("zero_projection", "HV", HV);
  Projection<T> proj;
  proj.P = Tensor<T>({d_model, HV});
  return proj;
}

/// Which factor of P = U D starts at zero.
enum class ZeroFactor { U, D };

/// Low-rank P = U D of rank r with the product zero at initialisation: the factor `zero` is 0 and
/// the other is random normal with standard deviation fan_in^-1/2 (seeded; random_matrix).
/// Not both zero: with eps = U D s and upstream gradient g = dLoss/deps, dLoss/dU = g (D s)^T and
/// dLoss/dD = U^T g s^T, so each factor's gradient is proportional to the other factor; with both
/// zero, both gradients vanish and gradient descent never moves them (P stays 0 forever). With one
/// zero, the zero factor gets a non-zero gradient at the first step and learning starts.
template <class T>
Projection<T> low_rank_projection(index_t d_model, index_t HV, index_t rank, std::uint64_t seed,
                                  ZeroFactor zero = ZeroFactor::U) {
  const std::string fn = "low_rank_projection";
  check_positive(fn, "d_model", d_model);
  check_positive(fn, "HV", HV);
  check_positive(fn, "rank", rank);
  if (zero != ZeroFactor::U && zero != ZeroFactor::D)
    fail(fn, "zero", "ZeroFactor::U or ZeroFactor::D",
         "the value " + std::to_string(static_cast<int>(zero)));
  std::mt19937_64 rng(seed);
  Projection<T> proj;
  proj.U = zero == ZeroFactor::U ? Tensor<T>({d_model, rank})
                                 : detail::random_matrix<T>(rng, d_model, rank);
  proj.D = zero == ZeroFactor::D ? Tensor<T>({rank, HV}) : detail::random_matrix<T>(rng, rank, HV);
  return proj;
}

// ---------------------------------------------------------------------------------------------
// A toy stack: the smallest model on which the stack-level claims of Sec.4 can be stated.
// ---------------------------------------------------------------------------------------------
//
// Each layer l, on the residual stream h [B, T, d_model]:
//   x = rms_normalize(h)                          (pre-norm, no learned weight; SPEC section 5)
//   q = Wq x, k = Wk x [.., H, K];  v = Wv x [.., H, V]
//   softmax layer:  o = naive_softmax_attn(q, k, v)           (Eq.1; no RoPE, no GQA)
//   linear layer:   beta = sigmoid(Wbeta x), g = -softplus(Wa x) [.., H]
//                   (a toy form of SPEC section 5's g = -exp(A_log) softplus(a + dt_bias))
//                   v~ = v + Gamma_l rho(e_{p(l)})   under CLER, when p(l) exists (Eq.27)
//                   o = naive_recurrent_gated_delta_rule (or delta_rule) on (q, k, v~), q and k
//                   L2-normalised, trace on; e_l = the routed error of this layer (RoutedError)
//   h <- h + Wo o                                 (residual add)
//   CLER-H: h <- h + P_l e_l;  CLVR: h <- h + P_l v_l   (linear layers only; Eq.29)
// No MLP: "after the whole layer" (SPEC section 3) is after the mixer's residual add here.

enum class Routing { none, cler, cler_h, clvr };
enum class Host { gated_delta_rule, delta_rule };

inline const char* to_string(Routing r) {
  switch (r) {
    case Routing::none: return "none";
    case Routing::cler: return "CLER";
    case Routing::cler_h: return "CLER-H";
    case Routing::clvr: return "CLVR";
  }
  return "?";
}

template <class T>
struct ToyLayer {
  LayerKind kind = LayerKind::linear;
  Tensor<T> Wq, Wk;     ///< [H*K, d_model]
  Tensor<T> Wv;         ///< [H*V, d_model]
  Tensor<T> Wbeta, Wa;  ///< [H, d_model], linear layers only (Wa: GDN host only)
  Tensor<T> Wo;         ///< [d_model, H*V]
  T Gamma = 0;          ///< CLER gain Gamma_l (Eq.27), initialised to 0
  Projection<T> P;      ///< CLER-H / CLVR projection P_l (Eq.29), linear layers; zero at init
};

/// What one layer computed. Softmax layers leave every field empty.
template <class T>
struct LayerRecord {
  Tensor<T> v;             ///< [B, T, H, V] the projected value Wv x
  Tensor<T> v_tilde;       ///< [B, T, H, V] the value written: Eq.27's v~ under CLER, else v
  Tensor<T> beta, g;       ///< [B, T, H] the gates (g empty for a DeltaNet host)
  RecurrentOutput<T> mix;  ///< o and the trace v_bar, r, written of the recurrence on v_tilde
  Tensor<T> error;         ///< [B, T, H, V] this layer's routed error: mix.r or mix.written
};

template <class T>
struct ToyRun {
  std::vector<Tensor<T>> h;           ///< h[0] the input, h[l + 1] the stream after layer l
  std::vector<LayerRecord<T>> layer;  ///< one per layer
  const Tensor<T>& out() const { return h.back(); }
};

template <class T>
struct ToyStack {
  index_t d_model = 0, H = 0, K = 0, V = 0;
  Host host = Host::gated_delta_rule;
  Routing routing = Routing::none;
  RoutedError error = RoutedError::paper_error;  ///< what CLER and CLER-H route
  Rho rho = Rho::identity;                       ///< CLER's rho (Eq.27)
  std::vector<ToyLayer<T>> layers;

  /// A stack with fixed random projections (normal, std fan_in^-1/2, seeded), Gamma_l = 0 and
  /// zero full P_l: at initialisation every routing mode computes the baseline.
  static ToyStack random(const std::vector<LayerKind>& kinds, index_t d_model, index_t H, index_t K,
                         index_t V, std::uint64_t seed, Host host = Host::gated_delta_rule) {
    const std::string fn = "ToyStack::random";
    if (kinds.empty()) fail(fn, "kinds", "at least one layer", "an empty vector");
    detail::check_kinds(fn, kinds);
    check_positive(fn, "d_model", d_model);
    check_positive(fn, "H", H);
    check_positive(fn, "K", K);
    check_positive(fn, "V", V);
    std::mt19937_64 rng(seed);
    auto normal = [&](index_t rows, index_t cols) {
      return detail::random_matrix<T>(rng, rows, cols);
    };
    ToyStack s;
    s.d_model = d_model, s.H = H, s.K = K, s.V = V, s.host = host;
    for (LayerKind kind : kinds) {
      ToyLayer<T> ly;
      ly.kind = kind;
      ly.Wq = normal(H * K, d_model);
      ly.Wk = normal(H * K, d_model);
      ly.Wv = normal(H * V, d_model);
      ly.Wo = normal(d_model, H * V);
      if (kind == LayerKind::linear) {
        ly.Wbeta = normal(H, d_model);
        if (host == Host::gated_delta_rule) ly.Wa = normal(H, d_model);
        ly.P = zero_projection<T>(d_model, H * V);
      }
      s.layers.push_back(std::move(ly));
    }
    return s;
  }

  std::vector<LayerKind> kinds() const {
    std::vector<LayerKind> k;
    for (const ToyLayer<T>& ly : layers) k.push_back(ly.kind);
    return k;
  }

  /// Run the stack on h0 [B, T, d_model]; returns every layer's stream and record.
  ToyRun<T> forward(const Tensor<T>& h0) const {
    const std::string fn = "ToyStack::forward";
    check_rank(fn, "h0", h0, 3);
    check_shape(fn, "h0", h0, {-1, -1, d_model});
    check_finite(fn, "h0", h0);
    if (layers.empty()) fail(fn, "layers", "at least one layer", "none");
    if (host != Host::gated_delta_rule && host != Host::delta_rule)
      fail(fn, "host", "Host::gated_delta_rule or Host::delta_rule",
           "the value " + std::to_string(static_cast<int>(host)));
    const std::vector<index_t> p = routable_predecessor(kinds());
    for (size_t l = 0; l < layers.size(); ++l) {  // routing parameters, before any work
      if (layers[l].kind != LayerKind::linear) continue;
      const std::string name = "layers[" + std::to_string(l) + "]";
      if (routing == Routing::cler && !std::isfinite(layers[l].Gamma))
        fail(fn, name + ".Gamma", "a finite value", num_str(layers[l].Gamma));
      if (routing == Routing::cler_h || routing == Routing::clvr)
        detail::check_projection(fn, name + ".P", layers[l].P, d_model, H * V);
    }
    const index_t B = h0.size(0), Tn = h0.size(1);
    auto sigmoid = [](T a) { return T(1) / (T(1) + std::exp(-a)); };
    auto softplus = [](T a) { return std::max(a, T(0)) + std::log1p(std::exp(-std::abs(a))); };
    auto map = [](Tensor<T> x, auto f) {
      for (T& e : x) e = f(e);
      return x;
    };

    ToyRun<T> run;
    run.h.push_back(h0.clone());
    run.layer.resize(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      const ToyLayer<T>& ly = layers[l];
      LayerRecord<T>& rec = run.layer[l];
      const std::string name = "layers[" + std::to_string(l) + "]";
      const Tensor<T> x = rms_normalize(run.h.back());
      const Tensor<T> q =
          detail::per_token_matvec(fn, name + ".Wq", ly.Wq, x).reshape({B, Tn, H, K});
      const Tensor<T> k =
          detail::per_token_matvec(fn, name + ".Wk", ly.Wk, x).reshape({B, Tn, H, K});
      const Tensor<T> v =
          detail::per_token_matvec(fn, name + ".Wv", ly.Wv, x).reshape({B, Tn, H, V});
      Tensor<T> o;
      if (ly.kind == LayerKind::softmax) {
        o = naive_softmax_attn(q, k, v);
      } else {
        rec.v = v;
        rec.beta = map(detail::per_token_matvec(fn, name + ".Wbeta", ly.Wbeta, x), sigmoid);
        rec.v_tilde = routing == Routing::cler && p[l] >= 0
                          ? cler_inject(v, run.layer[p[l]].error, ly.Gamma, rho)  // Eq.27
                          : v;
        RecurrentOptions<T> opt;
        opt.use_qk_l2norm = true;
        opt.return_trace = true;
        if (host == Host::gated_delta_rule) {
          rec.g = map(detail::per_token_matvec(fn, name + ".Wa", ly.Wa, x),
                      [&](T a) { return -softplus(a); });
          rec.mix = naive_recurrent_gated_delta_rule(q, k, rec.v_tilde, rec.g, rec.beta, opt);
        } else {
          rec.mix = naive_recurrent_delta_rule(q, k, rec.v_tilde, rec.beta, opt);
        }
        rec.error = routed_error(rec.mix, error);  // Eq.28: the error against v~
        o = rec.mix.o;
      }
      Tensor<T> h = detail::add(run.h.back(), detail::per_token_matvec(fn, name + ".Wo", ly.Wo, o));
      if (ly.kind == LayerKind::linear && routing == Routing::cler_h)
        h = detail::inject(fn, name + ".P", h, rec.error, ly.P);  // Eq.29, s = the routed error
      if (ly.kind == LayerKind::linear && routing == Routing::clvr)
        h = detail::inject(fn, name + ".P", h, rec.v, ly.P);  // Eq.29, s = v (not beta-scaled)
      run.h.push_back(h);
    }
    return run;
  }
};

/// @}

}  // namespace linattn::ref
