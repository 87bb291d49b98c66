// proofs_tests/test_reductions.cpp -- the reductions of SPEC section 2, per token and per sequence.
//
// GDN2 contains KDA contains GDN contains DeltaNet; GDN2 with b = 0, w = 1, alpha = 1 is linear
// attention (Eq.5); and any delta rule with zero write gates and no decay leaves W unchanged.
// Each statement is checked twice: on one token with the paper-notation steps of
// reference/delta_rules.hpp (random W, kappa, v and gates; d_k and d_v drawn independently), and on
// whole random batches with the sequence functions of reference/recurrent.hpp (random scale,
// initial state, qk L2 norm, gate extremes, packed sequences; outputs, final state and trace).
// Float64. The two sides of each reduction differ only by rounding: tolerance 1e-12 relative RMS.
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
using ref::StepTrace;
using ref::Vec;

namespace {

constexpr double kTol = 1e-12;

// ---- per-token helpers (draws: generators.hpp, namespace token) ------------------------------

void assert_same_trace(const StepTrace<double>& a, const StepTrace<double>& b) {
  RC_ASSERT(rel_err(a.v_bar, b.v_bar) <= kTol);
  RC_ASSERT(rel_err(a.r, b.r) <= kTol);
  RC_ASSERT(rel_err(a.written, b.written) <= kTol);
}

// ---- sequence helpers --------------------------------------------------------------------------

/// Random options on top of make_problem's: scale given or default, qk L2 norm on or off, trace on.
void randomize_options(Problem<double>& p) {
  if (*rc::gen::arbitrary<bool>()) p.opt.scale = *rc::gen::inRange(1, 301) / 100.0;
  p.opt.use_qk_l2norm = *rc::gen::arbitrary<bool>();
  p.opt.return_trace = true;
}

/// A [B, T, H] tensor broadcast along a new last dimension of size D.
Tensor<double> broadcast_last(const Tensor<double>& x, index_t D) {
  std::vector<index_t> shape = x.shape();
  shape.push_back(D);
  Tensor<double> y(shape);
  for (index_t i = 0; i < x.numel(); ++i)
    for (index_t d = 0; d < D; ++d) y.data()[i * D + d] = x.data()[i];
  return y;
}

void assert_same_output(const ref::RecurrentOutput<double>& got,
                        const ref::RecurrentOutput<double>& want) {
  RC_ASSERT(compare(got.o, want.o).within(kTol));
  RC_ASSERT(compare(got.final_state, want.final_state).within(kTol));
  RC_ASSERT(compare(got.v_bar, want.v_bar).within(kTol));
  RC_ASSERT(compare(got.r, want.r).within(kTol));
  RC_ASSERT(compare(got.written, want.written).within(kTol));
}

}  // namespace

// =================================================================================================
// Per token (reference/delta_rules.hpp).
// =================================================================================================

TEST_CASE("GDN2 step with b = beta 1 and w = beta 1 is the KDA step") {
  rc::prop("Eqs.21-24 with b = w = beta 1 equal Eqs.18-20", [] {
    Token t = draw_token();
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = normal_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    const Vec<double> alpha = uniform_vec(t.rng, t.K, 0.0, 1.0);
    const double beta = uniform(t.rng, 0.0, 1.0);
    Tensor<double> Wg = W0.clone(), Wk = W0.clone();
    const auto tg = ref::gdn2_step(Wg, kappa, v, alpha, Vec<double>(t.K, beta), Vec<double>(t.V, beta));
    const auto tk = ref::kda_step(Wk, kappa, v, alpha, beta);
    RC_ASSERT(rel_err(Wg, Wk) <= kTol);
    assert_same_trace(tg, tk);
  });
}

TEST_CASE("KDA step with alpha_vec = alpha 1 is the GDN step") {
  rc::prop("Eqs.18-20 with a uniform decay equal Eqs.15-17", [] {
    Token t = draw_token();
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = normal_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    const double alpha = uniform(t.rng, 0.0, 1.0), beta = uniform(t.rng, 0.0, 1.0);
    Tensor<double> Wk = W0.clone(), Wg = W0.clone();
    const auto tk = ref::kda_step(Wk, kappa, v, Vec<double>(t.K, alpha), beta);
    const auto tg = ref::gdn_step(Wg, kappa, v, alpha, beta);
    RC_ASSERT(rel_err(Wk, Wg) <= kTol);
    assert_same_trace(tk, tg);
  });
}

