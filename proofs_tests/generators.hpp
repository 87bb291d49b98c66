// proofs_tests/generators.hpp -- random problems and comparisons shared by every test.
//
// Property tests draw the *structure* of a case with RapidCheck (dimensions, lengths, gate mode,
// whether an initial state is given, a seed) so that a failure shrinks to the smallest failing
// shape; the tensor *values* are then filled from a std::mt19937_64 seeded by that seed (fast, and
// reproducible from the printed counterexample).
//
// Conventions of the field (SPEC section 1): keys L2-normalised (stable delta rules), log-space
// gates g <= 0, beta / b / w in [0, 1]. Gate modes cover SPEC section 4's edge cases: g = 0
// exactly, g very negative (decay to ~0 in one token), and mixtures with exact 0s and 1s.
// Namespace token: random single tokens (W, kappa, v, gates) for the per-token steps of
// reference/delta_rules.hpp, and the relative error of two vectors or matrices.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "reference/recurrent.hpp"

namespace linattn::testing {

using ref::Gates;
using ref::Op;
using ref::RecurrentOptions;

enum class GateMode { random, zero, extreme, mixed };

inline const char* to_string(GateMode m) {
  switch (m) {
    case GateMode::random: return "random";
    case GateMode::zero: return "zero";
    case GateMode::extreme: return "extreme";
    case GateMode::mixed: return "mixed";
  }
  return "?";
}

/// The structure of one random case.
struct Case {
  index_t B = 1, T = 1, H = 1, K = 1, V = 1;
  std::vector<index_t> cu_seqlens;  ///< non-empty: packed batch (B = 1)
  GateMode gates = GateMode::random;
  bool initial_state = false;
  std::uint64_t seed = 0;
};

inline std::ostream& operator<<(std::ostream& os, const Case& c) {
  os << "Case{B=" << c.B << " T=" << c.T << " H=" << c.H << " K=" << c.K << " V=" << c.V
     << " gates=" << to_string(c.gates) << " init=" << c.initial_state << " seed=" << c.seed;
  if (!c.cu_seqlens.empty()) {
    os << " cu_seqlens=[";
    for (size_t i = 0; i < c.cu_seqlens.size(); ++i) os << (i ? "," : "") << c.cu_seqlens[i];
    os << "]";
  }
  return os << "}";
}

/// Limits for gen_case.
struct CaseLimits {
  index_t max_B = 2, max_T = 40, max_H = 2, max_K = 9, max_V = 9;
  bool allow_packed = true;  ///< sometimes produce packed variable-length batches
};

/// cu_seqlens of a packed batch of T tokens: 1 to 4 sequences cut at random points (empty
/// sequences allowed: equal cuts), and with `extra_empty` half the time one more empty sequence.
inline std::vector<index_t> gen_cu_seqlens(index_t T, bool extra_empty = false) {
  const index_t n = *rc::gen::inRange<index_t>(1, 5);
  auto cuts = *rc::gen::container<std::vector<index_t>>(static_cast<size_t>(n - 1),
                                                         rc::gen::inRange<index_t>(0, T + 1));
  cuts.push_back(0);
  cuts.push_back(T);
  if (extra_empty && *rc::gen::arbitrary<bool>()) cuts.push_back(*rc::gen::elementOf(cuts));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

/// A RapidCheck generator of case structures. K and V are drawn independently (d_k != d_v often,
/// non-powers of two often).
inline rc::Gen<Case> gen_case(CaseLimits lim = {}) {
  return rc::gen::exec([lim] {
    Case c;
    c.T = *rc::gen::inRange<index_t>(1, lim.max_T + 1);
    c.H = *rc::gen::inRange<index_t>(1, lim.max_H + 1);
    c.K = *rc::gen::inRange<index_t>(1, lim.max_K + 1);
    c.V = *rc::gen::inRange<index_t>(1, lim.max_V + 1);
    c.gates = *rc::gen::element(GateMode::random, GateMode::zero, GateMode::extreme, GateMode::mixed);
    c.initial_state = *rc::gen::arbitrary<bool>();
    c.seed = *rc::gen::arbitrary<std::uint64_t>();
    const bool packed = lim.allow_packed && *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    if (packed) {
      c.B = 1;
      c.cu_seqlens = gen_cu_seqlens(c.T);
    } else {
      c.B = *rc::gen::inRange<index_t>(1, lim.max_B + 1);
    }
    return c;
  });
}

/// A full problem: inputs, gates and options for one operator.
template <class T>
struct Problem {
  Op op = Op::delta_rule;
  Tensor<T> q, k, v;
  Gates<T> gates;
  RecurrentOptions<T> opt;
  index_t N = 1;  ///< number of sequences
};

namespace detail {
template <class T>
Tensor<T> normal(std::mt19937_64& rng, std::vector<index_t> shape, double sd = 1.0) {
  std::normal_distribution<double> nd(0.0, sd);
  Tensor<T> t(std::move(shape));
  for (T& x : t) x = static_cast<T>(nd(rng));
  return t;
}
/// One log-gate under the mode: random ~ log(sigmoid(N(2.5, 1.5))); extreme: -30 or -1000.
template <class T>
T log_gate(std::mt19937_64& rng, GateMode m) {
  std::normal_distribution<double> nd(2.5, 1.5);
  std::uniform_int_distribution<int> pick(0, 3);
  auto rnd = [&] { return static_cast<T>(-std::log1p(std::exp(-nd(rng)))); };
  switch (m) {
    case GateMode::zero: return T(0);
    case GateMode::extreme: return pick(rng) % 2 ? T(-30) : T(-1000);
    case GateMode::mixed:
      switch (pick(rng)) {
        case 0: return T(0);
        case 1: return T(-1000);
        default: return rnd();
      }
    case GateMode::random: return rnd();
  }
  return T(0);
}
/// A gate in [0, 1]; mixed mode hits 0 and 1 exactly sometimes.
template <class T>
T unit_gate(std::mt19937_64& rng, GateMode m) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 4);
  if (m == GateMode::mixed) {
    const int p = pick(rng);
    if (p == 0) return T(0);
    if (p == 1) return T(1);
  }
  return static_cast<T>(u(rng));
}
}  // namespace detail

