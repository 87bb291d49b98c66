// proofs_tests/test_compare.cpp -- the C++ verdict for kernel authors (reference/compare.hpp).
//
// What a verdict must get right: the relative RMS error computed as its definition says (checked
// against a sum written out here), the worst element's index, NaN/Inf and shape mismatches failing,
// undefined tensors, a non-finite reference, a missing final state or dh0 and an empty list refused
// rather than passed, the tolerances by precision (float64 1e-10, float32 1e-5, 16-bit 1e-2; a 16-bit
// output of a float32 computation only its rounding) and their growth with the longest sequence, a
// float32 rounding of the truth passing while an error of 1e-3 fails, and the floors: o's scales with
// its natural size scale ||q|| ||S||, so that zero or doubled outputs fail when v and h0 (and q, k) are
// scaled down by 1e-7; the state's size S counts one write k v^T, so that a final state that cancels far
// below its writes is held to the kernel's rounding of them; the gradients' with the case (dg's with
// |q dq| + |k dk|, dh0's by rtol_rms).
// Linattn's float32 chunked CPU kernels, forward and backward, pass over random cases of every delta
// operator.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>

#include "optimized/cpu/chunk.hpp"
#include "optimized/cpu/chunk_backward.hpp"
#include "reference/compare.hpp"
#include "reference/recurrent.hpp"
#include "reference/recurrent_backward.hpp"

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

void l2_normalize_rows(Tensor<double>& x) {
  const index_t K = x.size(-1);
  for (index_t r = 0; r < x.numel(); r += K) {
    double n2 = 0;
    for (index_t i = 0; i < K; ++i) n2 += x.data()[r + i] * x.data()[r + i];
    for (index_t i = 0; i < K; ++i) x.data()[r + i] /= std::sqrt(n2);
  }
}

double rms(const Tensor<double>& t) {
  double s = 0;
  for (double x : t) s += x * x;
  return std::sqrt(s / static_cast<double>(t.numel()));
}

// rms_t(rms(k_t) rms(v_t)) over tokens and heads, written out: the size of one write k_t v_t^T.
double write_rms(const Tensor<double>& k, const Tensor<double>& v) {
  const index_t K = k.size(-1), V = v.size(-1), n = k.numel() / K;
  double s = 0;
  for (index_t r = 0; r < n; ++r) {
    double kk = 0, vv = 0;
    for (index_t i = 0; i < K; ++i) kk += k.data()[r * K + i] * k.data()[r * K + i];
    for (index_t j = 0; j < V; ++j) vv += v.data()[r * V + j] * v.data()[r * V + j];
    s += kk / static_cast<double>(K) * (vv / static_cast<double>(V));
  }
  return std::sqrt(s / static_cast<double>(n));
}

// A 2-byte floating type that std::numeric_limits does not describe (a bf16 struct, say).
struct Half2 {
  std::uint16_t bits;
  operator double() const { return 0.0; }
};

// A GDN case: v scaled by s, q and k by sq, the initial state by sh0 (default s), log-decay g, with the reference's
// output.
struct GdnCase {
  Tensor<double> q, k, v, g, beta;
  ref::RecurrentOptions<double> opt;
  ref::RecurrentOutput<double> want;
};

GdnCase gdn_case(double s, double sq, double sh0 = -1, double g = -0.1) {
  const index_t B = 1, T = 9, H = 2, K = 4, V = 3;
  GdnCase c{random_tensor({B, T, H, K}, 3, sq), random_tensor({B, T, H, K}, 4, sq), random_tensor({B, T, H, V}, 5, s),
            Tensor<double>({B, T, H}, g), Tensor<double>({B, T, H}, 0.5), {}, {}};
  c.opt.initial_state = random_tensor({B, H, K, V}, 6, sh0 < 0 ? s : sh0);
  c.opt.output_final_state = true;
  c.want = ref::naive_recurrent_gated_delta_rule(c.q, c.k, c.v, c.g, c.beta, c.opt);
  return c;
}

// A GDN backward case [1, T, H, K] / [1, T, H, V] with an initial state and both cotangents, and the float64
// reference gradients.
struct GdnBwdCase {
  Tensor<double> q, k, v, g, beta, do_, dht;
  ref::RecurrentOptions<double> opt;
  ref::RecurrentGrads<double> want;
};

GdnBwdCase gdn_backward_case(index_t T, index_t H, index_t K, index_t V) {
  const index_t B = 1;
  GdnBwdCase c{random_tensor({B, T, H, K}, 7),     random_tensor({B, T, H, K}, 8),  random_tensor({B, T, H, V}, 9),
               Tensor<double>({B, T, H}, -0.2),     Tensor<double>({B, T, H}, 0.6), random_tensor({B, T, H, V}, 10),
               random_tensor({B, H, K, V}, 11),     {},                             {}};
  c.opt.initial_state = random_tensor({B, H, K, V}, 12);
  c.want = ref::naive_recurrent_gated_delta_rule_backward(c.q, c.k, c.v, c.g, c.beta, c.do_, c.dht, c.opt);
  return c;
}

