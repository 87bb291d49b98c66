// proofs_tests/test_softmax_attention.cpp -- causal softmax attention (Eq.1), the baseline.
//
// y_i = sum_{j<=i} softmax_j(scale q_i . k_j + mask_ij) v_j. Checked here: the weights of each
// query sum to one, the output never looks at future tokens, it equals a softmax computed directly
// in this file (no max-subtraction, explicit sums), grouped-query attention equals repeating the
// key/value heads, and an additive -inf mask removes a key completely. Random B, T, H, Hkv | H,
// d_k != d_v, scale, causal flag and masks; float64, tolerance 1e-12 unless the claim is exact.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "generators.hpp"
#include "reference/softmax_attention.hpp"

using namespace linattn;
using namespace linattn::testing;

namespace {

constexpr double kTol = 1e-12;
constexpr double kInf = std::numeric_limits<double>::infinity();

/// One random attention problem: q [B, T, H, K], k [B, T, Hkv, K], v [B, T, Hkv, V], H = group Hkv.
struct Attn {
  index_t B = 1, T = 1, H = 1, Hkv = 1, K = 1, V = 1;
  Tensor<double> q, k, v;
  ref::SoftmaxOptions<double> opt;
  std::mt19937_64 rng;
};

Tensor<double> normal(std::mt19937_64& rng, std::vector<index_t> shape) {
  std::normal_distribution<double> nd(0.0, 1.0);
  Tensor<double> t(std::move(shape));
  for (double& e : t) e = nd(rng);
  return t;
}

/// A [T, T] additive mask: 0 on the diagonal (every query keeps itself), elsewhere a mixture of
/// 0, finite values in [-3, 3] and -inf.
Tensor<double> random_mask(std::mt19937_64& rng, index_t T) {
  std::uniform_int_distribution<int> pick(0, 2);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  Tensor<double> m({T, T});
  for (index_t i = 0; i < T; ++i)
    for (index_t j = 0; j < T; ++j)
      if (i != j) {
        const int p = pick(rng);
        m(i, j) = p == 0 ? 0.0 : p == 1 ? u(rng) : -kInf;
      }
  return m;
}

/// Random structure (H / Hkv >= min_group); with `options`, random scale, causal flag and mask.
Attn draw_attn(bool options, index_t min_group = 1) {
  Attn a;
  a.B = *rc::gen::inRange<index_t>(1, 3);
  a.T = *rc::gen::inRange<index_t>(1, 13);
  a.Hkv = *rc::gen::inRange<index_t>(1, 3);
  a.H = a.Hkv * *rc::gen::inRange<index_t>(min_group, 4);
  a.K = *rc::gen::inRange<index_t>(1, 9);
  a.V = *rc::gen::inRange<index_t>(1, 9);
  a.rng.seed(*rc::gen::arbitrary<std::uint64_t>());
  a.q = normal(a.rng, {a.B, a.T, a.H, a.K});
  a.k = normal(a.rng, {a.B, a.T, a.Hkv, a.K});
  a.v = normal(a.rng, {a.B, a.T, a.Hkv, a.V});
  if (options) {
    if (*rc::gen::arbitrary<bool>()) a.opt.scale = *rc::gen::inRange(1, 201) / 100.0;
    a.opt.causal = *rc::gen::arbitrary<bool>();
    if (*rc::gen::arbitrary<bool>()) a.opt.mask = random_mask(a.rng, a.T);
  }
  return a;
}

/// Eq.1 written out directly: weights exp(s_ij) / sum_j' exp(s_ij'), s_ij = scale q_i . k_j + m_ij.
Tensor<double> direct_softmax(const Attn& a) {
  const double scale = a.opt.scale ? *a.opt.scale : 1.0 / std::sqrt(double(a.K));
  const index_t group = a.H / a.Hkv;
  Tensor<double> y({a.B, a.T, a.H, a.V});
  for (index_t b = 0; b < a.B; ++b)
    for (index_t h = 0; h < a.H; ++h)
      for (index_t i = 0; i < a.T; ++i) {
        const index_t jend = a.opt.causal ? i + 1 : a.T;
        std::vector<double> e(static_cast<size_t>(jend));
        double z = 0;
        for (index_t j = 0; j < jend; ++j) {
          double s = 0;
          for (index_t d = 0; d < a.K; ++d) s += a.q(b, i, h, d) * a.k(b, j, h / group, d);
          s = scale * s + (a.opt.mask.defined() ? a.opt.mask(i, j) : 0.0);
          z += (e[j] = std::exp(s));
        }
        for (index_t j = 0; j < jend; ++j)
          for (index_t c = 0; c < a.V; ++c) y(b, i, h, c) += e[j] / z * a.v(b, j, h / group, c);
      }
  return y;
}

}  // namespace

TEST_CASE("Softmax attention weights of every query sum to one") {
  rc::prop("v = all ones gives y = all ones", [] {
    Attn a = draw_attn(/*options=*/true);
    a.v.fill(1.0);
    const Tensor<double> y = ref::naive_softmax_attn(a.q, a.k, a.v, a.opt);
    RC_ASSERT(y.shape() == (std::vector<index_t>{a.B, a.T, a.H, a.V}));
    for (double e : y) RC_ASSERT(std::abs(e - 1.0) <= kTol);
  });
}

