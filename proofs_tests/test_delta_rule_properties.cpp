// proofs_tests/test_delta_rule_properties.cpp -- what one delta-rule token does to the memory W.
//
// DeltaNet (Eq.14) is one gradient step on L(W) = 1/2 ||W kappa - v||^2; with a unit key it moves
// the key read a fraction beta toward v and leaves orthogonal directions alone; GDN (Eqs.15-17)
// decays BEFORE computing the error, and the decay-after variant differs by exactly
// beta (1 - alpha) (W_{i-1} kappa) kappa^T; the paper layout W (d_v x d_phi) and the kernel layout
// S = W^T (K x V) give the same recurrence. Random dimensions (d_k and d_v independent) and values;
// float64 with tolerance 1e-12 relative unless the statement is exact.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <random>
#include <vector>

#include "generators.hpp"
#include "reference/delta_rules.hpp"
#include "reference/recurrent.hpp"

using namespace linattn;
using namespace linattn::testing;
using namespace linattn::testing::token;
using ref::Vec;

namespace {

constexpr double kTol = 1e-12;

/// y = W x, written out here (independent of ref::read).
Vec<double> matvec(const Tensor<double>& W, const Vec<double>& x) {
  Vec<double> y(static_cast<size_t>(W.size(0)), 0.0);
  for (index_t i = 0; i < W.size(0); ++i)
    for (index_t j = 0; j < W.size(1); ++j) y[i] += W(i, j) * x[j];
  return y;
}

double norm(const Vec<double>& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return std::sqrt(s);
}

/// L(W) = 1/2 ||W kappa - v||^2.
double loss(const Tensor<double>& W, const Vec<double>& kappa, const Vec<double>& v) {
  const Vec<double> p = matvec(W, kappa);
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += (p[i] - v[i]) * (p[i] - v[i]);
  return 0.5 * s;
}

}  // namespace

// ---- DeltaNet as gradient descent (Eq.14) ------------------------------------------------------

TEST_CASE("DeltaNet step is one gradient descent step of rate beta on one half the squared read error") {
  rc::prop("deltanet_step(W) == W - beta (W kappa - v) kappa^T", [] {
    Token t = draw_token();
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = normal_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    const double beta = uniform(t.rng, 0.0, 1.0);
    // The gradient of L at W0, (W0 kappa - v) kappa^T, computed here ...
    const Vec<double> pred = matvec(W0, kappa);
    Tensor<double> grad({t.V, t.K});
    for (index_t i = 0; i < t.V; ++i)
      for (index_t j = 0; j < t.K; ++j) grad(i, j) = (pred[i] - v[i]) * kappa[j];
    // ... and confirmed by central differences (L is quadratic, so they are exact up to rounding).
    const double h = 1e-3;
    for (index_t i = 0; i < t.V; ++i)
      for (index_t j = 0; j < t.K; ++j) {
        Tensor<double> Wp = W0.clone(), Wm = W0.clone();
        Wp(i, j) += h, Wm(i, j) -= h;
        const double fd = (loss(Wp, kappa, v) - loss(Wm, kappa, v)) / (2 * h);
        RC_ASSERT(std::abs(fd - grad(i, j)) <= 1e-8 * (1 + std::abs(grad(i, j)) + loss(W0, kappa, v)));
      }
    Tensor<double> want = W0.clone();
    for (index_t i = 0; i < want.numel(); ++i) want.data()[i] -= beta * grad.data()[i];
    Tensor<double> W = W0.clone();
    ref::deltanet_step(W, kappa, v, beta);
    RC_ASSERT(rel_err(W, want) <= kTol);
  });
}

// ---- Unit keys ---------------------------------------------------------------------------------

