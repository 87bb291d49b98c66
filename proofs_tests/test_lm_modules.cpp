// proofs_tests/test_lm_modules.cpp -- the language model's layers (walkthroughs/lm/modules.hpp)
// and the whole model (walkthroughs/lm/model.hpp) checked in float64:
//  * every backward against central finite differences of loss = sum(R * forward(inputs)) for a
//    random R (RapidCheck draws the shapes and a seed for the values);
//  * the blocked matmul against the naive loop (bit-for-bit), attention against the reference
//    naive_softmax_attn, and a few identities (RoPE is a rotation by relative position, the
//    cross-entropy of uniform logits is log V).
// Tolerance of the module checks: max |analytic - numeric| <= 1e-6 * max(1, max |numeric|)
// with step h = 1e-5 (truncation ~h^2, rounding ~1e-16 / h: both far below the bound); the whole
// model: ||analytic - numeric|| / ||numeric|| <= 1e-6 over all parameters.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <functional>
#include <random>
#include <vector>

#include "reference/softmax_attention.hpp"
#include "fd_check.hpp"
#include "walkthroughs/lm/model.hpp"

using namespace linattn;
using namespace linattn::lm;
using namespace linattn::lm::fd;  // randn, dot, numeric_grad, grad_err, rel_err (fd_check.hpp)

namespace {

constexpr double kGradTol = 1e-6;

}  // namespace

TEST_CASE("LM RMSNorm backward equals finite differences of its forward") {
  rc::prop("rmsnorm", [] {
    const index_t N = *rc::gen::inRange<index_t>(1, 5), C = *rc::gen::inRange<index_t>(1, 9);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd x = randn(rng, N * C), w = randn(rng, C), R = randn(rng, N * C);
    const double eps = 1e-2;  // smooth at the scale of h (the formula is exact for any eps)
    auto loss = [&] {
      Vd y(N * C), r(N);
      rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, eps);
      return dot(y, R);
    };
    Vd y(N * C), r(N), dx(N * C, 0.0), dw(C, 0.0);
    rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, eps);
    rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), r.data(), N, C);
    RC_ASSERT(grad_err(dx, numeric_grad(x, loss)) < kGradTol);
    RC_ASSERT(grad_err(dw, numeric_grad(w, loss)) < kGradTol);
  });
}

TEST_CASE("LM linear layer backward equals finite differences of x W transposed and accumulates") {
  rc::prop("linear", [] {
    const index_t N = *rc::gen::inRange<index_t>(1, 12), C = *rc::gen::inRange<index_t>(1, 12),
                  OC = *rc::gen::inRange<index_t>(1, 12);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd x = randn(rng, N * C), w = randn(rng, OC * C), R = randn(rng, N * OC);
    auto loss = [&] {
      Vd y(N * OC);
      linear_forward(y.data(), x.data(), w.data(), N, C, OC);
      return dot(y, R);
    };
    Vd dx(N * C, 0.0), dw(OC * C, 0.0);
    linear_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), N, C, OC);
    Vd gx = numeric_grad(x, loss), gw = numeric_grad(w, loss);
    RC_ASSERT(grad_err(dx, gx) < kGradTol);
    RC_ASSERT(grad_err(dw, gw) < kGradTol);
    // backward accumulates: a second call adds the same gradient again
    Vd dx2 = dx, dw2 = dw;
    linear_backward(dx2.data(), dw2.data(), R.data(), x.data(), w.data(), N, C, OC);
    for (size_t i = 0; i < dx.size(); ++i) RC_ASSERT(std::abs(dx2[i] - 2 * dx[i]) <= 1e-12 * (1 + std::abs(dx[i])));
    for (size_t i = 0; i < dw.size(); ++i) RC_ASSERT(std::abs(dw2[i] - 2 * dw[i]) <= 1e-12 * (1 + std::abs(dw[i])));
  });
}

