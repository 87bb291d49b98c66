// proofs_tests/test_linear_attention.cpp -- linear attention (Eqs.3-6): two forms, one read order.
//
// The recurrent form W_i = W_{i-1} + v_i phi(k_i)^T, y_i = W_i phi(q_i) equals the parallel causal
// form y_i = sum_{j<=i} (phi(q_i) . phi(k_j)) v_j for every feature map, normalised or not; the
// sequence-level naive_recurrent_linear_attn equals it head by head. The read order is W phi(q)
// (SPEC section 7, erratum 1): with d_v != d_phi the PDF's phi(q)^T W does not even have matching
// sizes, and with d_v = d_phi the transposed read W^T phi(q) gives different numbers. Float64,
// tolerance 1e-12 relative RMS.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <random>
#include <vector>

#include "generators.hpp"
#include "reference/delta_rules.hpp"
#include "reference/feature_maps.hpp"
#include "reference/linear_attention.hpp"
#include "reference/recurrent.hpp"

using namespace linattn;
using namespace linattn::testing;
using ref::FeatureMap;
using ref::Vec;

namespace {

constexpr double kTol = 1e-12;

Tensor<double> normal_mat(std::mt19937_64& rng, index_t rows, index_t cols) {
  std::normal_distribution<double> nd(0.0, 1.0);
  Tensor<double> W({rows, cols});
  for (double& e : W) e = nd(rng);
  return W;
}

Vec<double> row(const Tensor<double>& x, index_t i) {
  return Vec<double>(x.data() + i * x.size(1), x.data() + (i + 1) * x.size(1));
}

/// One head's sequence: q, k [T, d_k], v [T, d_v], with d_k and d_v drawn independently.
struct Head {
  index_t T = 1, K = 1, V = 1;
  Tensor<double> q, k, v;
};

Head draw_head(index_t min_K = 1, bool square = false) {
  Head s;
  s.T = *rc::gen::inRange<index_t>(1, 13);
  s.K = *rc::gen::inRange<index_t>(min_K, 8);
  s.V = square ? s.K : *rc::gen::inRange<index_t>(1, 8);
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  s.q = normal_mat(rng, s.T, s.K);
  s.k = normal_mat(rng, s.T, s.K);
  s.v = normal_mat(rng, s.T, s.V);
  return s;
}

}  // namespace

TEST_CASE("Linear attention recurrent form equals the parallel causal form for every feature map with and without normalisation") {
  rc::prop("linear_attention_recurrent == linear_attention_parallel", [] {
    Head s = draw_head();
    ref::LinearAttnOptions<double> opt;
    opt.phi = *rc::gen::element(FeatureMap::identity, FeatureMap::l2norm, FeatureMap::elu_plus_one,
                                FeatureMap::relu);
    opt.normalize = *rc::gen::arbitrary<bool>();
    RC_TAG(ref::to_string(opt.phi), opt.normalize);
    // The normalised form divides by z_i . phi(q_i) + eps; it is meant for non-negative features.
    // identity and l2norm features are non-negative only for non-negative inputs: use |q|, |k| then
    // (otherwise the denominator can cancel to ~0 and both forms are ill-conditioned).
    if (opt.normalize && (opt.phi == FeatureMap::identity || opt.phi == FeatureMap::l2norm)) {
      for (double& e : s.q) e = std::abs(e);
      for (double& e : s.k) e = std::abs(e);
    }
    const Tensor<double> yr = ref::linear_attention_recurrent(s.q, s.k, s.v, opt);
    const Tensor<double> yp = ref::linear_attention_parallel(s.q, s.k, s.v, opt);
    RC_ASSERT(yr.shape() == (std::vector<index_t>{s.T, s.V}));
    RC_ASSERT(compare(yr, yp).within(kTol));
  });
}

TEST_CASE("Linear attention read is W phi of q and a transposed read does not type-check when d_v differs from d_phi") {
  rc::prop("read(W, phi(q)) is the parallel output; read(W^T, phi(q)) throws; phi(q)^T W sizes clash", [] {
    Head s = draw_head();
    RC_PRE(s.K != s.V);
    const FeatureMap phi = *rc::gen::element(FeatureMap::identity, FeatureMap::l2norm,
                                             FeatureMap::elu_plus_one, FeatureMap::relu);
    Tensor<double> W({s.V, s.K});  // d_v x d_phi, built by Eqs.4-5
    for (index_t i = 0; i < s.T; ++i)
      ref::linear_attention_step(W, ref::feature_map(phi, row(s.k, i)), row(s.v, i));
    const Vec<double> fq = ref::feature_map(phi, row(s.q, s.T - 1));
    ref::LinearAttnOptions<double> opt;
    opt.phi = phi;
    const Tensor<double> yp = ref::linear_attention_parallel(s.q, s.k, s.v, opt);
    const Vec<double> y = ref::read(W, fq);  // W phi(q): length d_v
    RC_ASSERT(static_cast<index_t>(y.size()) == s.V);
    auto last = Tensor<double>::from({1, s.V}, row(yp, s.T - 1));
    RC_ASSERT(compare(Tensor<double>::from({1, s.V}, y), last).within(kTol));
    // phi(q)^T W needs length(phi(q)) == rows(W) = d_v, but phi(q) has d_phi entries.
    RC_ASSERT(static_cast<index_t>(fq.size()) != W.size(0));
    bool threw = false;
    try {
      ref::read(ref::transpose(W), fq);  // (W^T) phi(q) = (phi(q)^T W)^T
    } catch (const Error&) {
      threw = true;
    }
    RC_ASSERT(threw);
  });
}

