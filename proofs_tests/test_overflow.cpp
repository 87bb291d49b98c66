// proofs_tests/test_overflow.cpp -- finite inputs whose results leave the floating-point range get an
// error naming the argument and the cause, never a silent NaN or Inf (the project's bad-input rule).
//
// The classic case: float32 keys that are not L2-normalised. The delta rule's transition I - beta k k^T
// has the eigenvalue 1 - beta ||k||^2, below -1 as soon as beta ||k||^2 > 2 (SPEC section 2), so with
// ||k||^2 ~ K = 64 and beta = 1 the state grows ~63-fold per token and passes float32's 3.4e38 within a
// few dozen tokens. The reference, the chunked and fused CPU kernels and both backwards must say so. The
// same inputs with normalised keys must still run (so each check is about overflow, not about the inputs).
// Also: softmax scores that overflow, linear attention's normaliser at 0, a tensor shape whose element
// count overflows, a null pointer wrapped as data, and the routing projection on an empty batch.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "optimized/cpu/chunk.hpp"
#include "optimized/cpu/chunk_backward.hpp"
#include "optimized/cpu/fused_recurrent.hpp"
#include "reference/backward.hpp"
#include "reference/linear_attention.hpp"
#include "reference/recurrent.hpp"
#include "reference/routing.hpp"
#include "reference/softmax_attention.hpp"

using namespace linattn;
using Catch::Matchers::Contains;

namespace {

Tensor<float> normal(std::vector<index_t> shape, std::mt19937& rng, float s = 1.0f) {
  Tensor<float> t(std::move(shape));
  std::normal_distribution<float> d(0.0f, s);
  for (float& x : t) x = d(rng);
  return t;
}

/// DeltaNet inputs [1, 100, 1, 64] with unnormalised N(0, 1) keys and beta = 1 (beta ||k||^2 ~ 64).
struct Exploding {
  std::mt19937 rng{5};
  Tensor<float> q = normal({1, 100, 1, 64}, rng), k = normal({1, 100, 1, 64}, rng),
                v = normal({1, 100, 1, 64}, rng), beta = Tensor<float>({1, 100, 1}, 1.0f),
                do_ = normal({1, 100, 1, 64}, rng);
};

/// `call` must throw linattn::Error from `fn` blaming the keys and beta, with the remedy.
void require_overflow(const std::function<void()>& call, const std::string& fn) {
  INFO(fn);
  REQUIRE_THROWS_AS(call(), Error);
  REQUIRE_THROWS_WITH(call(), Contains(fn + ": argument 'k, beta'") && Contains("beta ||k||^2 > 2") &&
                                  Contains("use_qk_l2norm") && Contains("but got an overflow"));
}

}  // namespace

TEST_CASE("Unnormalised float32 keys that make the delta rule overflow get an error from every path") {
  Exploding x;
  ref::RecurrentOptions<float> ro;
  ro.output_final_state = true;
  cpu::ChunkOptions<float> co;
  co.output_final_state = true;
  SECTION("the reference forward names the token") {
    require_overflow([&] { ref::naive_recurrent_delta_rule(x.q, x.k, x.v, x.beta, ro); }, "naive_recurrent_delta_rule");
    REQUIRE_THROWS_WITH(ref::naive_recurrent_delta_rule(x.q, x.k, x.v, x.beta, ro), Contains("sequence 0, head 0, token"));
  }
  SECTION("the reference backward") {
    require_overflow([&] { ref::naive_recurrent_delta_rule_backward(x.q, x.k, x.v, x.beta, x.do_, Tensor<float>(), ro); },
                     "naive_recurrent_delta_rule_backward");
  }
  SECTION("the chunked forward") {
    require_overflow([&] { cpu::chunk_delta_rule(x.q, x.k, x.v, x.beta, co); }, "chunk_delta_rule");
  }
  SECTION("the fused recurrent forward") {
    require_overflow([&] { cpu::fused_recurrent_delta_rule(x.q, x.k, x.v, x.beta, ro); }, "fused_recurrent_delta_rule");
  }
  SECTION("the chunked backward") {
    require_overflow([&] { cpu::chunk_delta_rule_backward(x.q, x.k, x.v, x.beta, x.do_, Tensor<float>(), co); },
                     "chunk_delta_rule_backward");
  }
  SECTION("the same inputs with L2-normalised keys run everywhere, with finite results") {
    ro.use_qk_l2norm = true;
    co.use_qk_l2norm = true;
    const auto r = ref::naive_recurrent_delta_rule(x.q, x.k, x.v, x.beta, ro);
    const auto c = cpu::chunk_delta_rule(x.q, x.k, x.v, x.beta, co);
    const auto f = cpu::fused_recurrent_delta_rule(x.q, x.k, x.v, x.beta, ro);
    const auto g = cpu::chunk_delta_rule_backward(x.q, x.k, x.v, x.beta, x.do_, Tensor<float>(), co);
    const auto gr = ref::naive_recurrent_delta_rule_backward(x.q, x.k, x.v, x.beta, x.do_, Tensor<float>(), ro);
    for (const Tensor<float>* t : {&r.o, &r.final_state, &c.o, &c.final_state, &f.o, &g.dq, &g.dk, &gr.dbeta})
      for (float e : *t) REQUIRE(std::isfinite(e));
  }
}