/// Fill a problem for `op` from a case structure. Keys are L2-normalised unless `unit_keys` is false.
template <class T>
Problem<T> make_problem(Op op, const Case& c, bool unit_keys = true) {
  std::mt19937_64 rng(c.seed);
  Problem<T> p;
  p.op = op;
  p.q = detail::normal<T>(rng, {c.B, c.T, c.H, c.K});
  p.k = detail::normal<T>(rng, {c.B, c.T, c.H, c.K});
  p.v = detail::normal<T>(rng, {c.B, c.T, c.H, c.V});
  if (unit_keys)
    for (index_t i = 0; i < c.B * c.T * c.H; ++i) {
      T* kr = p.k.data() + i * c.K;
      double ss = 0;
      for (index_t d = 0; d < c.K; ++d) ss += double(kr[d]) * kr[d];
      const double inv = ss > 0 ? 1.0 / std::sqrt(ss) : 0.0;
      for (index_t d = 0; d < c.K; ++d) kr[d] = static_cast<T>(kr[d] * inv);
    }
  if (op == Op::gated_delta_rule) p.gates.g = Tensor<T>({c.B, c.T, c.H});
  if (op == Op::kda || op == Op::gdn2) p.gates.g = Tensor<T>({c.B, c.T, c.H, c.K});
  for (T& x : p.gates.g) x = detail::log_gate<T>(rng, c.gates);
  if (op == Op::delta_rule || op == Op::gated_delta_rule || op == Op::kda) {
    p.gates.beta = Tensor<T>({c.B, c.T, c.H});
    for (T& x : p.gates.beta) x = detail::unit_gate<T>(rng, c.gates);
  }
  if (op == Op::gdn2) {
    p.gates.b = Tensor<T>({c.B, c.T, c.H, c.K});
    p.gates.w = Tensor<T>({c.B, c.T, c.H, c.V});
    for (T& x : p.gates.b) x = detail::unit_gate<T>(rng, c.gates);
    for (T& x : p.gates.w) x = detail::unit_gate<T>(rng, c.gates);
  }
  p.opt.cu_seqlens = c.cu_seqlens;
  p.N = c.cu_seqlens.empty() ? c.B : static_cast<index_t>(c.cu_seqlens.size()) - 1;
  if (c.initial_state) p.opt.initial_state = detail::normal<T>(rng, {p.N, c.H, c.K, c.V}, 0.5);
  p.opt.output_final_state = true;
  return p;
}