TEST_CASE("Linear attention with the transposed read W transposed phi of q disagrees with the parallel form even for square W") {
  SECTION("a 2 x 2 example computed by hand") {
    // k = (1, 0), v = (0, 1), q = (1, 0): W = v k^T = [[0, 0], [1, 0]].
    // Right order: W q = (0, 1) = v, as the parallel form (q . k) v = v says.
    // Transposed:  W^T q = [[0, 1], [0, 0]] (1, 0) = (0, 0).
    auto q = Tensor<double>::from({1, 2}, {1, 0}), k = Tensor<double>::from({1, 2}, {1, 0});
    auto v = Tensor<double>::from({1, 2}, {0, 1});
    const Tensor<double> y = ref::linear_attention_parallel(q, k, v);
    REQUIRE(y(0, 0) == 0.0);
    REQUIRE(y(0, 1) == 1.0);
    Tensor<double> W({2, 2});
    ref::linear_attention_step<double>(W, {1, 0}, {0, 1});
    REQUIRE(ref::read<double>(W, {1, 0}) == Vec<double>{0, 1});
    REQUIRE(ref::read<double>(ref::transpose(W), {1, 0}) == Vec<double>{0, 0});
  }
  rc::prop("recurrent with W^T phi(q) != parallel while recurrent with W phi(q) == parallel", [] {
    Head s = draw_head(/*min_K=*/2, /*square=*/true);
    Tensor<double> W({s.V, s.K}), y_right({s.T, s.V}), y_wrong({s.T, s.V});
    for (index_t i = 0; i < s.T; ++i) {
      ref::linear_attention_step(W, row(s.k, i), row(s.v, i));
      const Vec<double> a = ref::read(W, row(s.q, i)), b = ref::read(ref::transpose(W), row(s.q, i));
      for (index_t e = 0; e < s.V; ++e) y_right(i, e) = a[e], y_wrong(i, e) = b[e];
    }
    const Tensor<double> yp = ref::linear_attention_parallel(s.q, s.k, s.v);
    RC_ASSERT(compare(y_right, yp).within(kTol));
    RC_ASSERT(compare(y_wrong, yp).rel_rms > 1e-6);  // generic data: W is not symmetric
  });
}

TEST_CASE("Sequence-level linear attention equals the parallel form per head with scale applied to q") {
  rc::prop("naive_recurrent_linear_attn o[b, :, h] == scale * linear_attention_parallel(q, k, v)", [] {
    Case c = *gen_case();
    c.initial_state = false;  // the parallel form starts from W = 0
    Problem<double> p = make_problem<double>(Op::linear_attn, c, /*unit_keys=*/false);
    if (*rc::gen::arbitrary<bool>()) p.opt.scale = *rc::gen::inRange(1, 301) / 100.0;
    p.opt.use_qk_l2norm = *rc::gen::arbitrary<bool>();
    const double scale = p.opt.scale ? *p.opt.scale : 1.0 / std::sqrt(double(c.K));
    ref::LinearAttnOptions<double> lo;
    lo.phi = p.opt.use_qk_l2norm ? FeatureMap::l2norm : FeatureMap::identity;
    const auto out = ref::naive_recurrent_linear_attn(p.q, p.k, p.v, p.opt);
    for (index_t n = 0; n < p.N; ++n) {
      const index_t bb = c.cu_seqlens.empty() ? n : 0;
      const index_t t0 = c.cu_seqlens.empty() ? 0 : c.cu_seqlens[n];
      const index_t len = (c.cu_seqlens.empty() ? c.T : c.cu_seqlens[n + 1]) - t0;
      if (len == 0) continue;
      for (index_t h = 0; h < c.H; ++h) {
        Tensor<double> q({len, c.K}), k({len, c.K}), v({len, c.V}), got({len, c.V});
        for (index_t t = 0; t < len; ++t) {
          for (index_t i = 0; i < c.K; ++i) q(t, i) = p.q(bb, t0 + t, h, i), k(t, i) = p.k(bb, t0 + t, h, i);
          for (index_t j = 0; j < c.V; ++j) v(t, j) = p.v(bb, t0 + t, h, j), got(t, j) = out.o(bb, t0 + t, h, j);
        }
        Tensor<double> want = ref::linear_attention_parallel(q, k, v, lo);
        for (double& e : want) e *= scale;
        RC_ASSERT(compare(got, want).within(kTol));
      }
    }
  });
}