// The float64 reference of `op`, forward and backward.
ref::RecurrentOutput<double> naive(ref::Op op, const Tensor<double>& q, const Tensor<double>& k, const Tensor<double>& v,
                                   const ref::Gates<double>& G, const ref::RecurrentOptions<double>& o) {
  switch (op) {
    case ref::Op::delta_rule: return ref::naive_recurrent_delta_rule(q, k, v, G.beta, o);
    case ref::Op::gated_delta_rule: return ref::naive_recurrent_gated_delta_rule(q, k, v, G.g, G.beta, o);
    case ref::Op::kda: return ref::naive_recurrent_kda(q, k, v, G.g, G.beta, o);
    default: return ref::naive_recurrent_gdn2(q, k, v, G.g, G.b, G.w, o);
  }
}
ref::RecurrentGrads<double> naive_backward(ref::Op op, const Tensor<double>& q, const Tensor<double>& k,
                                           const Tensor<double>& v, const ref::Gates<double>& G, const Tensor<double>& d,
                                           const Tensor<double>& dh, const ref::RecurrentOptions<double>& o) {
  switch (op) {
    case ref::Op::delta_rule: return ref::naive_recurrent_delta_rule_backward(q, k, v, G.beta, d, dh, o);
    case ref::Op::gated_delta_rule: return ref::naive_recurrent_gated_delta_rule_backward(q, k, v, G.g, G.beta, d, dh, o);
    case ref::Op::kda: return ref::naive_recurrent_kda_backward(q, k, v, G.g, G.beta, d, dh, o);
    default: return ref::naive_recurrent_gdn2_backward(q, k, v, G.g, G.b, G.w, d, dh, o);
  }
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
  CHECK(c.report().find("is above the floor 1.000e-14") != std::string::npos);  // a mismatch shows the floor
  const ref::Comparison same = ref::compare("o", want.clone(), want);
  CHECK(same.ok());
  CHECK(same.rel_rms == 0.0);
}

TEST_CASE("compare against an all-zero reference uses the absolute RMS as its relative error") {
  const Tensor<double> zeros({4, 5});
  const Tensor<double> small({4, 5}, 1e-7);
  const ref::Comparison c = ref::compare("dg", small, zeros, ref::Tolerance{1e-5, 0.0, "no floor"});
  CHECK(c.rel_rms == Approx(1e-7).epsilon(1e-12));
  CHECK(c.ok());  // 1e-7 <= 1e-5 without any floor
  CHECK_FALSE(ref::compare("dg", Tensor<double>({4, 5}, 1e-3), zeros, ref::Tolerance{1e-5, 0.0, "no floor"}).ok());
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
  // An empty tensor: equal empty shapes have nothing that differs; an empty got against a full want fails.
  CHECK(ref::compare("o", Tensor<float>({1, 0, 2, 3}), Tensor<double>({1, 0, 2, 3})).ok());
  CHECK_FALSE(ref::compare("o", Tensor<float>({1, 0, 2, 3}), Tensor<double>({1, 1, 2, 3})).ok());
}

TEST_CASE("compare refuses undefined tensors and a reference with NaN or Inf") {
  // An undefined tensor's shape [] is a 0-d tensor's: without the check, want's null data was read.
  CHECK_THROWS_WITH(ref::compare("o", Tensor<float>(std::vector<index_t>{}), Tensor<double>()),
                    Catch::Contains("argument 'want' (o) expected a tensor but got an undefined one"));
  CHECK_THROWS_WITH(ref::compare("o", Tensor<float>(), Tensor<double>(std::vector<index_t>{})),
                    Catch::Contains("argument 'got' (o) expected a tensor but got an undefined one"));
  Tensor<double> want = random_tensor({2, 3}, 13);
  want(1, 2) = std::numeric_limits<double>::quiet_NaN();
  want(1, 0) = -std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(ref::compare("o", to_float(random_tensor({2, 3}, 13)), want),
                    Catch::Contains("argument 'want' (o) expected finite values but got 2 NaN/Inf, first at (1, 0)"));
}

TEST_CASE("Tolerances follow the bytes of the computation") {
  CHECK(ref::Tolerance::of<double>().rtol_rms == 1e-10);
  CHECK(ref::Tolerance::of<double>().atol_rms == 1e-14);
  CHECK(ref::Tolerance::of<float>().rtol_rms == 1e-5);
  CHECK(ref::Tolerance::of<float>().atol_rms == 1e-6);
  CHECK(ref::Tolerance::for_bytes(2).rtol_rms == 1e-2);  // a computation in bf16 or fp16
  CHECK(ref::Tolerance::for_bytes(2).atol_rms == 1e-3);
  CHECK(ref::Tolerance::grads_of<double>().rtol_rms == 1e-10);
  CHECK(ref::Tolerance::grads_of<float>().rtol_rms == 1e-4);
  CHECK(ref::Tolerance::grads_of<float>().atol_rms == 1e-6);
  CHECK(ref::Tolerance::grads_for_bytes(2).rtol_rms == 1e-2);
  CHECK(ref::Tolerance::grads_for_bytes(2).atol_rms == 1e-3);
  CHECK_THROWS_WITH(ref::Tolerance::for_bytes(3), Catch::Contains("argument 'bytes' expected 8, 4 or 2 but got 3"));
}