TEST_CASE("LM low-rank linear backward equals finite differences of x D transposed U transposed and the forward equals x times the transposed product U D") {
  rc::prop("lowrank", [] {
    const index_t N = *rc::gen::inRange<index_t>(1, 9), C = *rc::gen::inRange<index_t>(1, 10),
                  r = *rc::gen::inRange<index_t>(1, 5), OC = *rc::gen::inRange<index_t>(1, 10);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd x = randn(rng, N * C), U = randn(rng, OC * r), D = randn(rng, r * C), R = randn(rng, N * OC);
    auto loss = [&] {
      Vd y(N * OC), t(N * r);
      lowrank_forward(y.data(), t.data(), x.data(), U.data(), D.data(), N, C, r, OC);
      return dot(y, R);
    };
    Vd y(N * OC), t(N * r), dx(N * C, 0.0), dU(OC * r, 0.0), dD(r * C, 0.0);
    lowrank_forward(y.data(), t.data(), x.data(), U.data(), D.data(), N, C, r, OC);
    // the same map as the full matrix P = U D (OC, C), formed here by the naive triple loop
    Vd P(OC * C, 0.0), yP(N * OC);
    for (index_t o = 0; o < OC; ++o)
      for (index_t j = 0; j < r; ++j)
        for (index_t c = 0; c < C; ++c) P[o * C + c] += U[o * r + j] * D[j * C + c];
    linear_forward(yP.data(), x.data(), P.data(), N, C, OC);
    RC_ASSERT(rel_err(y, yP) < 1e-12);
    lowrank_backward(dx.data(), dU.data(), dD.data(), R.data(), t.data(), x.data(), U.data(), D.data(), N, C, r, OC);
    RC_ASSERT(grad_err(dx, numeric_grad(x, loss)) < kGradTol);
    RC_ASSERT(grad_err(dU, numeric_grad(U, loss)) < kGradTol);
    RC_ASSERT(grad_err(dD, numeric_grad(D, loss)) < kGradTol);
  });
}

TEST_CASE("LM blocked matmul is bit for bit the naive i k j loop for any shape and thread count and for a transposed A") {
  rc::prop("gemm", [] {
    const index_t M = *rc::gen::inRange<index_t>(1, 80), N = *rc::gen::inRange<index_t>(1, 80),
                  K = *rc::gen::inRange<index_t>(1, 300);
    const bool acc = *rc::gen::arbitrary<bool>(), trans_a = *rc::gen::arbitrary<bool>();
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    std::normal_distribution<float> nd;
    std::vector<float> A(M * K), Bm(K * N), C0(M * N);
    for (float& v : A) v = nd(rng);
    for (float& v : Bm) v = nd(rng);
    for (float& v : C0) v = nd(rng);
    std::vector<float> naive = C0;
    if (!acc) std::fill(naive.begin(), naive.end(), 0.0f);
    for (index_t i = 0; i < M; ++i)
      for (index_t k = 0; k < K; ++k)
        for (index_t j = 0; j < N; ++j) naive[i * N + j] += A[i * K + k] * Bm[k * N + j];
    const int before = num_threads();
    for (int threads : {1, 2, 3}) {  // (a no-op without OpenMP)
      set_num_threads(threads);
      std::vector<float> C = C0;
      if (trans_a) {  // the same product with A stored transposed (K x M)
        std::vector<float> At(K * M);
        for (index_t i = 0; i < M; ++i)
          for (index_t k = 0; k < K; ++k) At[k * M + i] = A[i * K + k];
        gemm(M, N, K, At.data(), M, Bm.data(), N, C.data(), N, acc, true);
      } else {
        gemm(M, N, K, A.data(), K, Bm.data(), N, C.data(), N, acc);
      }
      RC_ASSERT(C == naive);
    }
    set_num_threads(before);
  });
}

TEST_CASE("LM SwiGLU backward equals finite differences of SiLU a times b") {
  rc::prop("swiglu", [] {
    const index_t n = *rc::gen::inRange<index_t>(1, 30);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd a = randn(rng, n, 3.0), b = randn(rng, n), R = randn(rng, n);
    auto loss = [&] {
      Vd y(n);
      swiglu_forward(y.data(), a.data(), b.data(), n);
      return dot(y, R);
    };
    Vd da(n, 0.0), db(n, 0.0);
    swiglu_backward(da.data(), db.data(), R.data(), a.data(), b.data(), n);
    RC_ASSERT(grad_err(da, numeric_grad(a, loss)) < kGradTol);
    RC_ASSERT(grad_err(db, numeric_grad(b, loss)) < kGradTol);
  });
}

