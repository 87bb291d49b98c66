// proofs_tests/test_gradcheck_reference.cpp -- the reference backward (reference/backward.hpp)
// proven by finite differences in float64: every recurrence, softmax and feature-map linear
// attention, the model's pieces (activations, L2 norm, decay, RMSNorm) and the routing operations.
//
// Recurrences: for a random problem (gen_case: gate modes random, g = 0 exactly, very negative g, mixtures with
// exact 0/1 gates; initial states; packed batches with empty sequences) and the random linear loss
//   L = <do, o> + <dht, S_T>      (dht sometimes absent)
// every gradient the backward returns is compared with numerical_gradient (step 1e-5 max(1, |x|);
// central, or second-order one-sided at a domain bound: g = 0, beta/b/w = 0 or 1) by
//   ||analytic - numerical||_2 <= 1e-6 ||numerical||_2 + 1e-9 sqrt(n)
// The floor covers the rounding noise of the numerical gradient (~1e-16 |L| / step per element),
// which dominates where a gradient is legitimately tiny (g = -30: alpha = 1e-13; K = 1 with
// use_qk_l2norm, where the normalised key is +-1 up to eps). The step 1e-5 balances truncation
// (step^2) against that noise (1 / step); with 1e-6 the noise used up to 0.8 of the floor.
// The other checks use the same bound, each with a random linear loss L = <dy, y>.
// Set LINATTN_GRADCHECK_REPORT=1 to print the worst errors seen per input.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "generators.hpp"
#include "reference/backward.hpp"

using namespace linattn;
using namespace linattn::testing;
using ref::Op;

namespace {

constexpr double kRelStep = 1e-5;
constexpr double kRelTol = 1e-6;
constexpr double kAbsTol = 1e-9;

/// The worst errors seen per input, printed at the end of a TEST_CASE on request: the largest
/// relative error among cases whose numerical gradient has norm >= 1e-3 (where it is meaningful)
/// and the largest ratio of the error to the allowed bound (must stay <= 1).
struct Worst {
  std::map<std::string, std::pair<double, double>> by_input;
  void note(const std::string& name, const ref::GradError& e, index_t n) {
    auto& [rel, ratio] = by_input[name];
    if (e.ref >= 1e-3) rel = std::max(rel, e.rel());
    ratio = std::max(ratio, e.abs / (kRelTol * e.ref + kAbsTol * std::sqrt(double(n))));
  }
  void print(const std::string& title) const {
    if (!std::getenv("LINATTN_GRADCHECK_REPORT")) return;
    std::cout << title << " (input: worst relative error, worst error / bound):";
    for (const auto& [name, w] : by_input)
      std::cout << "  " << name << ": " << w.first << ", " << w.second;
    std::cout << "\n";
  }
};

CaseLimits small_limits() {
  CaseLimits l;
  l.max_B = 2, l.max_T = 10, l.max_H = 2, l.max_K = 5, l.max_V = 5;
  return l;
}

Tensor<double> random_normal(std::mt19937_64& rng, std::vector<index_t> shape) {
  std::normal_distribution<double> nd(0.0, 1.0);
  Tensor<double> t(std::move(shape));
  for (double& x : t) x = nd(rng);
  return t;
}

ref::RecurrentGrads<double> run_backward(const Problem<double>& p, const Tensor<double>& do_,
                                         const Tensor<double>& dht) {
  switch (p.op) {
    case Op::linear_attn:
      return ref::naive_recurrent_linear_attn_backward(p.q, p.k, p.v, do_, dht, p.opt);
    case Op::delta_rule:
      return ref::naive_recurrent_delta_rule_backward(p.q, p.k, p.v, p.gates.beta, do_, dht, p.opt);
    case Op::gated_delta_rule:
      return ref::naive_recurrent_gated_delta_rule_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta,
                                                            do_, dht, p.opt);
    case Op::kda:
      return ref::naive_recurrent_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, do_, dht,
                                               p.opt);
    case Op::gdn2:
      return ref::naive_recurrent_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b, p.gates.w,
                                                do_, dht, p.opt);
  }
  return {};
}