/// Set every log-gate of token t0 (every batch row, head and, for per-channel gates, key channel) of a
/// log-decay g [B, T, H] or [B, T, H, K] to `value` (e.g. -1000: the state is wiped there).
template <class T>
void set_token_log_gate(Tensor<T>& g, index_t t0, T value) {
  const index_t B = g.size(0), Tn = g.size(1), per_token = B > 0 && Tn > 0 ? g.numel() / (B * Tn) : 0;
  for (index_t b = 0; b < B; ++b)
    for (index_t e = 0; e < per_token; ++e) g.data()[(b * Tn + t0) * per_token + e] = value;
}

/// Run the reference operator of a problem (dispatch on p.op).
template <class T>
ref::RecurrentOutput<T> run_reference(const Problem<T>& p) {
  switch (p.op) {
    case Op::linear_attn: return ref::naive_recurrent_linear_attn(p.q, p.k, p.v, p.opt);
    case Op::delta_rule: return ref::naive_recurrent_delta_rule(p.q, p.k, p.v, p.gates.beta, p.opt);
    case Op::gated_delta_rule:
      return ref::naive_recurrent_gated_delta_rule(p.q, p.k, p.v, p.gates.g, p.gates.beta, p.opt);
    case Op::kda: return ref::naive_recurrent_kda(p.q, p.k, p.v, p.gates.g, p.gates.beta, p.opt);
    case Op::gdn2:
      return ref::naive_recurrent_gdn2(p.q, p.k, p.v, p.gates.g, p.gates.b, p.gates.w, p.opt);
  }
  return {};
}

/// Convert a tensor's scalar type (e.g. a double problem to float).
template <class To, class From>
Tensor<To> cast(const Tensor<From>& x) {
  if (!x.defined()) return {};
  Tensor<To> y(x.shape());
  for (index_t i = 0; i < x.numel(); ++i) y.data()[i] = static_cast<To>(x.data()[i]);
  return y;
}
template <class To, class From>
Problem<To> cast_problem(const Problem<From>& p) {
  Problem<To> r;
  r.op = p.op;
  r.q = cast<To>(p.q), r.k = cast<To>(p.k), r.v = cast<To>(p.v);
  r.gates.g = cast<To>(p.gates.g), r.gates.beta = cast<To>(p.gates.beta);
  r.gates.b = cast<To>(p.gates.b), r.gates.w = cast<To>(p.gates.w);
  r.opt.initial_state = cast<To>(p.opt.initial_state);
  r.opt.output_final_state = p.opt.output_final_state;
  r.opt.cu_seqlens = p.opt.cu_seqlens;
  r.opt.use_qk_l2norm = p.opt.use_qk_l2norm;
  r.opt.return_trace = p.opt.return_trace;
  if (p.opt.scale) r.opt.scale = static_cast<To>(*p.opt.scale);
  r.N = p.N;
  return r;
}

/// How far `got` is from `want`: relative RMS error ||got - want|| / ||want|| (absolute when
/// ||want|| == 0), the largest absolute difference and where, and NaN/Inf counts.
struct Comparison {
  double rel_rms = 0, max_abs = 0, want_rms = 0;
  index_t worst = -1, nonfinite = 0;
  bool shape_ok = true;
  std::string where;
  std::string str() const {
    std::ostringstream os;
    if (!shape_ok) return "shape mismatch";
    os << "rel_rms=" << rel_rms << " max_abs=" << max_abs << " at " << where
       << " nonfinite=" << nonfinite << " (want rms " << want_rms << ")";
    return os.str();
  }
  bool within(double tol) const { return shape_ok && nonfinite == 0 && rel_rms <= tol; }
};