TEST_CASE("LM output gate backward equals finite differences for sigmoid and SiLU gates") {
  rc::prop("gate", [] {
    const index_t n = *rc::gen::inRange<index_t>(1, 30);
    const GateAct g = *rc::gen::element(GateAct::sigmoid, GateAct::silu);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd x = randn(rng, n), z = randn(rng, n, 3.0), R = randn(rng, n);
    auto loss = [&] {
      Vd y(n);
      gate_forward(y.data(), x.data(), z.data(), n, g);
      return dot(y, R);
    };
    Vd dx(n, 0.0), dz(n, 0.0);
    gate_backward(dx.data(), dz.data(), R.data(), x.data(), z.data(), n, g);
    RC_ASSERT(grad_err(dx, numeric_grad(x, loss)) < kGradTol);
    RC_ASSERT(grad_err(dz, numeric_grad(z, loss)) < kGradTol);
  });
}

TEST_CASE("LM cross-entropy backward equals finite differences and uniform logits cost log V") {
  rc::prop("crossentropy", [] {
    const index_t N = *rc::gen::inRange<index_t>(1, 6), V = *rc::gen::inRange<index_t>(2, 20);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd logits = randn(rng, N * V, 3.0);
    std::vector<int> tg(N);
    std::uniform_int_distribution<int> u(0, int(V) - 1);
    for (int& t : tg) t = u(rng);
    Vd Rl = randn(rng, N);  // weights of the per-row losses
    auto loss = [&] {
      Vd l(N), p(N * V);
      crossentropy_forward(l.data(), p.data(), logits.data(), tg.data(), N, V);
      return dot(l, Rl);
    };
    // backward takes one scalar dloss for all rows: check row by row with one-row calls
    Vd dl(N * V, 0.0), l(N), p(N * V);
    crossentropy_forward(l.data(), p.data(), logits.data(), tg.data(), N, V);
    for (index_t n = 0; n < N; ++n)
      crossentropy_backward(dl.data() + n * V, p.data() + n * V, tg.data() + n, Rl[n], 1, V);
    RC_ASSERT(grad_err(dl, numeric_grad(logits, loss)) < kGradTol);
    Vd flat(N * V, 0.25);
    crossentropy_forward(l.data(), p.data(), flat.data(), tg.data(), N, V);
    for (index_t n = 0; n < N; ++n) RC_ASSERT(std::abs(l[n] - std::log(double(V))) < 1e-12);
  });
}

TEST_CASE("LM embedding backward scatters the output gradient to the rows of the tokens") {
  rc::prop("embedding", [] {
    const index_t N = *rc::gen::inRange<index_t>(1, 10), C = *rc::gen::inRange<index_t>(1, 6),
                  V = *rc::gen::inRange<index_t>(1, 6);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd wte = randn(rng, V * C), R = randn(rng, N * C);
    std::vector<int> tok(N);
    std::uniform_int_distribution<int> u(0, int(V) - 1);
    for (int& t : tok) t = u(rng);
    auto loss = [&] {
      Vd y(N * C);
      embedding_forward(y.data(), tok.data(), wte.data(), N, C);
      return dot(y, R);
    };
    Vd dw(V * C, 0.0);
    embedding_backward(dw.data(), R.data(), tok.data(), N, C);
    RC_ASSERT(grad_err(dw, numeric_grad(wte, loss)) < kGradTol);
  });
}

TEST_CASE("LM RoPE backward equals finite differences and q k scores depend only on t minus s") {
  rc::prop("rope", [] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), T = *rc::gen::inRange<index_t>(1, 7),
                  nh = *rc::gen::inRange<index_t>(1, 3), D = 2 * *rc::gen::inRange<index_t>(1, 4);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    const double theta = 10000;
    Vd x = randn(rng, B * T * nh * D), R = randn(rng, B * T * nh * D);
    auto loss = [&] {
      Vd y(x.size());
      rope_forward(y.data(), x.data(), B, T, nh, D, theta);
      return dot(y, R);
    };
    Vd dx(x.size(), 0.0);
    rope_backward(dx.data(), R.data(), B, T, nh, D, theta);
    RC_ASSERT(grad_err(dx, numeric_grad(x, loss)) < kGradTol);
    // the same q at every position and the same k at every position: rope(q)_t . rope(k)_s
    // depends on t - s only
    const index_t L = 6;
    Vd q1 = randn(rng, D), k1 = randn(rng, D), q(L * D), k(L * D), rq(L * D), rk(L * D);
    for (index_t t = 0; t < L; ++t)
      for (index_t d = 0; d < D; ++d) q[t * D + d] = q1[d], k[t * D + d] = k1[d];
    rope_forward(rq.data(), q.data(), 1, L, 1, D, theta);
    rope_forward(rk.data(), k.data(), 1, L, 1, D, theta);
    auto score = [&](index_t t, index_t s) {
      double acc = 0;
      for (index_t d = 0; d < D; ++d) acc += rq[t * D + d] * rk[s * D + d];
      return acc;
    };
    for (index_t t = 1; t < L; ++t)
      for (index_t s = 1; s <= t; ++s) RC_ASSERT(std::abs(score(t, s) - score(t - 1, s - 1)) < 1e-10);
  });
}