TEST_CASE("DeltaNet with a unit key moves the key read a fraction beta toward v") {
  rc::prop("||kappa|| = 1 => W_i kappa = (1 - beta) W_{i-1} kappa + beta v", [] {
    Token t = draw_token();
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = unit_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    const double beta = uniform(t.rng, 0.0, 1.0);
    const Vec<double> before = matvec(W0, kappa);
    Tensor<double> W = W0.clone();
    ref::deltanet_step(W, kappa, v, beta);
    Vec<double> want(v.size());
    for (size_t i = 0; i < v.size(); ++i) want[i] = (1 - beta) * before[i] + beta * v[i];
    RC_ASSERT(rel_err(matvec(W, kappa), want) <= kTol);
  });
}

TEST_CASE("DeltaNet with a unit key leaves directions orthogonal to the key unchanged") {
  rc::prop("||kappa|| = 1 and kappa^T u = 0 => W_i u = W_{i-1} u", [] {
    Token t = draw_token(/*min_K=*/2);  // d_phi >= 2, so a non-zero orthogonal u exists
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = unit_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    const double beta = uniform(t.rng, 0.0, 1.0);
    Vec<double> u = normal_vec(t.rng, t.K);  // u <- u - (kappa^T u) kappa
    double ku = 0;
    for (index_t j = 0; j < t.K; ++j) ku += kappa[j] * u[j];
    for (index_t j = 0; j < t.K; ++j) u[j] -= ku * kappa[j];
    RC_PRE(norm(u) > 1e-3);
    Tensor<double> W = W0.clone();
    ref::deltanet_step(W, kappa, v, beta);
    // W_i u - W_{i-1} u = beta r (kappa^T u), and kappa^T u is 0 up to rounding (~1e-16 ||u||).
    const Vec<double> after = matvec(W, u), before = matvec(W0, u);
    double dn = 0, wn = 0;
    for (index_t i = 0; i < t.V; ++i) dn += std::pow(after[i] - before[i], 2);
    for (double e : W0) wn += e * e;
    RC_ASSERT(std::sqrt(dn) <= kTol * (std::sqrt(wn) + norm(v)) * norm(u));
  });
}

TEST_CASE("Delta rule worked example prediction 2 and target 5 with beta 0.5 gives 3.5 along any unit key") {
  // By hand: the new prediction is 2 + 0.5 * (5 - 2) = 3.5 (every number exact in binary).
  SECTION("d_v = d_phi = 1") {
    auto W = Tensor<double>::from({1, 1}, {2.0});
    const auto tr = ref::deltanet_step<double>(W, {1.0}, {5.0}, 0.5);
    REQUIRE(tr.v_bar[0] == 2.0);    // the prediction
    REQUIRE(tr.r[0] == 3.0);        // the error 5 - 2
    REQUIRE(tr.written[0] == 1.5);  // beta r
    REQUIRE(W(0, 0) == 3.5);
  }
  rc::prop("W kappa = 2 before and 3.5 after for a random unit key in R^{d_phi}", [] {
    Token t = draw_token();
    const Vec<double> kappa = unit_vec(t.rng, t.K);
    // A 1 x d_phi memory predicting 2 along kappa, with arbitrary parts orthogonal to kappa.
    Tensor<double> W({1, t.K});
    Vec<double> x = normal_vec(t.rng, t.K);
    double kx = 0;
    for (index_t j = 0; j < t.K; ++j) kx += kappa[j] * x[j];
    for (index_t j = 0; j < t.K; ++j) W(0, j) = 2.0 * kappa[j] + (x[j] - kx * kappa[j]);
    RC_ASSERT(std::abs(matvec(W, kappa)[0] - 2.0) <= 1e-12);
    ref::deltanet_step(W, kappa, {5.0}, 0.5);
    RC_ASSERT(std::abs(matvec(W, kappa)[0] - 3.5) <= 1e-12);
  });
}

// ---- GDN: decay before the error (Eqs.15-17) ---------------------------------------------------