TEST_CASE("A 16-bit output of a float32 computation is allowed only its rounding") {
  // Tolerance::of<a 2-byte type>() is a float32 computation stored narrower (Tolerance::of<std::uint16_t> does not
  // compile: raw bf16 bits are no floating value).
  CHECK(ref::Tolerance::of<_Float16>().rtol_rms == 1e-3);
  CHECK(ref::Tolerance::of<_Float16>().atol_rms == 1e-6);
  CHECK(ref::Tolerance::of<_Float16>().basis == "float32, stored as fp16");
  CHECK(ref::Tolerance::of<Half2>().rtol_rms == 5e-3);  // not known to be fp16: bf16's rounding, the larger
  CHECK(ref::Tolerance::grads_of<_Float16>().rtol_rms == 1e-3);
  CHECK(ref::Tolerance::grads_of<Half2>().rtol_rms == 5e-3);
  // A float32 kernel 0.8% off (a scale bug) that stores its outputs as fp16 fails; its correct outputs pass.
  const Tensor<double> q = random_tensor({1, 130, 2, 16}, 1), k = random_tensor({1, 130, 2, 16}, 2, 0.25);
  const Tensor<double> v = random_tensor({1, 130, 2, 12}, 3), g({1, 130, 2}, -0.1), beta({1, 130, 2}, 0.5);
  ref::RecurrentOptions<double> opt;
  opt.output_final_state = true;
  const auto want = ref::naive_recurrent_gated_delta_rule(q, k, v, g, beta, opt);
  auto stored = [](const Tensor<double>& t, double f) {
    Tensor<_Float16> h(t.shape());
    for (index_t i = 0; i < t.numel(); ++i) h.data()[i] = static_cast<_Float16>(t.data()[i] * f);
    return h;
  };
  CHECK(ref::all_ok(ref::compare_outputs(stored(want.o, 1.0), stored(want.final_state, 1.0), want, q, k, v, opt)));
  for (const auto& c : ref::compare_outputs(stored(want.o, 1.008), stored(want.final_state, 1.008), want, q, k, v, opt))
    CHECK_FALSE(c.ok());
}

TEST_CASE("A float32 rounding of the truth passes the float32 tolerance and an error of 1e-3 does not") {
  rc::prop("rounding passes, 1e-3 fails", [] {
    const index_t n = *rc::gen::inRange<index_t>(1, 200);
    const int e = *rc::gen::inRange(-8, 9);
    const double scale = std::pow(10.0, e);  // the verdict does not depend on the scale
    const Tensor<double> want = random_tensor({n}, *rc::gen::arbitrary<unsigned>(), scale);
    RC_ASSERT(ref::compare("o", to_float(want), want, ref::Tolerance{1e-5, 0.0, "float32, no floor"}).ok());
    RC_ASSERT(ref::compare("o", to_float(want), want).ok());  // the defaults, Tolerance::of<float>()
    Tensor<double> off = want.clone();
    for (double& x : off) x *= 1.0 + 1e-3;
    const bool all_zero = ref::compare("w", want, Tensor<double>(want.shape())).rel_rms == 0.0;
    RC_PRE(!all_zero);
    RC_ASSERT(!ref::compare("o", to_float(off), want, ref::Tolerance{1e-5, 0.0, "float32, no floor"}).ok());
    // With the defaults' absolute floor 1e-6, an error of 1e-3 fails wherever it is above the floor.
    if (ref::compare("w", off, want).abs_rms > 1e-6) RC_ASSERT(!ref::compare("o", to_float(off), want).ok());
  });
}

TEST_CASE("float32 and float64 tolerances grow with the longest sequence and 16-bit ones do not") {
  CHECK(ref::Tolerance::of<float>().for_length(130).rtol_rms == 1e-5);
  CHECK(ref::Tolerance::of<float>().for_length(2048).rtol_rms == 2048 * 0x1p-24);
  CHECK(ref::Tolerance::of<float>().for_length(2048).basis == "float32, T_max = 2048");
  CHECK(ref::Tolerance::grads_of<float>().for_length(4096).rtol_rms == 4096 * 0x1p-24);
  CHECK(ref::Tolerance::of<double>().for_length(10000000).rtol_rms == 10000000 * 0x1p-53);
  CHECK(ref::Tolerance::for_bytes(2).for_length(10000000).rtol_rms == 1e-2);
  CHECK(ref::Tolerance{1e-5, 1e-6, "given"}.for_length(10000000).rtol_rms == 1e-5);  // a tolerance by hand: as given
  CHECK(ref::longest_sequence(400, {}) == 400);
  CHECK(ref::longest_sequence(400, {0, 100, 400}) == 300);
  // A correct per-token float32 GDN kernel with slow decay: rounding exp(g) to float32 is a bias that compounds;
  // at T = 1024 it is past the fixed 1e-5, inside T u = 6.1e-5; an error of 1e-3 still fails.
  const index_t B = 1, T = 1024, H = 1, K = 32, V = 32;
  Tensor<double> q = random_tensor({B, T, H, K}, 1), k = random_tensor({B, T, H, K}, 2);
  l2_normalize_rows(q), l2_normalize_rows(k);
  const Tensor<float> qf = to_float(q), kf = to_float(k), vf = to_float(random_tensor({B, T, H, V}, 3));
  const Tensor<float> gf({B, T, H}, -1e-4f), bf({B, T, H}, 1e-3f);
  ref::RecurrentOptions<double> opt;
  opt.initial_state = ref::widen(to_float(random_tensor({B, H, K, V}, 4)));
  opt.output_final_state = true;
  const auto want = ref::naive_recurrent_gated_delta_rule(ref::widen(qf), ref::widen(kf), ref::widen(vf),
                                                          ref::widen(gf), ref::widen(bf), opt);
  ref::RecurrentOptions<float> optf;
  optf.initial_state = to_float(opt.initial_state);
  optf.output_final_state = true;
  const auto got = ref::naive_recurrent_gated_delta_rule(qf, kf, vf, gf, bf, optf);
  const auto comps =
      ref::compare_outputs(got.o, got.final_state, want, ref::widen(qf), ref::widen(kf), ref::widen(vf), opt);
  CHECK(comps[1].rel_rms > 1e-5);  // what the fixed bound failed
  CHECK(comps[0].tol.rtol_rms == T * 0x1p-24);
  CHECK(ref::all_ok(comps));
  Tensor<float> off = got.o.clone();
  for (float& x : off) x *= 1.001f;
  CHECK_FALSE(
      ref::compare_outputs(off, got.final_state, want, ref::widen(qf), ref::widen(kf), ref::widen(vf), opt)[0].ok());
  // Packed sequences: the longest one, not the packed length, sets the bound.
  ref::RecurrentOptions<double> packed = opt;
  packed.cu_seqlens = {0, 200, 1024};
  packed.initial_state = Tensor<double>({2, H, K, V});
  const auto want_packed = ref::naive_recurrent_gated_delta_rule(ref::widen(qf), ref::widen(kf), ref::widen(vf),
                                                                 ref::widen(gf), ref::widen(bf), packed);
  CHECK(ref::compare_outputs(to_float(want_packed.o), to_float(want_packed.final_state), want_packed, ref::widen(qf),
                             ref::widen(kf), ref::widen(vf), packed)[0].tol.rtol_rms == 824 * 0x1p-24);
}