/// <a, b> over all elements (the random linear losses of every check).
double dot(const Tensor<double>& a, const Tensor<double>& b) {
  double s = 0;
  for (index_t i = 0; i < a.numel(); ++i) s += a.data()[i] * b.data()[i];
  return s;
}

/// The check itself: the numerical gradient of loss() wrt x (inside [lo, hi]) against `analytic`.
template <class Loss>
void expect_gradient(Worst& worst, const std::string& name, const Tensor<double>& x,
                     const Tensor<double>& analytic, Loss loss,
                     double lo = -std::numeric_limits<double>::infinity(),
                     double hi = std::numeric_limits<double>::infinity(),
                     double rel_step = kRelStep) {
  const Tensor<double> fd = ref::numerical_gradient(x, loss, rel_step, lo, hi);
  const ref::GradError e = ref::grad_error(analytic, fd);
  worst.note(name, e, x.numel());
  RC_LOG() << "d" << name << ": ||analytic - numerical|| = " << e.abs
           << ", ||numerical|| = " << e.ref << "\n";
  RC_ASSERT(e.within(kRelTol, kAbsTol, x.numel()));
}

/// L = <do, o> + <dht, S_T> through the forward reference.
double loss(const Problem<double>& p, const Tensor<double>& do_, const Tensor<double>& dht) {
  const auto out = run_reference(p);
  return dot(do_, out.o) + (dht.defined() ? dot(dht, out.final_state) : 0.0);
}

/// Compare every gradient of the backward with the numerical gradient of `loss`.
void check_gradients(Problem<double> p, const Tensor<double>& do_, const Tensor<double>& dht,
                     Worst& worst) {
  const ref::RecurrentGrads<double> an = run_backward(p, do_, dht);
  // The initial-state gradient exists without an initial state too: differentiate at zeros.
  if (!p.opt.initial_state.defined())
    p.opt.initial_state = Tensor<double>({p.N, p.q.size(2), p.q.size(3), p.v.size(3)});
  const auto L = [&] { return loss(p, do_, dht); };
  const double inf = std::numeric_limits<double>::infinity();
  expect_gradient(worst, "q", p.q, an.dq, L);
  expect_gradient(worst, "k", p.k, an.dk, L);
  expect_gradient(worst, "v", p.v, an.dv, L);
  expect_gradient(worst, "initial_state", p.opt.initial_state, an.dh0, L);
  if (p.op == Op::gated_delta_rule || p.op == Op::kda || p.op == Op::gdn2)
    expect_gradient(worst, "g", p.gates.g, an.dg, L, -inf, 0.0);
  if (p.op == Op::delta_rule || p.op == Op::gated_delta_rule || p.op == Op::kda)
    expect_gradient(worst, "beta", p.gates.beta, an.dbeta, L, 0.0, 1.0);
  if (p.op == Op::gdn2) {
    expect_gradient(worst, "b", p.gates.b, an.db, L, 0.0, 1.0);
    expect_gradient(worst, "w", p.gates.w, an.dw, L, 0.0, 1.0);
  }
}

/// Scale rows (over the last dimension) shorter than `min_norm` up to that length.
void lift_short_rows(const Tensor<double>& x, double min_norm) {
  const MatView<double> X = x.mat();
  for (index_t r = 0; r < X.rows; ++r) {
    double ss = 0;
    for (index_t d = 0; d < X.cols; ++d) ss += X(r, d) * X(r, d);
    if (ss < min_norm * min_norm)
      for (index_t d = 0; d < X.cols; ++d) X(r, d) *= ss > 0 ? min_norm / std::sqrt(ss) : 0.0;
  }
}