TEST_CASE("Causal softmax attention outputs do not depend on future tokens") {
  rc::prop("changing q k v after t0 leaves y at t <= t0 bit for bit the same", [] {
    Attn a = draw_attn(/*options=*/true);
    a.opt.causal = true;
    const index_t t0 = *rc::gen::inRange<index_t>(0, a.T);
    const Tensor<double> y = ref::naive_softmax_attn(a.q, a.k, a.v, a.opt);
    Attn f = a;
    f.q = a.q.clone(), f.k = a.k.clone(), f.v = a.v.clone();
    std::normal_distribution<double> nd(0.0, 3.0);
    for (index_t b = 0; b < a.B; ++b)
      for (index_t t = t0 + 1; t < a.T; ++t) {
        for (index_t h = 0; h < a.H; ++h)
          for (index_t d = 0; d < a.K; ++d) f.q(b, t, h, d) = nd(a.rng);
        for (index_t h = 0; h < a.Hkv; ++h) {
          for (index_t d = 0; d < a.K; ++d) f.k(b, t, h, d) = nd(a.rng);
          for (index_t d = 0; d < a.V; ++d) f.v(b, t, h, d) = nd(a.rng);
        }
      }
    const Tensor<double> yf = ref::naive_softmax_attn(f.q, f.k, f.v, f.opt);
    for (index_t b = 0; b < a.B; ++b)
      for (index_t t = 0; t <= t0; ++t)
        for (index_t h = 0; h < a.H; ++h)
          for (index_t c = 0; c < a.V; ++c) RC_ASSERT(yf(b, t, h, c) == y(b, t, h, c));
    // The same change is visible at t0 without the causal restriction (so the check has teeth).
    if (t0 + 1 < a.T && !a.opt.mask.defined()) {
      Attn n = a, nf = f;
      n.opt.causal = nf.opt.causal = false;
      const Tensor<double> yn = ref::naive_softmax_attn(n.q, n.k, n.v, n.opt);
      const Tensor<double> ynf = ref::naive_softmax_attn(nf.q, nf.k, nf.v, nf.opt);
      double diff = 0;
      for (index_t h = 0; h < a.H; ++h)
        for (index_t c = 0; c < a.V; ++c) diff += std::abs(yn(0, t0, h, c) - ynf(0, t0, h, c));
      RC_ASSERT(diff > 0.0);
    }
  });
}

TEST_CASE("Softmax attention equals a directly computed softmax of scaled dot products plus mask") {
  rc::prop("naive_softmax_attn == Eq.1 written out in the test", [] {
    Attn a = draw_attn(/*options=*/true);
    RC_TAG(a.opt.causal ? "causal" : "full", a.opt.mask.defined() ? "mask" : "no mask");
    const Tensor<double> y = ref::naive_softmax_attn(a.q, a.k, a.v, a.opt);
    RC_ASSERT(compare(y, direct_softmax(a)).within(kTol));
  });
}

TEST_CASE("Grouped-query softmax attention equals repeating each key and value head") {
  rc::prop("Hkv < H == k and v heads repeated H / Hkv times", [] {
    Attn a = draw_attn(/*options=*/true, /*min_group=*/2);
    const index_t group = a.H / a.Hkv;
    Tensor<double> kr({a.B, a.T, a.H, a.K}), vr({a.B, a.T, a.H, a.V});
    for (index_t b = 0; b < a.B; ++b)
      for (index_t t = 0; t < a.T; ++t)
        for (index_t h = 0; h < a.H; ++h) {
          for (index_t d = 0; d < a.K; ++d) kr(b, t, h, d) = a.k(b, t, h / group, d);
          for (index_t d = 0; d < a.V; ++d) vr(b, t, h, d) = a.v(b, t, h / group, d);
        }
    const Tensor<double> y = ref::naive_softmax_attn(a.q, a.k, a.v, a.opt);
    const Tensor<double> yr = ref::naive_softmax_attn(a.q, kr, vr, a.opt);
    RC_ASSERT(y.shape() == yr.shape());
    for (index_t i = 0; i < y.numel(); ++i) RC_ASSERT(y.data()[i] == yr.data()[i]);  // exactly
  });
}

TEST_CASE("Softmax attention additive mask of minus infinity blocks the masked keys") {
  rc::prop("key c masked for every other query: changing k_c and v_c changes no other output", [] {
    Attn a = draw_attn(/*options=*/true);
    RC_PRE(a.T >= 2);
    if (!a.opt.mask.defined()) a.opt.mask = Tensor<double>({a.T, a.T});
    const index_t c = *rc::gen::inRange<index_t>(0, a.T);
    for (index_t i = 0; i < a.T; ++i)
      if (i != c) a.opt.mask(i, c) = -kInf;
    const Tensor<double> y = ref::naive_softmax_attn(a.q, a.k, a.v, a.opt);
    Tensor<double> k2 = a.k.clone(), v2 = a.v.clone();
    std::normal_distribution<double> nd(0.0, 3.0);
    for (index_t b = 0; b < a.B; ++b)
      for (index_t h = 0; h < a.Hkv; ++h) {
        for (index_t d = 0; d < a.K; ++d) k2(b, c, h, d) = nd(a.rng);
        for (index_t d = 0; d < a.V; ++d) v2(b, c, h, d) = nd(a.rng);
      }
    const Tensor<double> y2 = ref::naive_softmax_attn(a.q, k2, v2, a.opt);
    for (index_t b = 0; b < a.B; ++b)
      for (index_t i = 0; i < a.T; ++i)
        if (i != c)
          for (index_t h = 0; h < a.H; ++h)
            for (index_t e = 0; e < a.V; ++e) RC_ASSERT(y2(b, i, h, e) == y(b, i, h, e));
    // And the masked output equals the direct softmax with the -inf entries included.
    RC_ASSERT(compare(y, direct_softmax(a)).within(kTol));
  });
}