TEST_CASE("compare_outputs scales o's floor with scale ||q|| ||S|| so zero or doubled outputs fail when scaled") {
  // Every input (q, k, v, h0) scaled by s: o shrinks like s^2, the state like s. At s = 1e-7 (float32) and 1e-4
  // (16-bit), a floor scaled by the state passed o = 0 and 2 o.
  for (double s : {1e-2, 1e-4, 1e-7}) {
    const GdnCase c = gdn_case(s, s);
    const Tensor<float> o = to_float(c.want.o), S = to_float(c.want.final_state);
    CHECK(ref::all_ok(ref::compare_outputs(o, S, c.want, c.q, c.k, c.v, c.opt)));
    Tensor<float> o2 = o.clone();
    for (float& x : o2) x *= 2;
    const Tensor<float> zo(o.shape());
    CHECK_FALSE(ref::compare_outputs(zo, S, c.want, c.q, c.k, c.v, c.opt)[0].ok());
    CHECK_FALSE(ref::compare_outputs(o2, S, c.want, c.q, c.k, c.v, c.opt)[0].ok());
    CHECK_FALSE(ref::compare_outputs(zo, S, c.want, c.q, c.k, c.v, c.opt, ref::Tolerance::for_bytes(2))[0].ok());
  }
  // Only q scaled (as a small `scale` would): o shrinks, the state does not.
  const GdnCase qs = gdn_case(1.0, 1e-6);
  const Tensor<float> zo(qs.want.o.shape()), S = to_float(qs.want.final_state);
  CHECK_FALSE(ref::compare_outputs(zo, S, qs.want, qs.q, qs.k, qs.v, qs.opt)[0].ok());
  CHECK_FALSE(ref::compare_outputs(zo, S, qs.want, qs.q, qs.k, qs.v, qs.opt, ref::Tolerance::for_bytes(2))[0].ok());
  CHECK(ref::all_ok(ref::compare_outputs(to_float(qs.want.o), S, qs.want, qs.q, qs.k, qs.v, qs.opt)));
  // The floors, written out: the state's S = max(rms(S_T), rms(h0), rms_t(rms(k_t) rms(v_t))); o's max(rms(o),
  // scale rms_t ||q_t|| S). Each term of S the largest once (0: S_T, 1: h0, 2: the writes).
  for (auto [sh0, g, largest] : {std::tuple{1.0, -0.1, 1}, {1e-3, -0.1, 2}, {1e-3, 0.0, 0}}) {
    const GdnCase c = gdn_case(1.0, 1.0, sh0, g);
    double qq = 0;
    for (double x : c.q) qq += x * x;
    const double q_rms = std::sqrt(qq / (1 * 9 * 2));
    const double terms[] = {rms(c.want.final_state), rms(c.opt.initial_state), write_rms(c.k, c.v)};
    const double state = *std::max_element(terms, terms + 3);
    const auto comps =
        ref::compare_outputs(to_float(c.want.o), to_float(c.want.final_state), c.want, c.q, c.k, c.v, c.opt);
    CHECK(comps[0].tol.atol_rms == Approx(1e-6 * std::max(rms(c.want.o), 0.5 * q_rms * state)).epsilon(1e-12));
    CHECK(comps[1].tol.atol_rms == Approx(1e-6 * state).epsilon(1e-12));
    CHECK(std::max_element(terms, terms + 3) - terms == largest);
  }
  {  // Under use_qk_l2norm the reference reads each q_t and k_t normalised: ||q_t|| = 1 however large q is, and
     // the writes' k_t too (k taken as given, 1e7 times too large, would lift the state's floor above rms(S_T)).
    GdnCase c = gdn_case(1.0, 1.0);
    for (double& x : c.q) x *= 100;
    for (double& x : c.k) x *= 1e7;
    c.opt.use_qk_l2norm = true;
    c.want = ref::naive_recurrent_gated_delta_rule(c.q, c.k, c.v, c.g, c.beta, c.opt);
    Tensor<double> kn = c.k.clone();  // k_t / sqrt(||k_t||^2 + 1e-6), as the reference normalises
    for (index_t r = 0; r < kn.numel(); r += 4) {
      const double n2 = kn.data()[r] * kn.data()[r] + kn.data()[r + 1] * kn.data()[r + 1] +
                        kn.data()[r + 2] * kn.data()[r + 2] + kn.data()[r + 3] * kn.data()[r + 3];
      for (index_t i = 0; i < 4; ++i) kn.data()[r + i] /= std::sqrt(n2 + 1e-6);
    }
    const double state = std::max({rms(c.want.final_state), rms(c.opt.initial_state), write_rms(kn, c.v)});
    const Tensor<float> o = to_float(c.want.o), S = to_float(c.want.final_state);
    const auto comps = ref::compare_outputs(o, S, c.want, c.q, c.k, c.v, c.opt);
    CHECK(comps[0].tol.atol_rms == Approx(1e-6 * std::max(rms(c.want.o), 0.5 * state)).epsilon(1e-9));
    CHECK(comps[1].tol.atol_rms == Approx(1e-6 * state).epsilon(1e-9));
    CHECK(ref::all_ok(comps));
    CHECK_FALSE(ref::compare_outputs(o, Tensor<float>(S.shape()), c.want, c.q, c.k, c.v, c.opt)[1].ok());
  }
  // Unscaled, the float32 floor 1e-6 passes the zeros of the s = 1e-7 case: flagged as a pass on the floor alone.
  const GdnCase tiny = gdn_case(1e-7, 1e-7);
  const auto unscaled = ref::compare_outputs(Tensor<float>(tiny.want.o.shape()), to_float(tiny.want.final_state),
                                             tiny.want, tiny.q, tiny.k, tiny.v, tiny.opt, ref::Tolerance::of<float>(),
                                             /*require_final_state=*/true, /*scale_floor=*/false);
  CHECK(ref::all_ok(unscaled));
  CHECK(unscaled[0].floor_pass());
  CHECK(unscaled[0].report().find("WARNING: passes only on the absolute floor") != std::string::npos);
}