TEST_CASE("Softmax attention with finite inputs whose scores overflow says so instead of returning NaN") {
  Tensor<float> q({1, 4, 1, 2}, 1e20f), k({1, 4, 1, 2}, 1e20f), v({1, 4, 1, 2}, 1.0f);
  REQUIRE_THROWS_WITH(ref::naive_softmax_attn(q, k, v),
                      Contains("naive_softmax_attn: argument 'q, k'") && Contains("overflow") &&
                          Contains("query 0, key 0"));
  Tensor<float> kneg({1, 4, 1, 2}, -1e20f);  // every score -inf: was reported as a fully masked query
  REQUIRE_THROWS_WITH(ref::naive_softmax_attn(q, kneg, v),
                      Contains("argument 'q, k'") && Contains("-inf for every key of query 0") && !Contains("mask"));
  // one score at -inf among finite ones is a weight of 0, not an error: query 1 sees key 0 (-inf) and key 1 (0)
  Tensor<float> q2({1, 2, 1, 1}, 1e20f), k2({1, 2, 1, 1}, 0.0f), v2({1, 2, 1, 1}, 0.0f);
  k2(0, 0, 0, 0) = -1e20f;
  v2(0, 0, 0, 0) = 5.0f, v2(0, 1, 0, 0) = 3.0f;
  q2(0, 0, 0, 0) = 0.0f;  // query 0 scores key 0 at 0
  const Tensor<float> y2 = ref::naive_softmax_attn(q2, k2, v2);
  REQUIRE(y2(0, 0, 0, 0) == 5.0f);
  REQUIRE(y2(0, 1, 0, 0) == 3.0f);
  const Tensor<float> small({1, 4, 1, 2}, 1e-3f);  // the same shapes at sane sizes run
  for (float e : ref::naive_softmax_attn(small, small, v)) REQUIRE(std::isfinite(e));
}

TEST_CASE("Normalised linear attention with a zero denominator asks for eps > 0 instead of returning NaN") {
  // relu features of negative inputs are 0: z_1 . phi(q_1) + 0 = 0 at the first token.
  const auto q = Tensor<double>::from({2, 2}, {-1, -1, 1, 1});
  const auto v = Tensor<double>::from({2, 1}, {1, 2});
  ref::LinearAttnOptions<double> o;
  o.phi = ref::FeatureMap::relu;
  o.normalize = true;
  o.eps = 0.0;
  REQUIRE_THROWS_WITH(ref::linear_attention_recurrent(q, q, v, o),
                      Contains("linear_attention_recurrent: argument 'eps'") && Contains("pass eps > 0") &&
                          Contains("at token 0"));
  REQUIRE_THROWS_WITH(ref::linear_attention_parallel(q, q, v, o),
                      Contains("linear_attention_parallel: argument 'eps'") && Contains("at token 0"));
  o.eps = 1e-6;  // the default: a defined (zero) output
  const Tensor<double> y = ref::linear_attention_recurrent(q, q, v, o);
  REQUIRE(y(0, 0) == 0.0);
  REQUIRE(std::isfinite(y(1, 0)));
}

TEST_CASE("A tensor shape whose element count overflows and a null wrapped pointer are refused") {
  const index_t big = std::numeric_limits<index_t>::max() / 2;
  REQUIRE_THROWS_WITH(Tensor<float>({big, 4}), Contains("Tensor: argument 'shape'") && Contains("elements in all"));
  REQUIRE_THROWS_WITH(Tensor<float>({big, big, 3}), Contains("elements in all"));
  REQUIRE(Tensor<float>({big, big, 0}).numel() == 0);  // an empty shape is fine however large its other sizes
  float* null = nullptr;
  REQUIRE_THROWS_WITH(Tensor<float>::wrap(null, {2, 3}),
                      Contains("Tensor::wrap: argument 'data'") && Contains("null pointer"));
  REQUIRE(Tensor<float>::wrap(null, {0, 3}).numel() == 0);
}

TEST_CASE("residual_inject accepts an empty batch or sequence and returns an empty result") {
  const Tensor<double> P({5, 6});
  const Tensor<double> y = ref::residual_inject(Tensor<double>({1, 0, 5}), Tensor<double>({1, 0, 2, 3}), P);
  REQUIRE(y.shape() == std::vector<index_t>{1, 0, 5});
  REQUIRE(ref::residual_inject(Tensor<double>({0, 4, 5}), Tensor<double>({0, 4, 2, 3}), P).numel() == 0);
  // ... and still checks P against H * V when the batch is empty.
  REQUIRE_THROWS_WITH(ref::residual_inject(Tensor<double>({1, 0, 5}), Tensor<double>({1, 0, 2, 3}),
                                           Tensor<double>({5, 7})),
                      Contains("'P'") && Contains("[5, 7]"));
}