TEST_CASE("GDN decay before error differs from decay after error whenever alpha < 1 and beta > 0 and W kappa is nonzero") {
  rc::prop("gdn_step - gdn_step_decay_after_error == beta (1 - alpha) (W_{i-1} kappa) kappa^T", [] {
    Token t = draw_token();
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = unit_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    const double alpha = uniform(t.rng, 0.0, 0.999), beta = uniform(t.rng, 0.001, 1.0);
    const Vec<double> Wk = matvec(W0, kappa);
    RC_PRE(norm(Wk) > 1e-6);
    Tensor<double> Wb = W0.clone(), Wa = W0.clone();
    ref::gdn_step(Wb, kappa, v, alpha, beta);
    ref::gdn_step_decay_after_error(Wa, kappa, v, alpha, beta);
    Tensor<double> diff({t.V, t.K}), want({t.V, t.K});
    for (index_t i = 0; i < t.V; ++i)
      for (index_t j = 0; j < t.K; ++j)
        diff(i, j) = Wb(i, j) - Wa(i, j), want(i, j) = beta * (1 - alpha) * Wk[i] * kappa[j];
    // The difference is exactly that rank-one matrix (up to rounding of W's entries) ...
    double wn = 0;
    for (double e : W0) wn += e * e;
    double dn = 0, en = 0;
    for (index_t i = 0; i < diff.numel(); ++i)
      dn += std::pow(diff.data()[i] - want.data()[i], 2), en += std::pow(want.data()[i], 2);
    RC_ASSERT(std::sqrt(dn) <= kTol * (std::sqrt(wn) + norm(v)));
    // ... whose norm beta (1 - alpha) ||W kappa|| ||kappa|| is positive: the two states differ.
    double gap = 0;
    for (index_t i = 0; i < diff.numel(); ++i) gap += std::pow(diff.data()[i], 2);
    RC_ASSERT(std::sqrt(en) > 0.0);
    RC_ASSERT(std::sqrt(gap) >= 0.5 * beta * (1 - alpha) * norm(Wk));
  });
}

TEST_CASE("GDN decay before error equals decay after error when alpha = 1 or beta = 0 or W kappa = 0") {
  rc::prop("each of the three conditions makes the two recurrences agree", [] {
    Token t = draw_token();
    Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = unit_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    double alpha = uniform(t.rng, 0.0, 1.0), beta = uniform(t.rng, 0.0, 1.0);
    const int which = *rc::gen::inRange(0, 3);
    if (which == 0) alpha = 1.0;
    if (which == 1) beta = 0.0;
    if (which == 2)  // rows of W orthogonal to kappa: W kappa = 0 (up to rounding)
      for (index_t i = 0; i < t.V; ++i) {
        double d = 0;
        for (index_t j = 0; j < t.K; ++j) d += W0(i, j) * kappa[j];
        for (index_t j = 0; j < t.K; ++j) W0(i, j) -= d * kappa[j];
      }
    Tensor<double> Wb = W0.clone(), Wa = W0.clone();
    ref::gdn_step(Wb, kappa, v, alpha, beta);
    ref::gdn_step_decay_after_error(Wa, kappa, v, alpha, beta);
    double wn = 0, dn = 0;
    for (index_t i = 0; i < W0.numel(); ++i)
      wn += std::pow(W0.data()[i], 2), dn += std::pow(Wb.data()[i] - Wa.data()[i], 2);
    RC_ASSERT(std::sqrt(dn) <= kTol * (std::sqrt(wn) + norm(v)));
  });
}

// ---- The two layouts (SPEC section 1) ------------------------------------------------------------

TEST_CASE("gdn2_step on W and gdn2_step_S on S = W transposed give the same state") {
  rc::prop("W_to_S(gdn2_step(W)) == gdn2_step_S(W_to_S(W)) with the read W kappa = S^T kappa", [] {
    Token t = draw_token();
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = normal_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    Vec<double> alpha(t.K), b(t.K), w(t.V);
    for (double& e : alpha) e = uniform(t.rng, 0.0, 1.0);
    for (double& e : b) e = uniform(t.rng, 0.0, 1.0);
    for (double& e : w) e = uniform(t.rng, 0.0, 1.0);
    Tensor<double> W = W0.clone(), S = ref::W_to_S(W0);
    ref::gdn2_step(W, kappa, v, alpha, b, w);
    ref::gdn2_step_S(S, kappa, v, alpha, b, w);
    RC_ASSERT(S.shape() == (std::vector<index_t>{t.K, t.V}));
    RC_ASSERT(rel_err(ref::W_to_S(W), S) <= kTol);
    // The read o = S^T q of the kernels is the paper's W q.
    const Vec<double> q = normal_vec(t.rng, t.K);
    Vec<double> Stq(static_cast<size_t>(t.V), 0.0);
    for (index_t i = 0; i < t.K; ++i)
      for (index_t j = 0; j < t.V; ++j) Stq[j] += S(i, j) * q[i];
    RC_ASSERT(rel_err(Stq, ref::read(W, q)) <= kTol);
  });
}