/// One random problem of `op` with a random loss; sometimes no dht, sometimes a custom scale.
void gradcheck_property(Op op, bool use_qk_l2norm, Worst& worst) {
  const Case c = *gen_case(small_limits());
  const bool with_dht = *rc::gen::weightedElement<bool>({{3, true}, {1, false}});
  const bool custom_scale = *rc::gen::arbitrary<bool>();
  Problem<double> p = make_problem<double>(op, c, /*unit_keys=*/!use_qk_l2norm);
  p.opt.use_qk_l2norm = use_qk_l2norm;
  if (use_qk_l2norm) {
    // Raw q, k rows: the finite-difference step must be small against the length ||x|| over which
    // x / ||x|| turns (the l2 norm's own test covers shorter vectors, eps included).
    lift_short_rows(p.q, 0.25);
    lift_short_rows(p.k, 0.25);
  }
  if (custom_scale) p.opt.scale = 0.7;
  std::mt19937_64 rng(c.seed ^ 0x9e3779b97f4a7c15ULL);
  const Tensor<double> do_ = random_normal(rng, {c.B, c.T, c.H, c.V});
  const Tensor<double> dht = with_dht ? random_normal(rng, {p.N, c.H, c.K, c.V}) : Tensor<double>();
  RC_LOG() << c << " dht=" << with_dht << " scale=" << (custom_scale ? "0.7" : "default") << "\n";
  check_gradients(p, do_, dht, worst);
}

}  // namespace

TEST_CASE("Linear attention recurrent backward equals finite differences for q k v and h0") {
  Worst worst;
  rc::prop("gradcheck", [&] { gradcheck_property(Op::linear_attn, false, worst); });
  worst.print("linear_attn");
}

TEST_CASE("DeltaNet backward equals finite differences for q k v beta and h0") {
  Worst worst;
  rc::prop("gradcheck", [&] { gradcheck_property(Op::delta_rule, false, worst); });
  worst.print("delta_rule");
}

TEST_CASE("GDN backward equals finite differences for q k v scalar log decay g beta and h0") {
  Worst worst;
  rc::prop("gradcheck", [&] { gradcheck_property(Op::gated_delta_rule, false, worst); });
  worst.print("gated_delta_rule");
}

TEST_CASE("KDA backward equals finite differences for q k v per-channel log decay g beta and h0") {
  Worst worst;
  rc::prop("gradcheck", [&] { gradcheck_property(Op::kda, false, worst); });
  worst.print("kda");
}

TEST_CASE("GDN2 backward equals finite differences for q k v g b w and h0") {
  Worst worst;
  rc::prop("gradcheck", [&] { gradcheck_property(Op::gdn2, false, worst); });
  worst.print("gdn2");
}

TEST_CASE("Recurrent backward through in-kernel qk L2 normalisation equals finite differences") {
  Worst worst;
  rc::prop("gradcheck", [&] {
    const Op op = *rc::gen::element(Op::linear_attn, Op::delta_rule, Op::gated_delta_rule, Op::kda,
                                    Op::gdn2);
    RC_LOG() << "op=" << ref::op_name(op) << "\n";
    gradcheck_property(op, true, worst);
  });
  worst.print("use_qk_l2norm");
}

// ---------------------------------------------------------------------------------------------
// Softmax attention (Eq.1, GQA) and linear attention with a feature map (Eqs.3-6).
// ---------------------------------------------------------------------------------------------

TEST_CASE("Softmax attention backward equals finite differences for q k v and an additive mask with GQA") {
  Worst worst;
  rc::prop("gradcheck", [&] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), Tn = *rc::gen::inRange<index_t>(1, 8);
    const index_t Hkv = *rc::gen::inRange<index_t>(1, 3), group = *rc::gen::inRange<index_t>(1, 4);
    const index_t K = *rc::gen::inRange<index_t>(1, 6), V = *rc::gen::inRange<index_t>(1, 6);
    const index_t H = Hkv * group;
    const bool causal = *rc::gen::arbitrary<bool>(), with_mask = *rc::gen::arbitrary<bool>();
    const bool custom_scale = *rc::gen::arbitrary<bool>();
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    RC_LOG() << "B=" << B << " T=" << Tn << " H=" << H << " Hkv=" << Hkv << " K=" << K << " V=" << V
             << " causal=" << causal << " mask=" << with_mask << "\n";
    const Tensor<double> q = random_normal(rng, {B, Tn, H, K}), k = random_normal(rng, {B, Tn, Hkv, K});
    const Tensor<double> v = random_normal(rng, {B, Tn, Hkv, V}), dy = random_normal(rng, {B, Tn, H, V});
    // The mask: a finite part (differentiated) plus -inf on about a quarter of the off-diagonal
    // pairs (no gradient there; the diagonal stays open so no query is fully masked).
    const Tensor<double> mask_part = random_normal(rng, {Tn, Tn});
    Tensor<double> blocked({Tn, Tn});
    std::uniform_int_distribution<int> quarter(0, 3);
    for (index_t i = 0; i < Tn; ++i)
      for (index_t j = 0; j < Tn; ++j)
        if (i != j && quarter(rng) == 0) blocked(i, j) = -std::numeric_limits<double>::infinity();
    ref::SoftmaxOptions<double> opt;
    opt.causal = causal;
    if (custom_scale) opt.scale = 0.45;
    auto with_current_mask = [&] {
      ref::SoftmaxOptions<double> o = opt;
      if (with_mask) {
        o.mask = Tensor<double>({Tn, Tn});
        for (index_t i = 0; i < Tn * Tn; ++i)
          o.mask.data()[i] = mask_part.data()[i] + blocked.data()[i];
      }
      return o;
    };
    const auto an = ref::naive_softmax_attn_backward(q, k, v, dy, with_current_mask());
    const auto L = [&] { return dot(dy, ref::naive_softmax_attn(q, k, v, with_current_mask())); };
    expect_gradient(worst, "q", q, an.dq, L);
    expect_gradient(worst, "k", k, an.dk, L);
    expect_gradient(worst, "v", v, an.dv, L);
    if (with_mask) expect_gradient(worst, "mask", mask_part, an.dmask, L);
  });
  worst.print("softmax attention");
}