TEST_CASE("GDN step with alpha = 1 is the DeltaNet step") {
  rc::prop("Eqs.15-17 with alpha = 1 equal Eq.14", [] {
    Token t = draw_token();
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = normal_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    const double beta = uniform(t.rng, 0.0, 1.0);
    Tensor<double> Wg = W0.clone(), Wd = W0.clone();
    const auto tg = ref::gdn_step(Wg, kappa, v, 1.0, beta);
    const auto td = ref::deltanet_step(Wd, kappa, v, beta);
    RC_ASSERT(rel_err(Wg, Wd) <= kTol);
    assert_same_trace(tg, td);
  });
}

TEST_CASE("GDN2 step with b = 0 and w = 1 and alpha = 1 is the linear attention step of Eq.5") {
  rc::prop("Eqs.21-24 reduce to W_i = W_{i-1} + v kappa^T", [] {
    Token t = draw_token();
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = normal_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    Tensor<double> Wg = W0.clone(), Wl = W0.clone();
    const auto tg = ref::gdn2_step(Wg, kappa, v, Vec<double>(t.K, 1.0), Vec<double>(t.K, 0.0),
                                   Vec<double>(t.V, 1.0));
    const auto tl = ref::linear_attention_step(Wl, kappa, v);
    RC_ASSERT(rel_err(Wg, Wl) <= kTol);
    assert_same_trace(tg, tl);
    // And Eq.5 itself, written out here: W_i = W_{i-1} + v kappa^T.
    Tensor<double> want = W0.clone();
    for (index_t i = 0; i < t.V; ++i)
      for (index_t j = 0; j < t.K; ++j) want(i, j) += v[i] * kappa[j];
    RC_ASSERT(rel_err(Wg, want) <= kTol);
  });
}

TEST_CASE("Delta rule steps with zero write gates and alpha = 1 leave W unchanged") {
  rc::prop("beta = 0 or b = w = 0 with no decay is the identity on W", [] {
    Token t = draw_token();
    const Tensor<double> W0 = normal_mat(t.rng, t.V, t.K);
    const Vec<double> kappa = normal_vec(t.rng, t.K), v = normal_vec(t.rng, t.V);
    const Vec<double> ones(t.K, 1.0), zk(t.K, 0.0), zv(t.V, 0.0);
    Tensor<double> Wd = W0.clone(), Wg = W0.clone(), Wk = W0.clone(), W2 = W0.clone();
    ref::deltanet_step(Wd, kappa, v, 0.0);
    ref::gdn_step(Wg, kappa, v, 1.0, 0.0);
    ref::kda_step(Wk, kappa, v, ones, 0.0);
    ref::gdn2_step(W2, kappa, v, ones, zk, zv);
    for (const Tensor<double>* W : {&Wd, &Wg, &Wk, &W2})
      for (index_t i = 0; i < W0.numel(); ++i) RC_ASSERT(W->data()[i] == W0.data()[i]);  // exactly
  });
}

// =================================================================================================
// Per sequence (reference/recurrent.hpp), [B, T, H, D] layout, log-space gates.
// =================================================================================================

TEST_CASE("GDN2 sequence with b = beta 1 and w = beta 1 is the KDA sequence") {
  rc::prop("naive_recurrent_gdn2 == naive_recurrent_kda", [] {
    const Case c = *gen_case();
    Problem<double> p = make_problem<double>(Op::kda, c);
    randomize_options(p);
    const auto kda = ref::naive_recurrent_kda(p.q, p.k, p.v, p.gates.g, p.gates.beta, p.opt);
    const auto gdn2 = ref::naive_recurrent_gdn2(p.q, p.k, p.v, p.gates.g,
                                                broadcast_last(p.gates.beta, c.K),
                                                broadcast_last(p.gates.beta, c.V), p.opt);
    assert_same_output(gdn2, kda);
  });
}

TEST_CASE("KDA sequence with the same log-decay on every key channel is the GDN sequence") {
  rc::prop("naive_recurrent_kda with g broadcast over K == naive_recurrent_gated_delta_rule", [] {
    const Case c = *gen_case();
    Problem<double> p = make_problem<double>(Op::gated_delta_rule, c);
    randomize_options(p);
    const auto gdn =
        ref::naive_recurrent_gated_delta_rule(p.q, p.k, p.v, p.gates.g, p.gates.beta, p.opt);
    const auto kda = ref::naive_recurrent_kda(p.q, p.k, p.v, broadcast_last(p.gates.g, c.K),
                                              p.gates.beta, p.opt);
    assert_same_output(kda, gdn);
  });
}