TEST_CASE("A final state that cancels far below its writes is held to the writes' rounding") {
  // GDN, K = V = 1, two tokens, no initial state: S_1 = beta_1 k_1 v_1 = 0.148, then S_2 = alpha_2 (1 - beta_2
  // k_2^2) S_1 + beta_2 k_2 v_2 = -0.0689 + 0.0689 = -1.2e-5. linattn's float32 chunked kernel rounds at the size of
  // the terms: 1.7e-8 off, 1.4e-3 of S_2, which a floor of 1e-6 max(rms(S_T), rms(h0)) failed (a search over
  // random cases with T <= 8 found hundreds; this is one of them). The write term rms_t(rms(k_t) rms(v_t)) = 0.28
  // makes the floor 2.8e-7: the kernel passes, zeros and 2 S_T still fail.
  const Tensor<float> q = Tensor<float>::from({1, 2, 1, 1}, {0.697187364f, -0.0850774124f});
  const Tensor<float> k = Tensor<float>::from({1, 2, 1, 1}, {0.554765224f, -2.37009788f});
  const Tensor<float> v = Tensor<float>::from({1, 2, 1, 1}, {0.545170188f, -0.110315077f});
  const Tensor<float> g = Tensor<float>::from({1, 2, 1}, {-0.0253374074f, -0.0272366926f});
  const Tensor<float> beta = Tensor<float>::from({1, 2, 1}, {0.488241762f, 0.263329148f});
  linattn::cpu::ChunkOptions<float> co;
  co.output_final_state = true;
  const auto got = linattn::cpu::chunk_gated_delta_rule(q, k, v, g, beta, co);
  ref::RecurrentOptions<double> opt;
  opt.output_final_state = true;
  const Tensor<double> q64 = ref::widen(q), k64 = ref::widen(k), v64 = ref::widen(v);
  const auto want = ref::naive_recurrent_gated_delta_rule(q64, k64, v64, ref::widen(g), ref::widen(beta), opt);
  const double writes = write_rms(k64, v64);
  REQUIRE(rms(want.final_state) < 1e-4 * writes);  // the cancellation
  const auto comps = ref::compare_outputs(got.o, got.final_state, want, q64, k64, v64, opt);
  CHECK(comps[1].rel_rms > 1e-5);                          // the kernel's rounding, relative to S_T ...
  CHECK(comps[1].abs_rms > 1e-6 * rms(want.final_state));  // ... above the floor without the writes
  CHECK(comps[1].tol.atol_rms == Approx(1e-6 * writes).epsilon(1e-12));
  CHECK(ref::all_ok(comps));
  Tensor<float> twice = got.final_state.clone();
  for (float& x : twice) x *= 2;
  CHECK_FALSE(ref::compare_outputs(got.o, Tensor<float>(got.final_state.shape()), want, q64, k64, v64, opt)[1].ok());
  CHECK_FALSE(ref::compare_outputs(got.o, twice, want, q64, k64, v64, opt)[1].ok());
}

TEST_CASE("A small o read from a large state is held to the state's rounding") {
  // GDN with beta = 0 and g = 0 keeps S = h0 = [1, 0]^T; q_t = (1e-3, 1) reads o_t = 1e-3 from a state of RMS
  // 0.7. A float32 kernel's rounding is relative to scale ||q|| ||S||, not to o: o (1 + 1e-4) passes on the floor
  // (1e-6 * 0.7), which a floor scaled by rms(o) alone (1e-9) would fail; o = 0 fails.
  const index_t T = 5;
  Tensor<double> q({1, T, 1, 2}), k({1, T, 1, 2}, 0.5), v({1, T, 1, 1}, 1.0), g({1, T, 1}), beta({1, T, 1});
  for (index_t t = 0; t < T; ++t) q(0, t, 0, 0) = 1e-3, q(0, t, 0, 1) = 1.0;
  ref::RecurrentOptions<double> opt;
  opt.scale = 1.0;
  opt.initial_state = Tensor<double>::from({1, 1, 2, 1}, {1.0, 0.0});
  opt.output_final_state = true;
  const auto want = ref::naive_recurrent_gated_delta_rule(q, k, v, g, beta, opt);
  Tensor<double> off = want.o.clone();
  for (double& x : off) x *= 1.0 + 1e-4;
  const Tensor<float> o = to_float(off), S = to_float(want.final_state);
  const auto comps = ref::compare_outputs(o, S, want, q, k, v, opt);
  CHECK(comps[0].floor_pass());
  CHECK(ref::all_ok(comps));
  CHECK_FALSE(ref::compare_outputs(Tensor<float>(o.shape()), S, want, q, k, v, opt)[0].ok());
}