TEST_CASE("Feature-map linear attention backward equals finite differences for every feature map") {
  Worst worst;
  rc::prop("gradcheck", [&] {
    const index_t Tn = *rc::gen::inRange<index_t>(1, 9), dk = *rc::gen::inRange<index_t>(1, 6);
    const index_t dv = *rc::gen::inRange<index_t>(1, 6);
    ref::LinearAttnOptions<double> opt;
    opt.phi = *rc::gen::element(ref::FeatureMap::identity, ref::FeatureMap::l2norm,
                                ref::FeatureMap::elu_plus_one, ref::FeatureMap::relu);
    // The normalised form divides by phi(q) . sum phi(k) + eps: only positive features keep that
    // away from 0, so it is checked with elu+1.
    opt.normalize = opt.phi == ref::FeatureMap::elu_plus_one && *rc::gen::arbitrary<bool>();
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    RC_LOG() << "T=" << Tn << " dk=" << dk << " dv=" << dv << " phi=" << ref::to_string(opt.phi)
             << " normalize=" << opt.normalize << "\n";
    const Tensor<double> q = random_normal(rng, {Tn, dk}), k = random_normal(rng, {Tn, dk});
    const Tensor<double> v = random_normal(rng, {Tn, dv}), dy = random_normal(rng, {Tn, dv});
    for (Tensor<double> x : {q, k}) {
      lift_short_rows(x, 0.25);  // the l2norm map turns over the length ||x||
      for (double& xi : x)       // keep the step away from the kink of relu (and of elu's f'')
        if (std::abs(xi) < 1e-3) xi = xi < 0 ? -1e-3 : 1e-3;
    }
    const auto an = ref::linear_attention_backward(q, k, v, dy, opt);
    const auto L = [&] { return dot(dy, ref::linear_attention_recurrent(q, k, v, opt)); };
    expect_gradient(worst, "q", q, an.dq, L);
    expect_gradient(worst, "k", k, an.dk, L);
    expect_gradient(worst, "v", v, an.dv, L);
  });
  worst.print("feature-map linear attention");
}

// ---------------------------------------------------------------------------------------------
// The pieces around the core (SPEC section 5).
// ---------------------------------------------------------------------------------------------

TEST_CASE("Sigmoid softplus and SiLU backward equal finite differences including saturated arguments") {
  Worst worst;
  rc::prop("gradcheck", [&] {
    const index_t n = *rc::gen::inRange<index_t>(1, 24);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Tensor<double> x = random_normal(rng, {n});
    std::uniform_int_distribution<int> pick(0, 5);
    for (double& xi : x) {  // spread, and some saturated arguments where exp would overflow naively
      const int p = pick(rng);
      xi = p == 0 ? 40.0 : p == 1 ? -40.0 : 4 * xi;
    }
    const Tensor<double> dy = random_normal(rng, {n});
    expect_gradient(worst, "sigmoid", x, ref::sigmoid_backward(x, dy),
                    [&] { return dot(dy, ref::sigmoid(x)); });
    expect_gradient(worst, "softplus", x, ref::softplus_backward(x, dy),
                    [&] { return dot(dy, ref::softplus(x)); });
    expect_gradient(worst, "silu", x, ref::silu_backward(x, dy),
                    [&] { return dot(dy, ref::silu(x)); });
  });
  worst.print("activations");
}

