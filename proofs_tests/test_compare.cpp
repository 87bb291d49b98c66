// proofs_tests/test_compare.cpp -- the C++ verdict for kernel authors (reference/compare.hpp).
//
// What a verdict must get right: the relative RMS error computed as its definition says (checked
// against a sum written out here), the worst element's index, NaN/Inf and shape mismatches failing,
// the tolerances by precision (float64 1e-10, float32 1e-5, 16-bit 1e-2), a float32 rounding of the
// truth passing while an error of 1e-3 fails, and the floor of compare_outputs scaling with the
// case, so that zero or doubled outputs fail however small the inputs are.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "reference/compare.hpp"
#include "reference/recurrent.hpp"

using linattn::index_t;
using linattn::Tensor;
namespace ref = linattn::ref;

namespace {

Tensor<double> random_tensor(std::vector<index_t> shape, unsigned seed, double scale = 1.0) {
  Tensor<double> t(std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (double& x : t) x = scale * n01(rng);
  return t;
}

Tensor<float> to_float(const Tensor<double>& t) {
  Tensor<float> f(t.shape());
  for (index_t i = 0; i < t.numel(); ++i) f.data()[i] = static_cast<float>(t.data()[i]);
  return f;
}

}  // namespace

TEST_CASE("compare computes the relative RMS error by its definition and names the worst element") {
  const Tensor<double> want = random_tensor({2, 3, 4}, 1);
  Tensor<double> got = want.clone();
  got(1, 2, 3) += 0.5;
  got(0, 1, 0) -= 0.1;
  double num = 0, den = 0;  // written out: sum (got - want)^2 / sum want^2
  for (index_t i = 0; i < want.numel(); ++i) {
    num += (got.data()[i] - want.data()[i]) * (got.data()[i] - want.data()[i]);
    den += want.data()[i] * want.data()[i];
  }
  const ref::Comparison c = ref::compare("o", got, want);
  CHECK(c.rel_rms == Approx(std::sqrt(num / den)).epsilon(1e-14));
  CHECK(c.max_abs == Approx(0.5).epsilon(1e-14));
  CHECK(c.max_at == std::vector<index_t>{1, 2, 3});
  CHECK_FALSE(c.ok());
  CHECK(c.report().find("o: MISMATCH") != std::string::npos);
  CHECK(c.report().find("at (1, 2, 3)") != std::string::npos);
  const ref::Comparison same = ref::compare("o", want.clone(), want);
  CHECK(same.ok());
  CHECK(same.rel_rms == 0.0);
}

TEST_CASE("compare fails NaN Inf and shape mismatches whatever the tolerance") {
  const Tensor<double> want = random_tensor({3, 4}, 2);
  Tensor<double> got = want.clone();
  got(2, 1) = std::numeric_limits<double>::quiet_NaN();
  got(0, 3) = std::numeric_limits<double>::infinity();
  const ref::Comparison c = ref::compare("o", got, want, ref::Tolerance{1e9, 1e9, "loose"});
  CHECK_FALSE(c.ok());
  CHECK(c.n_nonfinite == 2);
  CHECK(c.first_nonfinite == std::vector<index_t>{0, 3});
  const ref::Comparison s = ref::compare("o", want.reshape({4, 3}), want, ref::Tolerance{1e9, 1e9, "loose"});
  CHECK_FALSE(s.ok());
  CHECK(s.report().find("shape mismatch: got [4, 3] vs expected [3, 4]") != std::string::npos);
}

TEST_CASE("Tolerances follow the bytes of the computation") {
  CHECK(ref::Tolerance::of<double>().rtol_rms == 1e-10);
  CHECK(ref::Tolerance::of<float>().rtol_rms == 1e-5);
  CHECK(ref::Tolerance::of<std::uint16_t>().rtol_rms == 1e-2);  // a bf16 or fp16 storage type
  CHECK(ref::Tolerance::of<float>().atol_rms == 1e-6);
  CHECK_THROWS_WITH(ref::Tolerance::for_bytes(3), Catch::Contains("argument 'bytes' expected 8, 4 or 2 but got 3"));
}

TEST_CASE("A float32 rounding of the truth passes the float32 tolerance and an error of 1e-3 does not") {
  rc::prop("rounding passes, 1e-3 fails", [] {
    const index_t n = *rc::gen::inRange<index_t>(1, 200);
    const double scale = std::pow(10.0, *rc::gen::inRange(-8, 9));  // the verdict does not depend on the scale
    const Tensor<double> want = random_tensor({n}, *rc::gen::arbitrary<unsigned>(), scale);
    RC_ASSERT(ref::compare("o", to_float(want), want, ref::Tolerance{1e-5, 0.0, "float32, no floor"}).ok());
    Tensor<double> off = want.clone();
    for (double& x : off) x *= 1.0 + 1e-3;
    const bool all_zero = ref::compare("w", want, Tensor<double>(want.shape())).rel_rms == 0.0;
    RC_PRE(!all_zero);
    RC_ASSERT(!ref::compare("o", to_float(off), want, ref::Tolerance{1e-5, 0.0, "float32, no floor"}).ok());
  });
}

TEST_CASE("compare_outputs scales the floor with the case so zero or doubled outputs fail at any scale") {
  // A GDN case with every value and the initial state scaled by 1e-6: outputs of about 1e-7.
  const index_t B = 1, T = 9, H = 2, K = 4, V = 3;
  Tensor<double> q = random_tensor({B, T, H, K}, 3), k = random_tensor({B, T, H, K}, 4);
  Tensor<double> v = random_tensor({B, T, H, V}, 5, 1e-6), g({B, T, H}, -0.1), beta({B, T, H}, 0.5);
  ref::RecurrentOptions<double> opt;
  opt.initial_state = random_tensor({B, H, K, V}, 6, 1e-6);
  opt.output_final_state = true;
  const auto want = ref::naive_recurrent_gated_delta_rule(q, k, v, g, beta, opt);
  const Tensor<float> o = to_float(want.o), S = to_float(want.final_state);
  CHECK(ref::all_ok(ref::compare_outputs(o, S, want)));
  const Tensor<float> zo(o.shape()), zS(S.shape());
  Tensor<float> o2 = o.clone(), S2 = S.clone();
  for (float& x : o2) x *= 2;
  for (float& x : S2) x *= 2;
  for (const auto& c : ref::compare_outputs(zo, zS, want)) CHECK_FALSE(c.ok());
  for (const auto& c : ref::compare_outputs(o2, S2, want)) CHECK_FALSE(c.ok());
  // Unscaled, the float32 floor 1e-6 would pass the zeros: flagged as a pass on the floor alone.
  const auto unscaled = ref::compare_outputs(zo, zS, want, ref::Tolerance::of<float>(), /*scale_floor=*/false);
  CHECK(ref::all_ok(unscaled));
  CHECK(unscaled[0].floor_pass());
  CHECK(unscaled[0].report().find("WARNING: passes only on the absolute floor") != std::string::npos);
  // A final state to compare needs the reference's.
  ref::RecurrentOutput<double> no_state = want;
  no_state.final_state = Tensor<double>();
  CHECK_THROWS_WITH(ref::compare_outputs(o, S, no_state), Catch::Contains("output_final_state = true"));
}

TEST_CASE("compare_gradients holds float32 reference gradients and fails a dropped dh0 or a scaled dq") {
  const index_t B = 1, T = 40, H = 2, K = 5, V = 3;
  const Tensor<double> q = random_tensor({B, T, H, K}, 7), k = random_tensor({B, T, H, K}, 8);
  const Tensor<double> v = random_tensor({B, T, H, V}, 9), g({B, T, H}, -0.2), beta({B, T, H}, 0.6);
  const Tensor<double> do_ = random_tensor({B, T, H, V}, 10), dht = random_tensor({B, H, K, V}, 11);
  ref::RecurrentOptions<double> opt;
  opt.initial_state = random_tensor({B, H, K, V}, 12);
  const auto want = ref::naive_recurrent_gated_delta_rule_backward(q, k, v, g, beta, do_, dht, opt);
  ref::RecurrentOptions<float> optf;
  optf.initial_state = to_float(opt.initial_state);
  const auto got = ref::naive_recurrent_gated_delta_rule_backward(to_float(q), to_float(k), to_float(v), to_float(g),
                                                                  to_float(beta), to_float(do_), to_float(dht), optf);
  const auto comps = ref::compare_gradients(got, want, q, k);
  CHECK(comps.size() == 6);  // dq, dk, dv, dg, dbeta, dh0
  CHECK(ref::all_ok(comps));
  CHECK(comps[0].tol.rtol_rms == 1e-4);
  auto no_dh0 = got;
  no_dh0.dh0 = Tensor<float>(got.dh0.shape());
  CHECK_FALSE(ref::compare_gradients(no_dh0, want, q, k).back().ok());
  auto scaled = got;
  for (float& x : scaled.dq) x *= 1.001f;
  CHECK_FALSE(ref::compare_gradients(scaled, want, q, k)[0].ok());
  auto missing = got;
  missing.dg = Tensor<float>();
  CHECK_THROWS_WITH(ref::compare_gradients(missing, want, q, k), Catch::Contains("expected a gradient dg"));
}