TEST_CASE("compare_outputs requires o, q, k, v and a final state unless told otherwise") {
  const GdnCase c = gdn_case(1.0, 1.0);
  const Tensor<float> o = to_float(c.want.o), S = to_float(c.want.final_state);
  // A kernel's final state missing: an error naming it by default ...
  CHECK_THROWS_WITH(ref::compare_outputs(o, Tensor<float>(), c.want, c.q, c.k, c.v, c.opt),
                    Catch::Contains("argument 'final_state' expected the kernel's final state"));
  // ... and "not compared" when not required: o alone decides.
  const auto only_o = ref::compare_outputs(o, Tensor<float>(), c.want, c.q, c.k, c.v, c.opt,
                                           ref::Tolerance::of<float>(), /*require_final_state=*/false);
  REQUIRE(only_o.size() == 2);
  CHECK(ref::all_ok(only_o));
  CHECK(only_o[1].report() == "final_state: not compared (the kernel did not give it; require_final_state = false)");
  CHECK_FALSE(ref::all_ok(ref::compare_outputs(Tensor<float>(o.shape()), Tensor<float>(), c.want, c.q, c.k, c.v, c.opt,
                                               ref::Tolerance::of<float>(), false)));
  // A final state to compare needs the reference's.
  ref::RecurrentOutput<double> no_state = c.want;
  no_state.final_state = Tensor<double>();
  CHECK_THROWS_WITH(ref::compare_outputs(o, S, no_state, c.q, c.k, c.v, c.opt),
                    Catch::Contains("output_final_state = true"));
  // Nothing to compare against, or nothing to compare.
  CHECK_THROWS_WITH(ref::compare_outputs(Tensor<float>(), Tensor<float>(), ref::RecurrentOutput<double>{}, c.q, c.k,
                                         c.v, c.opt),
                    Catch::Contains("argument 'want' expected the reference's output with o [B, T, H, V] but got o "
                                    "undefined"));
  CHECK_THROWS_WITH(ref::compare_outputs(Tensor<float>(), S, c.want, c.q, c.k, c.v, c.opt),
                    Catch::Contains("argument 'o' expected the kernel's o but got an undefined tensor"));
  CHECK_THROWS_WITH(ref::compare_outputs(o, S, c.want, Tensor<double>(), c.k, c.v, c.opt),
                    Catch::Contains("argument 'q' expected the reference's q [B, T, H, K]"));
  CHECK_THROWS_WITH(ref::compare_outputs(o, S, c.want, c.q, Tensor<double>(), c.v, c.opt),
                    Catch::Contains("argument 'k' expected the reference's k [B, T, H, K] of q's shape [1, 9, 2, 4] "
                                    "but got undefined"));
  CHECK_THROWS_WITH(ref::compare_outputs(o, S, c.want, c.q, c.v, c.v, c.opt),
                    Catch::Contains("argument 'k' expected the reference's k [B, T, H, K] of q's shape [1, 9, 2, 4] "
                                    "but got [1, 9, 2, 3]"));
  CHECK_THROWS_WITH(ref::compare_outputs(o, S, c.want, c.q, c.k, Tensor<double>(), c.opt),
                    Catch::Contains("argument 'v' expected the reference's v [B, T, H, V] of want.o's shape "
                                    "[1, 9, 2, 3] but got undefined"));
  CHECK_THROWS_WITH(ref::compare_outputs(o, S, c.want, c.q, c.k, c.k, c.opt),
                    Catch::Contains("argument 'v' expected the reference's v [B, T, H, V] of want.o's shape "
                                    "[1, 9, 2, 3] but got [1, 9, 2, 4]"));
  CHECK_FALSE(ref::all_ok({}));  // an empty list compared nothing: not a pass
}