TEST_CASE("L2 normalisation backward equals finite differences down to vectors as short as the root of eps") {
  Worst worst;
  rc::prop("gradcheck", [&] {
    const index_t rows = *rc::gen::inRange<index_t>(1, 6), D = *rc::gen::inRange<index_t>(1, 9);
    // Row length 10^u, u in [-3, 1]: at 1e-3 = sqrt(eps) the eps of x / sqrt(||x||^2 + eps) matters.
    const double u = *rc::gen::inRange(-300, 101) / 100.0, len = std::pow(10.0, u);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    const Tensor<double> x = random_normal(rng, {rows, D}), dy = random_normal(rng, {rows, D});
    for (double& xi : x) xi *= len / std::sqrt(double(D));
    RC_LOG() << "rows=" << rows << " D=" << D << " row length ~" << len << "\n";
    // The step is scaled to the row length: x / ||x|| turns over that length.
    expect_gradient(worst, "x", x, ref::l2_normalize_last_backward(x, dy),
                    [&] { return dot(dy, ref::l2_normalize_last(x)); }, -INFINITY, INFINITY,
                    kRelStep * std::min(1.0, len));
  });
  worst.print("l2 normalisation");
}

TEST_CASE("GDN decay parametrisation backward equals finite differences for A_log a and dt_bias scalar and per channel") {
  Worst worst;
  rc::prop("gradcheck", [&] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), Tn = *rc::gen::inRange<index_t>(1, 6);
    const index_t H = *rc::gen::inRange<index_t>(1, 4), K = *rc::gen::inRange<index_t>(1, 5);
    const bool per_channel = *rc::gen::arbitrary<bool>();
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    RC_LOG() << "B=" << B << " T=" << Tn << " H=" << H << " K=" << K << " per_channel=" << per_channel << "\n";
    std::uniform_real_distribution<double> A(1.0, 16.0);  // A ~ U(1, 16) as in the authors' code
    Tensor<double> A_log({H});
    for (double& x : A_log) x = std::log(A(rng));
    const std::vector<index_t> shape =
        per_channel ? std::vector<index_t>{B, Tn, H, K} : std::vector<index_t>{B, Tn, H};
    const Tensor<double> a = random_normal(rng, shape), dg = random_normal(rng, shape);
    for (double& x : a) x *= 3;
    const Tensor<double> dt_bias =
        random_normal(rng, per_channel ? std::vector<index_t>{H, K} : std::vector<index_t>{H});
    const auto an = ref::decay_from_logits_backward(A_log, a, dt_bias, dg);
    const auto L = [&] { return dot(dg, ref::decay_from_logits(A_log, a, dt_bias)); };
    expect_gradient(worst, "A_log", A_log, an.dA_log, L);
    expect_gradient(worst, "a", a, an.da, L);
    expect_gradient(worst, "dt_bias", dt_bias, an.ddt_bias, L);
  });
  worst.print("decay parametrisation");
}

TEST_CASE("Per-head RMSNorm backward equals finite differences for x and the weight") {
  Worst worst;
  rc::prop("gradcheck", [&] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), Tn = *rc::gen::inRange<index_t>(1, 5);
    const index_t H = *rc::gen::inRange<index_t>(1, 4), D = *rc::gen::inRange<index_t>(1, 9);
    // Inputs of size 10^u, u in [-2, 1]: from where eps = 1e-5 is felt to ordinary activations.
    const double u = *rc::gen::inRange(-200, 101) / 100.0, len = std::pow(10.0, u);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    RC_LOG() << "B=" << B << " T=" << Tn << " H=" << H << " D=" << D << " size ~" << len << "\n";
    const Tensor<double> x = random_normal(rng, {B, Tn, H, D}), dy = random_normal(rng, {B, Tn, H, D});
    for (double& xi : x) xi *= len;
    const Tensor<double> weight = random_normal(rng, {D});
    const auto an = ref::rms_norm_backward(x, weight, dy);
    const auto L = [&] { return dot(dy, ref::rms_norm(x, weight)); };
    expect_gradient(worst, "x", x, an.dx, L, -INFINITY, INFINITY, kRelStep * std::min(1.0, len));
    expect_gradient(worst, "weight", weight, an.dweight, L);
  });
  worst.print("rms norm");
}

