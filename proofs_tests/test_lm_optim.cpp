// proofs_tests/test_lm_optim.cpp -- the trainer's optimisers and schedule (walkthroughs/lm/optim.hpp)
// against hand computations and independent derivations (SPEC section 5):
//  * the WSD schedule at its breakpoints, values written out by hand;
//  * one and two AdamW steps on a 2-element example, computed by hand;
//  * global-norm clipping;
//  * Newton-Schulz: the singular values of the output are exactly the composed quintic applied to
//    the singular values of G / ||G||_F (float64, computed with an independent Jacobi eigensolver),
//    and the measured band for well-conditioned matrices in float32;
//  * NorMuon's first step (no bias correction) moves every row by lr sqrt(1 / (1 - beta2)) in RMS.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "walkthroughs/lm/optim.hpp"

using namespace linattn;
using namespace linattn::lm;

namespace {

/// Eigenvalues of a symmetric n x n matrix (cyclic Jacobi rotations), ascending.
std::vector<double> sym_eigenvalues(std::vector<double> A, index_t n) {
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (index_t i = 0; i < n; ++i)
      for (index_t j = i + 1; j < n; ++j) off += A[i * n + j] * A[i * n + j];
    if (off < 1e-30) break;
    for (index_t p = 0; p < n; ++p)
      for (index_t q = p + 1; q < n; ++q) {
        const double apq = A[p * n + q];
        if (std::abs(apq) < 1e-300) continue;
        const double theta = (A[q * n + q] - A[p * n + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (index_t k = 0; k < n; ++k) {  // A <- J^T A J
          const double akp = A[k * n + p], akq = A[k * n + q];
          A[k * n + p] = c * akp - s * akq;
          A[k * n + q] = s * akp + c * akq;
        }
        for (index_t k = 0; k < n; ++k) {
          const double apk = A[p * n + k], aqk = A[q * n + k];
          A[p * n + k] = c * apk - s * aqk;
          A[q * n + k] = s * apk + c * aqk;
        }
      }
  }
  std::vector<double> ev(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) ev[i] = A[i * n + i];
  std::sort(ev.begin(), ev.end());
  return ev;
}

/// Singular values (ascending, min(m, n) of them) of an m x n matrix, via eig of the small Gram.
template <class T>
std::vector<double> singular_values(const std::vector<T>& X, index_t m, index_t n) {
  const index_t r = std::min(m, n);
  std::vector<double> G(static_cast<size_t>(r * r), 0.0);
  for (index_t i = 0; i < r; ++i)
    for (index_t j = 0; j < r; ++j) {
      double s = 0;
      if (m <= n)
        for (index_t k = 0; k < n; ++k) s += double(X[i * n + k]) * double(X[j * n + k]);
      else
        for (index_t k = 0; k < m; ++k) s += double(X[k * n + i]) * double(X[k * n + j]);
      G[i * r + j] = s;
    }
  std::vector<double> ev = sym_eigenvalues(G, r);
  for (double& e : ev) e = std::sqrt(std::max(e, 0.0));
  return ev;
}

/// The five quintics of SPEC section 5 composed, applied to one singular value (written out
/// here again from the SPEC, independently of optim.hpp's table).
double composed_quintic(double s) {
  const double abc[5][3] = {{4.0848, -6.8946, 2.9270}, {3.9505, -6.3029, 2.6377},
                            {3.7418, -5.5913, 2.3037}, {2.8769, -3.1427, 1.2046},
                            {2.8366, -3.0525, 1.2012}};
  for (const auto& c : abc) s = c[0] * s + c[1] * s * s * s + c[2] * s * s * s * s * s;
  return s;
}

}  // namespace

TEST_CASE("LM WSD schedule takes its hand-computed values at the breakpoints") {
  Schedule s;
  s.steps = 100, s.warmup = 10, s.decay_frac = 0.2, s.min_ratio = 0.1;
  REQUIRE(s.decay_start() == 80);
  CHECK(s.wsd(0) == Approx(0.1).epsilon(1e-15));   // warm-up 1/10
  CHECK(s.wsd(4) == Approx(0.5).epsilon(1e-15));
  CHECK(s.wsd(9) == Approx(1.0).epsilon(1e-15));   // end of warm-up
  CHECK(s.wsd(10) == 1.0);                         // stable
  CHECK(s.wsd(79) == 1.0);                         // last stable step
  CHECK(s.wsd(80) == Approx(0.1 + 0.9 * (1 - std::sqrt(1.0 / 20))).epsilon(1e-15));  // first decay step
  CHECK(s.wsd(89) == Approx(0.1 + 0.9 * (1 - std::sqrt(0.5))).epsilon(1e-15));       // half way
  CHECK(s.wsd(99) == Approx(0.1).epsilon(1e-15));  // the last step reaches lr_min = lr_max / 10
  CHECK(s.warmup_constant(99) == 1.0);             // the Adam group under Muon does not decay
}

TEST_CASE("LM WSD schedule rises then is flat then falls monotonically to the minimum") {
  rc::prop("wsd shape", [] {
    Schedule s;
    s.steps = *rc::gen::inRange<index_t>(1, 400);
    s.decay_frac = *rc::gen::element(0.0, 0.1, 0.2, 0.5, 1.0);
    s.warmup = *rc::gen::inRange<index_t>(0, s.decay_start() + 1);
    for (index_t i = 1; i < s.steps; ++i) {
      if (i < s.warmup) RC_ASSERT(s.wsd(i) > s.wsd(i - 1));
      else if (i < s.decay_start()) RC_ASSERT(s.wsd(i) == 1.0);
      else RC_ASSERT(s.wsd(i) < s.wsd(i - 1) || s.decay_steps() == 0);
      if (i >= s.warmup) RC_ASSERT(s.wsd(i) >= 0.1 - 1e-15);
      RC_ASSERT(s.wsd(i) <= 1.0);
    }
    if (s.decay_steps() > 0) RC_ASSERT(std::abs(s.wsd(s.steps - 1) - 0.1) < 1e-15);
  });
}

TEST_CASE("LM one AdamW step equals the hand computation on a 2-element example") {
  ParamStore<double> ps;
  ps.add("w", 1, 2, ParamKind::matrix, Init{});
  ps.allocate();
  ps.data = {1.0, -2.0};
  OptimConfig oc;
  oc.name = "adamw", oc.lr = 0.1, oc.weight_decay = 0.1, oc.clip = 0;
  oc.eps = 0;  // so that the hand computation is exact (eps 1e-8 moves these values by ~1e-9)
  Schedule sc;
  sc.steps = 10, sc.warmup = 0, sc.decay_frac = 0;
  Optimizer<double> opt(oc, sc, ps);
  // step 1, g = (0.5, -0.1): m = 0.1 g, v = 0.05 g^2, bias corrections 0.1 and 0.05 give
  // mhat = g, vhat = g^2, so the Adam direction is g / |g| = (1, -1);
  // p <- p (1 - 0.1 * 0.1) - 0.1 (1, -1) = (0.99 - 0.1, -1.98 + 0.1) = (0.89, -1.88)
  ps.grad = {0.5, -0.1};
  opt.step(ps);
  CHECK(ps.data[0] == Approx(0.89).epsilon(1e-12));
  CHECK(ps.data[1] == Approx(-1.88).epsilon(1e-12));
  // step 2, g = (0.2, 0.3), element 0 by hand:
  //   m = 0.9*0.05 + 0.1*0.2 = 0.065;  v = 0.95*0.0125 + 0.05*0.04 = 0.013875
  //   mhat = 0.065 / (1 - 0.81) = 0.3421052631578947;  vhat = 0.013875 / (1 - 0.9025) = 0.1423076923076923
  //   p = 0.89 * 0.99 - 0.1 * 0.3421052631578947 / sqrt(0.1423076923076923) = 0.7904126..
  ps.grad = {0.2, 0.3};
  opt.step(ps);
  CHECK(ps.data[0] == Approx(0.8811 - 0.1 * 0.3421052631578947 / std::sqrt(0.1423076923076923)).epsilon(1e-12));
  //   element 1: m = 0.9*(-0.01) + 0.1*0.3 = 0.021; v = 0.95*0.0005 + 0.05*0.09 = 0.004975
  CHECK(ps.data[1] == Approx(-1.88 * 0.99 - 0.1 * (0.021 / 0.19) / std::sqrt(0.004975 / 0.0975)).epsilon(1e-12));
}

TEST_CASE("LM gradient clipping rescales to the max norm and leaves smaller gradients unchanged") {
  rc::prop("clip", [] {
    const index_t n = *rc::gen::inRange<index_t>(1, 50);
    const double scale = *rc::gen::element(1e-3, 0.1, 1.0, 10.0, 1e3);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    std::normal_distribution<double> nd(0.0, scale);
    std::vector<double> g(static_cast<size_t>(n));
    for (double& x : g) x = nd(rng);
    const std::vector<double> g0 = g;
    const double norm = clip_grad_norm(g, 1.0);
    RC_ASSERT(std::abs(norm - global_norm(g0)) <= 1e-12 * norm);
    if (norm <= 1.0) {
      RC_ASSERT(g == g0);
    } else {
      RC_ASSERT(std::abs(global_norm(g) - norm / (norm + 1e-6)) < 1e-12);
      for (size_t i = 0; i < g.size(); ++i) RC_ASSERT(std::abs(g[i] * norm - g0[i]) <= 1e-6 * std::abs(g0[i]) + 1e-300);
    }
  });
}

TEST_CASE("LM Newton-Schulz maps each singular value of G over its norm through the composed quintic") {
  rc::prop("newton-schulz singular values", [] {
    const index_t m = *rc::gen::inRange<index_t>(1, 24), n = *rc::gen::inRange<index_t>(1, 24);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    std::normal_distribution<double> nd;
    std::vector<double> G(static_cast<size_t>(m * n)), O(static_cast<size_t>(m * n));
    for (double& x : G) x = nd(rng);
    newton_schulz(O.data(), G.data(), m, n);
    double fro = 0;
    for (double x : G) fro += x * x;
    fro = std::sqrt(fro) + 1e-7;  // X = G / (||G||_F + 1e-7): the eps guards G = 0
    std::vector<double> want = singular_values(G, m, n);
    for (double& s : want) s = composed_quintic(s / fro);
    std::sort(want.begin(), want.end());
    const std::vector<double> got = singular_values(O, m, n);
    for (size_t i = 0; i < got.size(); ++i) RC_ASSERT(std::abs(got[i] - want[i]) < 1e-9);
  });
}

TEST_CASE("LM Newton-Schulz in float32 puts the singular values of rectangular Gaussian matrices in 0.97 to 1.04") {
  // Measured: for sigma / ||G||_F in [0.01, 1] the composed quintic stays in [0.9778, 1.0318]
  // (and in [0.9778, 1.1450] from 0.003); Gaussian matrices with aspect ratio >= 2 have
  // sigma_min / ||G||_F above 0.03, so their Newton-Schulz singular values fall in that band.
  double lo = 1e9, hi = 0;
  for (double s = 0.01; s <= 1.0; s += 1e-5) lo = std::min(lo, composed_quintic(s)), hi = std::max(hi, composed_quintic(s));
  CHECK(lo == Approx(0.97775).margin(1e-4));
  CHECK(hi == Approx(1.03178).margin(1e-4));
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd;
  for (auto [m, n] : {std::pair<index_t, index_t>{32, 96}, {96, 32}, {16, 64}, {40, 80}}) {
    std::vector<float> G(static_cast<size_t>(m * n)), O(G.size());
    for (float& x : G) x = nd(rng);
    newton_schulz(O.data(), G.data(), m, n);
    const std::vector<double> sv = singular_values(O, m, n);
    INFO(m << "x" << n << ": singular values in [" << sv.front() << ", " << sv.back() << "]");
    CHECK(sv.front() > 0.97);
    CHECK(sv.back() < 1.04);
  }
}

TEST_CASE("LM NorMuon first step moves every row by lr over the root of one minus beta2 in RMS") {
  // At step 1 the momentum buffer is (1 - mu) G and the row second moment is (1 - beta2) ms_i with
  // ms_i the row's mean square (no bias correction), so the row update O_i / sqrt(v_i) has RMS
  // 1 / sqrt(1 - beta2) = sqrt(20), whatever G is; Adam-group parameters are untouched by Muon.
  rc::prop("normuon first step", [] {
    const index_t m = *rc::gen::inRange<index_t>(2, 20), n = *rc::gen::inRange<index_t>(2, 20);
    ParamStore<double> ps;
    ps.add("w", m, n, ParamKind::matrix, Init{});
    ps.add("norm", 1, n, ParamKind::vector, Init{});
    ps.allocate();
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    std::normal_distribution<double> nd;
    for (double& x : ps.data) x = nd(rng);
    for (double& x : ps.grad) x = nd(rng);
    const std::vector<double> p0 = ps.data;
    OptimConfig oc;
    oc.name = "muon", oc.lr = 0.01, oc.weight_decay = 0, oc.clip = 0;
    oc.muon_eps = 0;  // (eps 1e-8 would shift rows of tiny RMS)
    Schedule sc;
    sc.steps = 10, sc.warmup = 0, sc.decay_frac = 0;
    Optimizer<double> opt(oc, sc, ps);
    RC_ASSERT(opt.uses_muon(ps.spec(0)));
    RC_ASSERT(!opt.uses_muon(ps.spec(1)));
    opt.step(ps);
    for (index_t i = 0; i < m; ++i) {
      double ms = 0;
      for (index_t j = 0; j < n; ++j) ms += std::pow(ps.data[i * n + j] - p0[i * n + j], 2);
      RC_ASSERT(std::abs(std::sqrt(ms / double(n)) - 0.01 * std::sqrt(20.0)) < 1e-12);
    }
  });
}