TEST_CASE("compare_gradients holds float32 reference gradients and fails a zeroed dh0 or a scaled dq") {
  const index_t B = 1, T = 40, H = 2, K = 5;
  const GdnBwdCase c = gdn_backward_case(T, H, K, 3);
  const Tensor<double>&q = c.q, &k = c.k, &v = c.v, &g = c.g, &beta = c.beta, &do_ = c.do_, &dht = c.dht;
  const ref::RecurrentOptions<double>& opt = c.opt;
  const ref::RecurrentGrads<double>& want = c.want;
  ref::RecurrentOptions<float> optf;
  optf.initial_state = to_float(opt.initial_state);
  const auto got = ref::naive_recurrent_gated_delta_rule_backward(to_float(q), to_float(k), to_float(v), to_float(g),
                                                                  to_float(beta), to_float(do_), to_float(dht), optf);
  const auto comps = ref::compare_gradients(got, want, q, k, opt);
  REQUIRE(comps.size() == 6);  // dq, dk, dv, dg, dbeta, dh0
  CHECK(ref::all_ok(comps));
  CHECK(comps[0].tol.rtol_rms == 1e-4);
  // The floors, written out: the largest RMS among the gradients (the case's magnitude) times 1e-6; dg's at least
  // the RMS of sum_K |q dq| + |k dk|; dh0's rtol_rms (1e-4) times the magnitude.
  const double mag = std::max({rms(want.dq), rms(want.dk), rms(want.dv), rms(want.dg), rms(want.dbeta), rms(want.dh0)});
  Tensor<double> terms({B, T, H});
  for (index_t i = 0; i < q.numel(); ++i)
    terms.data()[i / K] += std::abs(q.data()[i] * want.dq.data()[i]) + std::abs(k.data()[i] * want.dk.data()[i]);
  REQUIRE(rms(terms) > 2 * mag);  // so that dg's floor differs from the others'
  CHECK(comps[0].tol.atol_rms == Approx(1e-6 * mag).epsilon(1e-12));
  CHECK(comps[3].name == "dg");
  CHECK(comps[3].tol.atol_rms == Approx(1e-6 * rms(terms)).epsilon(1e-12));
  CHECK(comps[5].name == "dh0");
  CHECK(comps[5].tol.atol_rms == Approx(1e-4 * mag).epsilon(1e-12));
  auto zero_dh0 = got;
  zero_dh0.dh0 = Tensor<float>(got.dh0.shape());
  CHECK_FALSE(ref::compare_gradients(zero_dh0, want, q, k, opt).back().ok());
  auto scaled = got;
  for (float& x : scaled.dq) x *= 1.001f;
  CHECK_FALSE(ref::compare_gradients(scaled, want, q, k, opt)[0].ok());
  // dg off by twice what its bounds allow (relative 1e-4, floor 1e-6 rms(terms)) fails.
  auto off_dg = got;
  const double off = 2 * std::max(1e-4 * rms(want.dg), 1e-6 * rms(terms));
  for (index_t i = 0; i < off_dg.dg.numel(); ++i) off_dg.dg.data()[i] = static_cast<float>(want.dg.data()[i] + off);
  CHECK_FALSE(ref::compare_gradients(off_dg, want, q, k, opt)[3].ok());
}

TEST_CASE("compare_gradients requires every gradient of the reference, dh0 unless told otherwise, and no other") {
  const GdnBwdCase c = gdn_backward_case(12, 1, 3, 2);
  const Tensor<double>&q = c.q, &k = c.k;
  const ref::RecurrentOptions<double>& opt = c.opt;
  const ref::RecurrentGrads<double>& want = c.want;
  ref::RecurrentGrads<float> got{to_float(want.dq), to_float(want.dk),    to_float(want.dv), to_float(want.dg),
                                 to_float(want.dbeta), Tensor<float>(), Tensor<float>(), to_float(want.dh0)};
  CHECK(ref::all_ok(ref::compare_gradients(got, want, q, k, opt)));
  auto no_dh0 = got;
  no_dh0.dh0 = Tensor<float>();
  CHECK_THROWS_WITH(ref::compare_gradients(no_dh0, want, q, k, opt),
                    Catch::Contains("expected a gradient dh0 (the reference has one) but got none"));
  const auto without = ref::compare_gradients(no_dh0, want, q, k, opt, ref::Tolerance::grads_of<float>(),
                                              /*require_dh0=*/false);
  CHECK(ref::all_ok(without));
  CHECK(without.back().report() == "dh0: not compared (the kernel did not give it; require_dh0 = false)");
  auto missing = got;
  missing.dg = Tensor<float>();
  CHECK_THROWS_WITH(ref::compare_gradients(missing, want, q, k, opt), Catch::Contains("expected a gradient dg"));
  auto extra = got;  // GDN has no db (KDA's dbeta given as GDN2's db, say)
  extra.db = to_float(want.dbeta);
  CHECK_THROWS_WITH(ref::compare_gradients(extra, want, q, k, opt),
                    Catch::Contains("argument 'got' has a gradient db that the reference does not"));
  CHECK_THROWS_WITH(ref::compare_gradients(got, ref::RecurrentGrads<double>{}, q, k, opt),
                    Catch::Contains("argument 'want' expected the reference backward's gradients"));
  CHECK_THROWS_WITH(ref::compare_gradients(got, want, Tensor<double>(), k, opt),
                    Catch::Contains("argument 'q' expected the reference's q of shape [1, 12, 1, 3]"));
  CHECK_THROWS_WITH(ref::compare_gradients(got, want, q, Tensor<double>(), opt),
                    Catch::Contains("argument 'k' expected the reference's k"));
  // Only "not compared" entries compared nothing: not a pass.
  ref::Comparison none;
  none.compared = false;
  CHECK_FALSE(ref::all_ok({none}));
}

