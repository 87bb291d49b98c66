// proofs_tests/test_gradcheck_reference.cpp -- the reference backward of every recurrence
// (reference/recurrent_backward.hpp) proven by finite differences in float64.
//
// For a random problem (gen_case: gate modes random, g = 0 exactly, very negative g, mixtures with
// exact 0/1 gates; initial states; packed batches with empty sequences) and the random linear loss
//   L = <do, o> + <dht, S_T>      (dht sometimes absent)
// every gradient the backward returns is compared with numerical_gradient (step 1e-5 max(1, |x|);
// central, or second-order one-sided at a domain bound: g = 0, beta/b/w = 0 or 1) by
//   ||analytic - numerical||_2 <= 1e-6 ||numerical||_2 + 1e-9 sqrt(n)
// The floor covers the rounding noise of the numerical gradient (~1e-16 |L| / step per element),
// which dominates where a gradient is legitimately tiny (g = -30: alpha = 1e-13; K = 1 with
// use_qk_l2norm, where the normalised key is +-1 up to eps). The step 1e-5 balances truncation
// (step^2) against that noise (1 / step); with 1e-6 the noise used up to 0.8 of the floor.
// Set LINATTN_GRADCHECK_REPORT=1 to print the worst errors seen per input.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

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
                     double hi = std::numeric_limits<double>::infinity()) {
  const Tensor<double> fd = ref::numerical_gradient(x, loss, kRelStep, lo, hi);
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

/// One random problem of `op` with a random loss; sometimes no dht, sometimes a custom scale.
void gradcheck_property(Op op, bool use_qk_l2norm, Worst& worst) {
  const Case c = *gen_case(small_limits());
  const bool with_dht = *rc::gen::weightedElement<bool>({{3, true}, {1, false}});
  const bool custom_scale = *rc::gen::arbitrary<bool>();
  Problem<double> p = make_problem<double>(op, c, /*unit_keys=*/!use_qk_l2norm);
  p.opt.use_qk_l2norm = use_qk_l2norm;
  if (use_qk_l2norm) {
    // Raw q, k rows: the finite-difference step must be small against the length ||x|| over which
    // x / ||x|| turns, so rows shorter than 0.25 are scaled up to 0.25 (the l2 norm's own test
    // covers shorter vectors, eps included, with a step scaled to them).
    for (Tensor<double> x : {p.q, p.k})
      for (index_t r = 0; r < x.numel() / c.K; ++r) {
        double* row = x.data() + r * c.K;
        double ss = 0;
        for (index_t d = 0; d < c.K; ++d) ss += row[d] * row[d];
        if (ss < 0.0625)
          for (index_t d = 0; d < c.K; ++d) row[d] *= ss > 0 ? 0.25 / std::sqrt(ss) : 0.0;
      }
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