TEST_CASE("LM causal GQA attention equals the reference naive softmax attention") {
  rc::prop("attention forward", [] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), T = *rc::gen::inRange<index_t>(1, 90),
                  Hkv = *rc::gen::inRange<index_t>(1, 3), G = *rc::gen::inRange<index_t>(1, 3),
                  D = *rc::gen::inRange<index_t>(1, 9), H = Hkv * G;
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd q = randn(rng, B * T * H * D, 2.0), k = randn(rng, B * T * Hkv * D, 2.0), v = randn(rng, B * T * Hkv * D);
    Vd y(B * T * H * D), P(B * H * T * T);
    attention_forward(y.data(), P.data(), q.data(), k.data(), v.data(), B, T, H, Hkv, D);
    const auto want = ref::naive_softmax_attn(Tensor<double>::from({B, T, H, D}, q),
                                              Tensor<double>::from({B, T, Hkv, D}, k),
                                              Tensor<double>::from({B, T, Hkv, D}, v));
    double err = 0;
    for (index_t i = 0; i < want.numel(); ++i) err = std::max(err, std::abs(want.data()[i] - y[i]));
    RC_ASSERT(err < 1e-12);
  });
}

TEST_CASE("LM causal GQA attention backward equals finite differences in q k and v") {
  rc::prop("attention backward", [] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), T = *rc::gen::inRange<index_t>(1, 7),
                  Hkv = *rc::gen::inRange<index_t>(1, 3), G = *rc::gen::inRange<index_t>(1, 3),
                  D = *rc::gen::inRange<index_t>(1, 5), H = Hkv * G;
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd q = randn(rng, B * T * H * D), k = randn(rng, B * T * Hkv * D), v = randn(rng, B * T * Hkv * D);
    Vd R = randn(rng, B * T * H * D);
    auto loss = [&] {
      Vd y(B * T * H * D), P(B * H * T * T);
      attention_forward(y.data(), P.data(), q.data(), k.data(), v.data(), B, T, H, Hkv, D);
      return dot(y, R);
    };
    Vd y(B * T * H * D), P(B * H * T * T), dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
    attention_forward(y.data(), P.data(), q.data(), k.data(), v.data(), B, T, H, Hkv, D);
    attention_backward(dq.data(), dk.data(), dv.data(), R.data(), P.data(), q.data(), k.data(),
                       v.data(), B, T, H, Hkv, D);
    RC_ASSERT(grad_err(dq, numeric_grad(q, loss)) < kGradTol);
    RC_ASSERT(grad_err(dk, numeric_grad(k, loss)) < kGradTol);
    RC_ASSERT(grad_err(dv, numeric_grad(v, loss)) < kGradTol);
  });
}