TEST_CASE("linattn's float32 chunked CPU kernels pass the default verdict on random cases of every delta operator") {
  namespace cpu = linattn::cpu;
  std::mt19937 rng(12345);
  auto ri = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  std::normal_distribution<float> n01(0, 1);
  std::uniform_real_distribution<float> u01(0, 1);
  const ref::Op ops[] = {ref::Op::delta_rule, ref::Op::gated_delta_rule, ref::Op::kda, ref::Op::gdn2};
  int failures = 0;
  const int n_cases = 200;  // (4,600 cases of this generator pass too, run outside the suite)
  for (int c = 0; c < n_cases; ++c) {
    const ref::Op op = ops[ri(0, 3)];
    index_t B = ri(1, 2), T = ri(0, 1) ? 64 * ri(1, 2) + ri(-1, 1) : ri(1, 160), H = ri(1, 2), K = ri(1, 9), V = ri(1, 9);
    const int gate_mode = ri(0, 3);  // random, zero, extreme, mixed
    std::vector<index_t> cu;
    index_t N = B;
    if (ri(0, 2) == 0 && T >= 2) {  // packed sequences
      B = 1, cu = {0};
      for (index_t pos = 0; pos < T;) cu.push_back(pos += std::min<index_t>(T - pos, ri(1, static_cast<int>(T))));
      N = static_cast<index_t>(cu.size()) - 1;
    }
    Tensor<float> q({B, T, H, K}), k({B, T, H, K}), v({B, T, H, V}), h0({N, H, K, V}), d({B, T, H, V}), dh({N, H, K, V});
    for (float& x : q) x = n01(rng);
    for (float& x : v) x = n01(rng);
    for (index_t i = 0; i < k.numel(); i += K) {
      float s = 0;
      for (index_t j = 0; j < K; ++j) k.data()[i + j] = n01(rng), s += k.data()[i + j] * k.data()[i + j];
      for (index_t j = 0; j < K; ++j) k.data()[i + j] /= std::sqrt(s);
    }
    auto gate = [&] {
      if (gate_mode == 1) return 0.f;
      if (gate_mode == 2) return -30.f * u01(rng);
      if (gate_mode == 3) return ri(0, 1) ? 0.f : -30.f;
      return std::log(1.f / (1.f + std::exp(-(2.5f + 1.5f * n01(rng)))));
    };
    ref::Gates<float> G;
    if (op == ref::Op::gated_delta_rule) G.g = Tensor<float>({B, T, H});
    if (op == ref::Op::kda || op == ref::Op::gdn2) G.g = Tensor<float>({B, T, H, K});
    for (float& x : G.g) x = gate();
    if (op != ref::Op::gdn2) {
      G.beta = Tensor<float>({B, T, H});
      for (float& x : G.beta) x = u01(rng);
    } else {
      G.b = Tensor<float>({B, T, H, K}), G.w = Tensor<float>({B, T, H, V});
      for (float& x : G.b) x = u01(rng);
      for (float& x : G.w) x = u01(rng);
    }
    for (float& x : h0) x = n01(rng);
    for (float& x : d) x = n01(rng);
    for (float& x : dh) x = n01(rng);
    cpu::ChunkOptions<float> co;
    co.initial_state = h0, co.output_final_state = true, co.cu_seqlens = cu;
    ref::RecurrentOptions<double> ro;
    ro.initial_state = ref::widen(h0), ro.output_final_state = true, ro.cu_seqlens = cu;
    const Tensor<double> q64 = ref::widen(q), k64 = ref::widen(k), v64 = ref::widen(v);
    ref::Gates<double> G64;
    for (auto [from, to] : {std::pair{&G.g, &G64.g}, {&G.beta, &G64.beta}, {&G.b, &G64.b}, {&G.w, &G64.w}})
      if (from->defined()) *to = ref::widen(*from);
    const auto got = cpu::chunk_forward(op, q, k, v, G, co);
    const auto want = naive(op, q64, k64, v64, G64, ro);
    const auto grads = cpu::chunk_backward(op, q, k, v, G, d, dh, co);
    const auto want_grads = naive_backward(op, q64, k64, v64, G64, ref::widen(d), ref::widen(dh), ro);
    auto comps = ref::compare_outputs(got.o, got.final_state, want, q64, k64, v64, ro);
    for (auto& x : ref::compare_gradients(grads, want_grads, q64, k64, ro)) comps.push_back(x);
    if (!ref::all_ok(comps)) {
      ++failures;
      for (const auto& x : comps)
        if (!x.ok()) UNSCOPED_INFO("case " << c << " op " << ref::op_name(op) << ": " << x.report());
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("compare and the floors stay right for float64 data at extreme magnitudes") {
  // sums of squares are scaled before squaring (SumSq): at 1e-200 they underflowed (rel_rms 0, a doubled result
  // passed), at 1e200 they overflowed (rel_rms NaN, a 1e-12 error failed)
  const auto tiny = Tensor<double>::from({2}, {1e-200, 1e-200}), huge = Tensor<double>::from({1}, {1e200});
  Tensor<double> doubled = tiny.clone(), near = huge.clone();
  for (double& x : doubled) x *= 2;
  near.data()[0] *= 1 + 1e-12;
  CHECK_FALSE(ref::compare("o", doubled, tiny, ref::Tolerance{1e-10, 0}).ok());
  CHECK(ref::compare("o", doubled, tiny, ref::Tolerance{1e-10, 0}).rel_rms == Approx(1.0));
  CHECK(ref::compare("o", near, huge).ok());
  CHECK(ref::compare("o", near, huge).rel_rms == Approx(1e-12).margin(1e-15));
  // o's floor with q = 1e160: ||q||^2 overflowed to an infinite floor, and o = 0 passed
  ref::RecurrentOptions<double> opt;
  opt.output_final_state = true;
  const auto q = Tensor<double>::from({1, 2, 1, 1}, {1e160, 1e160}), k = Tensor<double>::from({1, 2, 1, 1}, {1, 1}),
             v = Tensor<double>::from({1, 2, 1, 1}, {1e-170, 2e-170}), beta = Tensor<double>::from({1, 2, 1}, {0.5, 0.5});
  const auto want = ref::naive_recurrent_delta_rule(q, k, v, beta, opt);
  CHECK(ref::all_ok(ref::compare_outputs(want.o, want.final_state, want, q, k, v, opt)));
  const auto zero = ref::compare_outputs(Tensor<double>(want.o.shape()), want.final_state, want, q, k, v, opt);
  CHECK_FALSE(zero[0].ok());
  CHECK(std::isfinite(zero[0].tol.atol_rms));
}