TEST_CASE("W_to_S and S_to_W transpose every entry and round-trip exactly") {
  rc::prop("S(j, i) == W(i, j) and S_to_W(W_to_S(W)) == W bit for bit", [] {
    Token t = draw_token();
    const Tensor<double> W = normal_mat(t.rng, t.V, t.K);
    const Tensor<double> S = ref::W_to_S(W);
    RC_ASSERT(S.shape() == (std::vector<index_t>{t.K, t.V}));
    for (index_t i = 0; i < t.V; ++i)
      for (index_t j = 0; j < t.K; ++j) RC_ASSERT(S(j, i) == W(i, j));
    const Tensor<double> W2 = ref::S_to_W(S);
    RC_ASSERT(W2.shape() == W.shape());
    for (index_t i = 0; i < W.numel(); ++i) RC_ASSERT(W2.data()[i] == W.data()[i]);
    RC_ASSERT(W2.data() != W.data());  // a fresh tensor, not a view of W
  });
}

TEST_CASE("GDN2 sequence final state equals a gdn2_step_S loop and the transpose of a gdn2_step loop") {
  rc::prop("naive_recurrent_gdn2 final_state[n, h] == S from gdn2_step_S == W^T from gdn2_step", [] {
    const Case c = *gen_case();
    Problem<double> p = make_problem<double>(Op::gdn2, c);
    const auto out = ref::naive_recurrent_gdn2(p.q, p.k, p.v, p.gates.g, p.gates.b, p.gates.w, p.opt);
    for (index_t n = 0; n < p.N; ++n) {
      const index_t bb = c.cu_seqlens.empty() ? n : 0;
      const index_t t0 = c.cu_seqlens.empty() ? 0 : c.cu_seqlens[n];
      const index_t t1 = c.cu_seqlens.empty() ? c.T : c.cu_seqlens[n + 1];
      for (index_t h = 0; h < c.H; ++h) {
        Tensor<double> S({c.K, c.V});
        if (c.initial_state)
          for (index_t i = 0; i < c.K; ++i)
            for (index_t j = 0; j < c.V; ++j) S(i, j) = p.opt.initial_state(n, h, i, j);
        Tensor<double> W = ref::S_to_W(S);
        for (index_t t = t0; t < t1; ++t) {
          Vec<double> k(c.K), v(c.V), a(c.K), b(c.K), w(c.V);
          for (index_t i = 0; i < c.K; ++i)
            k[i] = p.k(bb, t, h, i), a[i] = std::exp(p.gates.g(bb, t, h, i)), b[i] = p.gates.b(bb, t, h, i);
          for (index_t j = 0; j < c.V; ++j) v[j] = p.v(bb, t, h, j), w[j] = p.gates.w(bb, t, h, j);
          ref::gdn2_step_S(S, k, v, a, b, w);
          ref::gdn2_step(W, k, v, a, b, w);
        }
        Tensor<double> got({c.K, c.V}), WT({c.K, c.V});
        for (index_t i = 0; i < c.K; ++i)
          for (index_t j = 0; j < c.V; ++j) got(i, j) = out.final_state(n, h, i, j), WT(i, j) = W(j, i);
        RC_ASSERT(compare(got, S).within(kTol));
        RC_ASSERT(compare(got, WT).within(kTol));
      }
    }
  });
}