TEST_CASE("LM causal short convolution with SiLU backward equals finite differences") {
  rc::prop("shortconv", [] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), T = *rc::gen::inRange<index_t>(1, 8),
                  C = *rc::gen::inRange<index_t>(1, 20), KW = *rc::gen::inRange<index_t>(1, 5);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd x = randn(rng, B * T * C), w = randn(rng, C * KW), R = randn(rng, B * T * C);
    auto loss = [&] {
      Vd y(x.size()), pre(x.size());
      shortconv_forward(y.data(), pre.data(), x.data(), w.data(), B, T, C, KW);
      return dot(y, R);
    };
    Vd y(x.size()), pre(x.size()), dx(x.size(), 0.0), dw(w.size(), 0.0);
    shortconv_forward(y.data(), pre.data(), x.data(), w.data(), B, T, C, KW);
    shortconv_backward(dx.data(), dw.data(), R.data(), pre.data(), x.data(), w.data(), B, T, C, KW);
    RC_ASSERT(grad_err(dx, numeric_grad(x, loss)) < kGradTol);
    RC_ASSERT(grad_err(dw, numeric_grad(w, loss)) < kGradTol);
    // causality: changing the last token changes no earlier output
    Vd x2 = x;
    for (index_t c = 0; c < C; ++c) x2[((B - 1) * T + T - 1) * C + c] += 1.0;
    Vd y2(x.size()), pre2(x.size());
    shortconv_forward(y2.data(), pre2.data(), x2.data(), w.data(), B, T, C, KW);
    for (index_t i = 0; i < ((B - 1) * T + T - 1) * C; ++i) RC_ASSERT(y2[i] == y[i]);
  });
}

TEST_CASE("LM L2 normalisation backward equals finite differences") {
  rc::prop("l2norm", [] {
    const index_t N = *rc::gen::inRange<index_t>(1, 5), D = *rc::gen::inRange<index_t>(1, 9);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd x = randn(rng, N * D), R = randn(rng, N * D);
    auto loss = [&] {
      Vd y(x.size()), r(N);
      l2norm_forward(y.data(), r.data(), x.data(), N, D, 1e-2);
      return dot(y, R);
    };
    Vd y(x.size()), r(N), dx(x.size(), 0.0);
    l2norm_forward(y.data(), r.data(), x.data(), N, D, 1e-2);
    l2norm_backward(dx.data(), R.data(), y.data(), r.data(), N, D);
    RC_ASSERT(grad_err(dx, numeric_grad(x, loss)) < kGradTol);
  });
}

TEST_CASE("LM per-head RMSNorm with output gate backward equals finite differences") {
  rc::prop("head norm gate", [] {
    const index_t N = *rc::gen::inRange<index_t>(1, 4), H = *rc::gen::inRange<index_t>(1, 4),
                  D = *rc::gen::inRange<index_t>(1, 6);
    const GateAct g = *rc::gen::element(GateAct::sigmoid, GateAct::silu);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    Vd x = randn(rng, N * H * D), z = randn(rng, N * H * D), w = randn(rng, D), R = randn(rng, N * H * D);
    auto loss = [&] {
      Vd y(x.size()), nrm(x.size()), r(N * H);
      head_norm_gate_forward(y.data(), nrm.data(), r.data(), x.data(), z.data(), w.data(), N, H, D, 1e-2, g);
      return dot(y, R);
    };
    Vd y(x.size()), nrm(x.size()), r(N * H), dx(x.size(), 0.0), dz(x.size(), 0.0), dw(D, 0.0);
    head_norm_gate_forward(y.data(), nrm.data(), r.data(), x.data(), z.data(), w.data(), N, H, D, 1e-2, g);
    head_norm_gate_backward(dx.data(), dz.data(), dw.data(), R.data(), nrm.data(), r.data(),
                            x.data(), z.data(), w.data(), N, H, D, g);
    RC_ASSERT(grad_err(dx, numeric_grad(x, loss)) < kGradTol);
    RC_ASSERT(grad_err(dz, numeric_grad(z, loss)) < kGradTol);
    RC_ASSERT(grad_err(dw, numeric_grad(w, loss)) < kGradTol);
  });
}

namespace {
/// Finite-difference check of every parameter of a tiny model; returns the error measure.
double model_grad_error(const ModelConfig& cfg, std::uint64_t seed, index_t B, index_t T) {
  FdProblem p(cfg, seed, B, T);  // larger weights than the training init: every path carries gradient
  return model_fd_error(p);
}
}  // namespace

TEST_CASE("LM dense softmax model gradient equals finite differences of the mean loss") {
  ModelConfig cfg;
  cfg.vocab = 7, cfg.d_model = 8, cfg.n_layer = 2, cfg.n_head = 2, cfg.n_kv_head = 1;
  cfg.mlp_hidden = 12;
  for (bool gate : {false, true}) {
    cfg.attn_gate = gate;
    const double err = model_grad_error(cfg, 11 + gate, 2, 5);
    INFO("attn_gate=" << gate << " err=" << err);
    REQUIRE(err < kGradTol);
  }
}