template <class A, class B>
Comparison compare(const Tensor<A>& got, const Tensor<B>& want) {
  Comparison c;
  if (got.shape() != want.shape()) {
    c.shape_ok = false;
    return c;
  }
  double num = 0, den = 0;
  for (index_t i = 0; i < got.numel(); ++i) {
    const double g = static_cast<double>(got.data()[i]), w = static_cast<double>(want.data()[i]);
    if (!std::isfinite(g)) {
      ++c.nonfinite;
      continue;
    }
    num += (g - w) * (g - w);
    den += w * w;
    if (std::abs(g - w) > c.max_abs || c.worst < 0) c.max_abs = std::abs(g - w), c.worst = i;
  }
  const double n = got.numel() ? double(got.numel()) : 1.0;
  c.want_rms = std::sqrt(den / n);
  c.rel_rms = den > 0 ? std::sqrt(num / den) : std::sqrt(num / n);
  c.where = c.worst >= 0 ? index_str(got.shape(), c.worst) : "-";
  return c;
}

// ---- one token in paper notation (reference/delta_rules.hpp) -------------------------------------
// In a namespace of its own: some test files define helpers of these names for other shapes.
namespace token {

using ref::Vec;

/// The dimensions of one token, d_phi = K in [min_K, 9] and d_v = V in [1, 9], drawn independently
/// by RapidCheck, and the generator of its values, seeded by RapidCheck.
struct Token {
  index_t K = 1, V = 1;
  std::mt19937_64 rng;
};

inline Token draw_token(index_t min_K = 1) {
  Token t;
  t.K = *rc::gen::inRange<index_t>(min_K, 10);
  t.V = *rc::gen::inRange<index_t>(1, 10);
  t.rng.seed(*rc::gen::arbitrary<std::uint64_t>());
  return t;
}

/// n standard normal entries.
inline Vec<double> normal_vec(std::mt19937_64& rng, index_t n) {
  std::normal_distribution<double> nd(0.0, 1.0);
  Vec<double> x(static_cast<size_t>(n));
  for (double& e : x) e = nd(rng);
  return x;
}

/// A random unit vector (norm 1 up to rounding).
inline Vec<double> unit_vec(std::mt19937_64& rng, index_t n) {
  Vec<double> x = normal_vec(rng, n);
  double ss = 0;
  for (double e : x) ss += e * e;
  for (double& e : x) e /= std::sqrt(ss);
  return x;
}

/// n entries uniform in [lo, hi).
inline Vec<double> uniform_vec(std::mt19937_64& rng, index_t n, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  Vec<double> x(static_cast<size_t>(n));
  for (double& e : x) e = u(rng);
  return x;
}

/// One number uniform in [lo, hi) (the same draw as uniform_vec(rng, 1, lo, hi)[0]).
inline double uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

/// A rows x cols matrix of standard normal entries (e.g. W, d_v x d_phi).
inline Tensor<double> normal_mat(std::mt19937_64& rng, index_t rows, index_t cols) {
  std::normal_distribution<double> nd(0.0, 1.0);
  Tensor<double> W({rows, cols});
  for (double& e : W) e = nd(rng);
  return W;
}

/// ||got - want|| / ||want|| (absolute when want == 0); infinite on a size mismatch.
inline double rel_err(const Vec<double>& got, const Vec<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i)
    num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double rel_err(const Tensor<double>& got, const Tensor<double>& want) {
  if (got.shape() != want.shape()) return INFINITY;
  return rel_err(Vec<double>(got.begin(), got.end()), Vec<double>(want.begin(), want.end()));
}

}  // namespace token

}  // namespace linattn::testing