TEST_CASE("GDN sequence with g = 0 is the DeltaNet sequence") {
  rc::prop("naive_recurrent_gated_delta_rule with log alpha = 0 == naive_recurrent_delta_rule", [] {
    const Case c = *gen_case();
    Problem<double> p = make_problem<double>(Op::delta_rule, c);
    randomize_options(p);
    const auto dn = ref::naive_recurrent_delta_rule(p.q, p.k, p.v, p.gates.beta, p.opt);
    const auto gdn = ref::naive_recurrent_gated_delta_rule(
        p.q, p.k, p.v, Tensor<double>({c.B, c.T, c.H}, 0.0), p.gates.beta, p.opt);
    assert_same_output(gdn, dn);
  });
}

TEST_CASE("GDN2 sequence with b = 0 and w = 1 and g = 0 is the linear attention sequence") {
  rc::prop("naive_recurrent_gdn2 reduces to naive_recurrent_linear_attn", [] {
    const Case c = *gen_case();
    Problem<double> p = make_problem<double>(Op::linear_attn, c);
    randomize_options(p);
    const auto la = ref::naive_recurrent_linear_attn(p.q, p.k, p.v, p.opt);
    const auto gdn2 = ref::naive_recurrent_gdn2(
        p.q, p.k, p.v, Tensor<double>({c.B, c.T, c.H, c.K}, 0.0),
        Tensor<double>({c.B, c.T, c.H, c.K}, 0.0), Tensor<double>({c.B, c.T, c.H, c.V}, 1.0), p.opt);
    assert_same_output(gdn2, la);
  });
}

TEST_CASE("Delta rule sequences with zero write gates and g = 0 keep the initial state") {
  rc::prop("final state == initial state and o_t = W_0 (scale q_t) for DN GDN KDA GDN2", [] {
    Case c = *gen_case();
    c.initial_state = true;
    Problem<double> p = make_problem<double>(Op::gdn2, c);
    randomize_options(p);
    const index_t B = c.B, Tn = c.T, H = c.H, K = c.K, V = c.V;
    const Tensor<double> g3({B, Tn, H}, 0.0), g4({B, Tn, H, K}, 0.0), beta({B, Tn, H}, 0.0);
    const Tensor<double> b({B, Tn, H, K}, 0.0), w({B, Tn, H, V}, 0.0);
    const ref::RecurrentOutput<double> outs[] = {
        ref::naive_recurrent_delta_rule(p.q, p.k, p.v, beta, p.opt),
        ref::naive_recurrent_gated_delta_rule(p.q, p.k, p.v, g3, beta, p.opt),
        ref::naive_recurrent_kda(p.q, p.k, p.v, g4, beta, p.opt),
        ref::naive_recurrent_gdn2(p.q, p.k, p.v, g4, b, w, p.opt)};
    // The expected output, computed here: o_t = S_0^T (scale q_t), S_0 the sequence's initial state.
    const double scale = p.opt.scale ? *p.opt.scale : 1.0 / std::sqrt(double(K));
    Tensor<double> want({B, Tn, H, V});
    for (index_t n = 0; n < p.N; ++n) {
      const index_t bb = c.cu_seqlens.empty() ? n : 0;
      const index_t t0 = c.cu_seqlens.empty() ? 0 : c.cu_seqlens[n];
      const index_t t1 = c.cu_seqlens.empty() ? Tn : c.cu_seqlens[n + 1];
      for (index_t t = t0; t < t1; ++t)
        for (index_t h = 0; h < H; ++h) {
          double ss = 0;
          for (index_t i = 0; i < K; ++i) ss += p.q(bb, t, h, i) * p.q(bb, t, h, i);
          const double qn = p.opt.use_qk_l2norm ? 1.0 / std::sqrt(ss + 1e-6) : 1.0;
          for (index_t j = 0; j < V; ++j)
            for (index_t i = 0; i < K; ++i)
              want(bb, t, h, j) += p.opt.initial_state(n, h, i, j) * scale * qn * p.q(bb, t, h, i);
        }
    }
    for (const auto& out : outs) {
      for (index_t i = 0; i < out.final_state.numel(); ++i)
        RC_ASSERT(out.final_state.data()[i] == p.opt.initial_state.data()[i]);  // exactly
      RC_ASSERT(compare(out.o, want).within(kTol));
      for (index_t i = 0; i < out.written.numel(); ++i) RC_ASSERT(out.written.data()[i] == 0.0);
    }
  });
}