// ---------------------------------------------------------------------------------------------
// Cross-layer routing (Sec.4): CLER's value-target injection and CLER-H/CLVR's residual injection.
// ---------------------------------------------------------------------------------------------

TEST_CASE("CLER injection backward equals finite differences for v r_prev and Gamma with either rho and any eps") {
  Worst worst;
  rc::prop("gradcheck", [&] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), Tn = *rc::gen::inRange<index_t>(1, 5);
    const index_t H = *rc::gen::inRange<index_t>(1, 3), V = *rc::gen::inRange<index_t>(1, 6);
    const ref::Rho rho = *rc::gen::element(ref::Rho::identity, ref::Rho::rms_norm);
    // rho's eps, passed to the forward and the backward alike (the default 1e-6 and two large ones,
    // where a backward that ignored its eps argument would differ from the forward's)
    const double eps = *rc::gen::element(1e-6, 1e-2, 1.0);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    RC_LOG() << "B=" << B << " T=" << Tn << " H=" << H << " V=" << V << " rho=" << ref::to_string(rho)
             << " eps=" << eps << "\n";
    const Tensor<double> v = random_normal(rng, {B, Tn, H, V}), r_prev = random_normal(rng, {B, Tn, H, V});
    const Tensor<double> dy = random_normal(rng, {B, Tn, H, V}), Gamma = random_normal(rng, {1});
    lift_short_rows(r_prev, 0.25);  // RMS normalisation turns over the row length
    const auto an = ref::cler_inject_backward(v, r_prev, Gamma(0), dy, rho, eps);
    const auto L = [&] { return dot(dy, ref::cler_inject(v, r_prev, Gamma(0), rho, eps)); };
    expect_gradient(worst, "v", v, an.dv, L);
    expect_gradient(worst, "r_prev", r_prev, an.dr_prev, L);
    expect_gradient(worst, "Gamma", Gamma, Tensor<double>::from({1}, {an.dGamma}), L);
  });
  worst.print("cler_inject");
}

TEST_CASE("Residual injection backward equals finite differences for h s and a full or low-rank P") {
  Worst worst;
  rc::prop("gradcheck", [&] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), Tn = *rc::gen::inRange<index_t>(1, 5);
    const index_t H = *rc::gen::inRange<index_t>(1, 3), V = *rc::gen::inRange<index_t>(1, 5);
    const index_t dm = *rc::gen::inRange<index_t>(1, 7), rank = *rc::gen::inRange<index_t>(1, 4);
    const bool low_rank = *rc::gen::arbitrary<bool>();
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    RC_LOG() << "B=" << B << " T=" << Tn << " H=" << H << " V=" << V << " d_model=" << dm
             << " low_rank=" << low_rank << " rank=" << rank << "\n";
    const Tensor<double> h = random_normal(rng, {B, Tn, dm}), s = random_normal(rng, {B, Tn, H, V});
    const Tensor<double> dy = random_normal(rng, {B, Tn, dm});
    if (!low_rank) {
      const Tensor<double> P = random_normal(rng, {dm, H * V});
      const auto an = ref::residual_inject_backward(h, s, P, dy);
      const auto L = [&] { return dot(dy, ref::residual_inject(h, s, P)); };
      expect_gradient(worst, "h", h, an.dh, L);
      expect_gradient(worst, "s", s, an.ds, L);
      expect_gradient(worst, "P", P, an.dP, L);
    } else {
      const Tensor<double> U = random_normal(rng, {dm, rank}), D = random_normal(rng, {rank, H * V});
      const auto an = ref::residual_inject_backward(h, s, U, D, dy);
      const auto L = [&] { return dot(dy, ref::residual_inject(h, s, U, D)); };
      expect_gradient(worst, "h", h, an.dh, L);
      expect_gradient(worst, "s", s, an.ds, L);
      expect_gradient(worst, "U", U, an.dU, L);
      expect_gradient(worst, "D", D, an.dD, L);
    }
  });
  worst.print("residual_inject");
}

// ---------------------------------------------------------------------------------------------
// Deterministic statements.
// ---------------------------------------------------------------------------------------------

TEST_CASE("An empty packed sequence hands the final-state gradient to its initial state unchanged") {
  Case c;
  c.B = 1, c.T = 5, c.H = 2, c.K = 3, c.V = 4, c.seed = 7, c.initial_state = true;
  c.cu_seqlens = {0, 2, 2, 5};  // the middle sequence is empty
  for (Op op : {Op::linear_attn, Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2}) {
    const Problem<double> p = make_problem<double>(op, c);
    std::mt19937_64 rng(11);
    const Tensor<double> do_ = random_normal(rng, {1, c.T, c.H, c.V});
    const Tensor<double> dht = random_normal(rng, {3, c.H, c.K, c.V});
    const auto gr = run_backward(p, do_, dht);
    for (index_t h = 0; h < c.H; ++h)
      for (index_t i = 0; i < c.K; ++i)
        for (index_t j = 0; j < c.V; ++j) REQUIRE(gr.dh0(1, h, i, j) == dht(1, h, i, j));
  }
}

TEST_CASE("The backward functions reject mis-shaped or non-finite gradients naming the argument") {
  using Catch::Matchers::Contains;
  Case c;
  c.B = 1, c.T = 3, c.H = 1, c.K = 2, c.V = 3, c.seed = 3;
  const Problem<double> p = make_problem<double>(Op::gdn2, c);
  const Tensor<double> do_ok({1, 3, 1, 3}), do_bad({1, 3, 1, 2}), dht_bad({2, 1, 2, 3});
  REQUIRE_THROWS_WITH(ref::naive_recurrent_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b,
                                                         p.gates.w, do_bad, Tensor<double>(), p.opt),
                      Contains("naive_recurrent_gdn2_backward") && Contains("'do'") &&
                          Contains("[1, 3, 1, 3]") && Contains("[1, 3, 1, 2]"));
  REQUIRE_THROWS_WITH(ref::naive_recurrent_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b,
                                                         p.gates.w, do_ok, dht_bad, p.opt),
                      Contains("'dht'") && Contains("[1, 1, 2, 3]") && Contains("[2, 1, 2, 3]"));
  // a NaN in do or an Inf in dht is named as such (not blamed on k and beta as an overflow)
  Tensor<double> do_nan = do_ok.clone(), dht_inf({1, 1, 2, 3});
  do_nan(0, 1, 0, 2) = NAN;
  dht_inf(0, 0, 1, 1) = INFINITY;
  REQUIRE_THROWS_WITH(ref::naive_recurrent_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b,
                                                         p.gates.w, do_nan, Tensor<double>(), p.opt),
                      Contains("argument 'do' expected finite values") && Contains("[0, 1, 0, 2]"));
  REQUIRE_THROWS_WITH(ref::naive_recurrent_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b,
                                                         p.gates.w, do_ok, dht_inf, p.opt),
                      Contains("argument 'dht' expected finite values") && Contains("[0, 0, 1, 1]"));
  Tensor<double> g_pos = p.gates.g.clone();
  g_pos(0, 1, 0, 1) = 0.5;  // log-decays must be <= 0, also for the backward
  REQUIRE_THROWS_WITH(ref::naive_recurrent_gdn2_backward(p.q, p.k, p.v, g_pos, p.gates.b, p.gates.w,
                                                         do_ok, Tensor<double>(), p.opt),
                      Contains("'g'") && Contains("0.5"));
  const Tensor<double> x({2, 4}), w3({3}), dy({2, 4});
  REQUIRE_THROWS_WITH(ref::rms_norm_backward(x, w3, dy), Contains("'weight'") && Contains("[4]"));
  REQUIRE_THROWS_WITH(ref::numerical_gradient(Tensor<double>::from({1}, {2.0}), [] { return 0.0; },
                                              1e-5, 0.0, 1.0),
                      Contains("numerical_gradient") && Contains("'x'"));
}
