// proofs_tests/test_cuda_backward.cu -- the CUDA chunked backward (optimized/cuda: every rung of the backward
// ladder, 1 = bwd_v1_simple.cu to 33 = bwd_v33_g2stage.cu, each in kRungs below; the table of rungs is
// optimized/cuda/README.md; host API cuda::chunk_backward) equals the
// float64 reference backward
// (reference/recurrent_backward.hpp, itself proven by finite differences in
// test_gradcheck_reference.cpp) for DeltaNet, GDN, KDA and GDN2, in float32 and bfloat16.
//
// The reference runs in float64 on exactly the inputs the device sees (q, k, v, do rounded to
// bfloat16 for DType::bf16; the gates too when they are bf16), so the comparison measures the
// kernels alone. The loss is L = <do, o> + <dht, S_T> with random do and (mostly) dht. Each
// gradient is compared as in test_chunk_backward.cpp:
//   rms(got - want) <= tol * max(rms(want), floor),  floor = rms of dq, dk and dv together,
// the floor covering gradients that are legitimately tiny next to the others (dg with g = -1000).
// Bounds (tol), per gradient and dtype:
//   float32 inputs: 2e-5 for every gradient (float32 arithmetic; the worst seen on the H200 over
//   the properties' 400 cases was 1.8e-6, for dg);
//   bfloat16 inputs: 5e-3 for dq, dk, dv (stored as bfloat16, whose rounding alone is up to
//   2^-8 = 3.9e-3 per element; the worst seen was 3.3e-3), 2e-5 for the float32 gate gradients
//   and dh0; with bfloat16 gates their gradients are stored as bfloat16 too: 5e-3 (worst 3.5e-3).
//   Rung 2 (bf16 inputs; float32 inputs run rung 1) has the same bounds except for the float32
//   gate gradients: 1e-4, because its chunk products take float32 operands as bf16 hi + lo
//   (about 16 significant bits, bwd_v2_tensorcore.cu) and dg, dbeta, db, dw are sums with
//   cancellation of such products (worst seen on the H200: 3.6e-5 for dg, 3.4e-5 for dbeta;
//   optimized/cuda/RESULTS.md, "Rung 2"). dh0 is float32 recurrence arithmetic in both rungs: 2e-5.
//   Rung 3 (bf16 inputs with 16 <= K <= 128; other calls run rung 2) takes w_aux, Qg, Kd, P and v_new /
//   dv_new into its two recurrences as single bf16 values (the forward's kernels), so every gradient,
//   dh0 and the float32 gate gradients included, carries bf16-level error: 1e-2 for dq, dk, dv, dh0
//   (worst seen on the H200 over the properties' 400 cases per gate dtype: dk 5.2e-3, dv 3.8e-3, dh0
//   3.5e-3, dq 2.0e-3), 2e-2 for dg, dbeta, db, dw with either gate dtype (worst: DeltaNet's dbeta,
//   8.1e-3 with float32 and 9.1e-3 with bf16 gates - a sum with cancellation of de k and du0 v; dg
//   3.5e-3, dw 3.7e-3); optimized/cuda/RESULTS.md, "Rung 3".
//   Rung 4 (rung 3 with B7 and, for DeltaNet and GDN, B9 of the chunk gradients on tensor cores, hi + lo
//   operands) has rung 3's bounds: its added error (about 6e-6 relative in a float64 numpy model of its
//   tiles with bf16 hi + lo rounding) is far below rung 3's bf16-level error, and on the H200 (session 5
//   call 1) every gradient's worst error ratio over the property runs equals rung 3's to the third
//   digit (largest: DeltaNet dbeta 9.1e-3, KDA dk 5.2e-3; RESULTS.md, "Rung 4").
//   Rung 5 (rung 4 with prepare on the forward's rung 4 intra kernel) is held to rung 3's bounds:
//   its A carries ~2^-16 relative error from tensor-core products and its per-channel L, P bf16
//   operands as rung 3's off-diagonal blocks (bwd_v5_levels_front.cu). Rung 6 (rung 5 with the
//   per-channel B9 on tensor cores by levels) likewise: its B9 adds about 5.6e-6 relative RMS (bf16
//   hi + lo operands, float32 factors and accumulation, emulated in bench/models/bwd_b9_levels_model.py).
//   On the H200 (session 6 call 1) both rungs' worst error ratios equal rung 4's to the second digit
//   except GDN2's dw (4.9e-3 against 3.7e-3), all under the bounds. Rung 7 (rung 6 with the grads
//   kernel's addresses as per-block bases and 32-bit offsets) computes rung 6's values: its bounds,
//   and bit-identity with rung 6 tested below. Rungs 8 (full-width global accesses) and 9 (G, E, Qg,
//   Kd formed in the grads kernel, no extras kernel) compute rung 7's values: the same bounds, and
//   bit-identity with the rung below each tested below. Rung 10 (the grads kernel split in two for
//   DeltaNet and GDN; KDA and GDN2 run rung 8) computes rung 8's terms summed in another float32
//   order: rung 3's bounds, and closeness to rung 8 tested below (its bound derived there).
//   Rung 11 (rung 10 with a faster G2) computes rung 10's values: rung 3's bounds, and bit-identity
//   with rung 10 tested below. Rung 12
//   (rung 10 with G1 retiled by 64-channel slabs) computes rung 10's values: rung 3's bounds, and
//   bit-identity with rung 10 tested below.
//   Rung 15 (one bf16 MMA per product, float32 operands rounded to bf16, no lo operands: rung 13's G1'
//   and G2' for DeltaNet and GDN, rung 8's chunk-gradient kernel for KDA and GDN2) is held to rung 3's
//   bounds, which are bf16-level already: a float64 model of its products
//   (bench/models/bwd_v15_hionly_model.py) predicts its added error ratio at up to 4e-3 (dk) and 6e-3
//   (GDN dg), within the bounds together with rung 13's measured error (RESULTS.md, "Rung 15"). On the
//   H200 (session 10) its fixed cases and the shared cases pass, but its properties failed on tiny
//   cases with extreme gates (the model drew only T = 150 / 200): they were removed, not loosened, and
//   rung 17's fixed-case test asserts rung 15 leaves a bound there.
//   Rung 17 (rung 15 with the lo operand kept on dP's v_new and du0's dv_new, in G1' / G2' for DeltaNet
//   and GDN and in rung 8's kernel for KDA and GDN2) is held to rung 3's bounds:
//   bench/models/bwd_v17_hybrid_model.py, a float64 emulation of the front's bf16 values, the products
//   and the stores, reproduces rung 15's five failing device ratios on their own inputs within 2% and
//   puts rung 17 at <= 0.58x every bound over 1,400 cases like the properties' (RESULTS.md, "Rung 17");
//   its fixed-case test includes those failing cases and prints its ratios next to rungs 15, 13 and 8.
// Every gradient buffer is filled with NaN before the launch (the host API does it), so an element
// a kernel does not write fails (a non-finite value counts as an infinite error).
// Without a usable GPU every test that needs one says why (Catch2 WARN) and returns, so CTest
// passes on CI machines; the argument checks run everywhere.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "generators.hpp"
#include "optimized/cuda/chunk_cuda.hpp"
#include "optimized/cuda/route.hpp"
#include "cuda_test_common.hpp"
#include "cuda_bwd_problem.hpp"

using namespace linattn;
using namespace linattn::testing;
using cuda::DType;

namespace {

const Op kOps[] = {Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2};
const cuda::BwdVersion kRungs[] = {cuda::BwdVersion::v1_simple, cuda::BwdVersion::v2_tensorcore,
                                   cuda::BwdVersion::v3_async, cuda::BwdVersion::v4_tc_tail,
                                   cuda::BwdVersion::v5_levels_front, cuda::BwdVersion::v6_tc_b9,
                                   cuda::BwdVersion::v7_rowbase, cuda::BwdVersion::v8_wide,
                                   cuda::BwdVersion::v9_noextras, cuda::BwdVersion::v10_split,
                                   cuda::BwdVersion::v11_wyfast,
                                   cuda::BwdVersion::v12_g1slab,
                                   cuda::BwdVersion::v13_g1g2,
                                   cuda::BwdVersion::v14_pchan,
                                   cuda::BwdVersion::v15_hionly,
                                   cuda::BwdVersion::v16_b9one,
                                   cuda::BwdVersion::v17_hybrid,
                                   cuda::BwdVersion::v18_lean,
                                   cuda::BwdVersion::v19_dsbf16,
                                   cuda::BwdVersion::v20_dvbf16,
                                   cuda::BwdVersion::v21_duvsmem,
                                   cuda::BwdVersion::v22_kq8,
                                   cuda::BwdVersion::v23_dsone,
                                   cuda::BwdVersion::v24_dswide,
                                   cuda::BwdVersion::v25_g1async,
                                   cuda::BwdVersion::v26_wyasync,
                                   cuda::BwdVersion::v27_dvplanes,
                                   cuda::BwdVersion::v28_sbf16,
                                   cuda::BwdVersion::v29_b1hi,
                                   cuda::BwdVersion::v30_dsw2,
                                   cuda::BwdVersion::v31_dkbf16,
                                   cuda::BwdVersion::v32_g1stage,
                                   cuda::BwdVersion::v33_g2stage};

/// Rungs 3 to 10 share rung 3's range (bf16 inputs, 16 <= K <= 128) and bounds.
bool rung3_family(cuda::BwdVersion ver) {
  return ver == cuda::BwdVersion::v3_async || ver == cuda::BwdVersion::v4_tc_tail ||
         ver == cuda::BwdVersion::v5_levels_front || ver == cuda::BwdVersion::v6_tc_b9 ||
         ver == cuda::BwdVersion::v7_rowbase || ver == cuda::BwdVersion::v8_wide ||
         ver == cuda::BwdVersion::v9_noextras || ver == cuda::BwdVersion::v10_split ||
         ver == cuda::BwdVersion::v11_wyfast ||
         ver == cuda::BwdVersion::v12_g1slab ||
         ver == cuda::BwdVersion::v13_g1g2 ||
         ver == cuda::BwdVersion::v14_pchan ||
         ver == cuda::BwdVersion::v15_hionly ||
         ver == cuda::BwdVersion::v16_b9one ||
         ver == cuda::BwdVersion::v17_hybrid ||
         ver == cuda::BwdVersion::v18_lean ||
         ver == cuda::BwdVersion::v19_dsbf16 ||
         ver == cuda::BwdVersion::v20_dvbf16 ||
         ver == cuda::BwdVersion::v21_duvsmem ||
         ver == cuda::BwdVersion::v22_kq8 ||
         ver == cuda::BwdVersion::v23_dsone ||
         ver == cuda::BwdVersion::v24_dswide ||
         ver == cuda::BwdVersion::v25_g1async ||
         ver == cuda::BwdVersion::v26_wyasync ||
         ver == cuda::BwdVersion::v27_dvplanes ||
         ver == cuda::BwdVersion::v28_sbf16 ||
         ver == cuda::BwdVersion::v29_b1hi ||
         ver == cuda::BwdVersion::v30_dsw2 ||
         ver == cuda::BwdVersion::v31_dkbf16 ||
         ver == cuda::BwdVersion::v32_g1stage ||
         ver == cuda::BwdVersion::v33_g2stage;
}
const char* dname(DType dt) { return dt == DType::f32 ? "f32" : "bf16"; }

/// Rung 3's bounds with bf16 inputs (file comment), also rungs 4 to 8: dq, dk, dv, dh0; the gate gradients.
constexpr double kV3Tol = 1e-2, kV3TolGates = 2e-2;

/// The bound of the file comment for gradient `name` of a call with head size K. Rungs 3 to 9 get
/// their looser bounds only where they run their own kernels (bf16, 16 <= K <= 128); elsewhere they
/// run rung 2 and are held to rung 2's bounds.
double tol(const std::string& name, DType dt, DType gdt, cuda::BwdVersion ver, index_t K) {
  const bool gate_grad = name == "dg" || name == "dbeta" || name == "db" || name == "dw";
  if (rung3_family(ver) && dt == DType::bf16 &&
      K >= 16 && K <= 128)
    return gate_grad ? kV3TolGates : kV3Tol;
  const bool tc = ver != cuda::BwdVersion::v1_simple && dt == DType::bf16;
  if (gate_grad) return gdt == DType::bf16 ? 5e-3 : (tc ? 1e-4 : 2e-5);
  if (name == "dh0") return 2e-5;
  return dt == DType::bf16 ? 5e-3 : 2e-5;
}

ref::RecurrentGrads<float> cuda_backward(const DevProblem& d, DType dt, DType gdt, cuda::BwdVersion ver) {
  return cuda::chunk_backward(d.p.op, d.p.q, d.p.k, d.p.v, d.p.gates, d.do_, d.dht, d.p.opt, dt, gdt, ver);
}

/// y's gradients equal x's: the same set defined and, for each, bit for bit -- or, with tol > 0,
/// within tol relative RMS (the differences printed under LINATTN_CUDA_BACKWARD_REPORT, after
/// `what`). The caller's INFO names the case. `skip`: one gradient left to the caller (rung 21's dbeta).
void check_same_grads(const ref::RecurrentGrads<float>& x, const ref::RecurrentGrads<float>& y, double tol = 0,
                      const std::string& what = "", const std::string& skip = "") {
  const std::tuple<const char*, const Tensor<float>*, const Tensor<float>*> grads[] = {
      {"dq", &x.dq, &y.dq},          {"dk", &x.dk, &y.dk}, {"dv", &x.dv, &y.dv}, {"dg", &x.dg, &y.dg},
      {"dbeta", &x.dbeta, &y.dbeta}, {"db", &x.db, &y.db}, {"dw", &x.dw, &y.dw}, {"dh0", &x.dh0, &y.dh0}};
  for (const auto& [name, a, c] : grads) {
    if (name == skip) continue;
    INFO(name);
    REQUIRE(a->defined() == c->defined());
    if (!a->defined()) continue;
    if (tol == 0) {
      CHECK(std::memcmp(a->data(), c->data(), sizeof(float) * a->numel()) == 0);
    } else {
      const Comparison cmp = compare(*c, *a);
      INFO(what << ": " << cmp.str());
      CHECK(cmp.within(tol));
      if (std::getenv("LINATTN_CUDA_BACKWARD_REPORT") && cmp.rel_rms > 0)
        std::cout << what << ", " << name << ": " << cmp.str() << "\n";
    }
  }
}

/// Every gradient y defines is finite (NaN on both sides compares equal bit for bit: this rules it out).
void check_all_finite(const ref::RecurrentGrads<float>& y) {
  for (const Tensor<float>* t : {&y.dq, &y.dk, &y.dv, &y.dg, &y.dbeta, &y.db, &y.dw, &y.dh0}) {
    if (!t->defined()) continue;
    bool finite = true;
    for (index_t k = 0; k < t->numel(); ++k) finite = finite && std::isfinite(t->data()[k]);
    CHECK(finite);
  }
}

/// One gradient's comparison.
struct GradErr {
  std::string name;
  bool defined_ok = true, shape_ok = true;
  double err = 0, scale = 0, floor = 0;  // rms(got - want), rms(want), the floor
  double ratio() const { return err / std::max({scale, floor, 1e-300}); }
};

/// Every gradient the operator has (see the file comment for the measure).
std::vector<GradErr> compare_grads(const ref::RecurrentGrads<float>& got,
                                   const ref::RecurrentGrads<double>& want) {
  const std::vector<std::tuple<const char*, const Tensor<float>*, const Tensor<double>*>> all = {
      {"dq", &got.dq, &want.dq},          {"dk", &got.dk, &want.dk},
      {"dv", &got.dv, &want.dv},          {"dg", &got.dg, &want.dg},
      {"dbeta", &got.dbeta, &want.dbeta}, {"db", &got.db, &want.db},
      {"dw", &got.dw, &want.dw},          {"dh0", &got.dh0, &want.dh0}};
  double sq = 0, cnt = 0;
  for (const Tensor<double>* w : {&want.dq, &want.dk, &want.dv}) {
    for (index_t i = 0; i < w->numel(); ++i) sq += w->data()[i] * w->data()[i];
    cnt += double(w->numel());
  }
  const double floor = cnt > 0 ? std::sqrt(sq / cnt) : 0.0;
  std::vector<GradErr> out;
  for (const auto& [name, g, w] : all) {
    GradErr e;
    e.name = name;
    e.floor = floor;
    e.defined_ok = g->defined() == w->defined();
    if (!w->defined() || !e.defined_ok) {
      if (!e.defined_ok) out.push_back(e);
      continue;
    }
    e.shape_ok = g->shape() == w->shape();
    if (e.shape_ok) {
      double num = 0, den = 0;
      for (index_t i = 0; i < w->numel(); ++i) {
        const double a = double(g->data()[i]), b = w->data()[i];
        num += std::isfinite(a) ? (a - b) * (a - b) : INFINITY;
        den += b * b;
      }
      const double n = w->numel() ? double(w->numel()) : 1.0;
      e.err = std::sqrt(num / n), e.scale = std::sqrt(den / n);
    }
    out.push_back(e);
  }
  return out;
}

bool within(const GradErr& e, DType dt, DType gdt, cuda::BwdVersion ver, index_t K) {
  return e.defined_ok && e.shape_ok && std::isfinite(e.err) &&
         e.err <= tol(e.name, dt, gdt, ver, K) * std::max(e.scale, e.floor);
}

std::string describe(const std::vector<GradErr>& errs) {
  std::ostringstream os;
  for (const GradErr& e : errs)
    os << e.name << ": err " << e.err << " rms " << e.scale << " floor " << e.floor
       << (e.defined_ok && e.shape_ok ? "" : " (undefined or wrong shape)") << "; ";
  return os.str();
}

/// The largest error ratios seen per gradient (printed when LINATTN_CUDA_BACKWARD_REPORT is set),
/// to measure the bounds of the file comment.
struct Worst {
  std::map<std::string, double> by_grad;
  void add(const std::vector<GradErr>& errs) {
    for (const GradErr& e : errs) by_grad[e.name] = std::max(by_grad[e.name], e.ratio());
  }
  void print(const std::string& title) const {
    if (!std::getenv("LINATTN_CUDA_BACKWARD_REPORT")) return;
    std::cout << title << " (worst err / max(rms, floor)):";
    for (const auto& [name, w] : by_grad) std::cout << "  " << name << " " << w;
    std::cout << "\n";
  }
};

/// The property for one dtype pair and rung: every operator, any structure drawn, equals the
/// reference. Rung 2 also draws K, V up to 150 (one in four cases): its 64-column slabs.
void prop_matches_reference(DType dt, DType gdt, cuda::BwdVersion ver = cuda::BwdVersion::v1_simple) {
  const bool v2 = ver == cuda::BwdVersion::v2_tensorcore;
  const bool v3 = rung3_family(ver);  // rung 3's range
  for (Op op : kOps) {
    auto worst = std::make_shared<Worst>();
    rc::prop(std::string(ref::op_name(op)) + " backward equals the reference", [=] {
      BwdCase b;
      CaseLimits lim;
      lim.max_B = 2, lim.max_H = 2, lim.max_K = 40, lim.max_V = 40;
      if (v2 && *rc::gen::weightedElement<bool>({{3, false}, {1, true}})) lim.max_K = lim.max_V = 150;
      lim.max_T = *rc::gen::weightedElement<index_t>({{4, 70}, {1, 200}});
      b.c = *gen_case(lim);
      // Rungs 3 to 9 run their own kernels for 16 <= K <= 128 (else rung 2's): K from there, up to
      // 128 in one case of four.
      if (v3) b.c.K = *rc::gen::inRange<index_t>(16, *rc::gen::weightedElement<index_t>({{3, 41}, {1, 129}}));
      b.with_dht = *rc::gen::weightedElement<bool>({{3, true}, {1, false}});
      // the host normalises before rounding, the reference after: only in float32
      b.l2norm = dt == DType::f32 && *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
      b.custom_scale = *rc::gen::arbitrary<bool>();
      const DevProblem d = as_device_sees(make_bwd_problem(op, b), dt, gdt);
      const auto errs = compare_grads(cuda_backward(d, dt, gdt, ver), reference_backward(d));
      worst->add(errs);
      RC_LOG() << cuda::bwd_version_name(ver) << " " << ref::op_name(op) << " " << dname(dt) << " gates "
               << dname(gdt) << " " << b << "\n" << describe(errs) << "\n";
      for (const GradErr& e : errs) RC_ASSERT(within(e, dt, gdt, ver, b.c.K));
    });
    worst->print(std::string(cuda::bwd_version_name(ver)) + " " + ref::op_name(op) + " " + dname(dt) +
                 " gates " + dname(gdt));
  }
}

Case fixed_case(index_t B, index_t T, index_t H, index_t K, index_t V, GateMode gm, bool init,
                std::uint64_t seed, std::vector<index_t> cu = {}) {
  Case c;
  c.B = B, c.T = T, c.H = H, c.K = K, c.V = V, c.gates = gm, c.initial_state = init, c.seed = seed;
  c.cu_seqlens = std::move(cu);
  return c;
}

/// Every operator on one case, both input types (float32 gates), every rung (rungs 2-5 on float32
/// inputs is rung 1 and is not repeated).
void check_case(const Case& c, bool with_dht = true) {
  for (DType dt : {DType::f32, DType::bf16})
    for (Op op : kOps) {
      BwdCase b;
      b.c = c, b.with_dht = with_dht;
      const DevProblem d = as_device_sees(make_bwd_problem(op, b), dt, DType::f32);
      const auto want = reference_backward(d);
      for (cuda::BwdVersion ver : kRungs) {
        if (dt == DType::f32 && ver != cuda::BwdVersion::v1_simple) continue;
        const auto errs = compare_grads(cuda_backward(d, dt, DType::f32, ver), want);
        INFO(cuda::bwd_version_name(ver) << " " << ref::op_name(op) << " " << dname(dt) << " " << c << ": "
                                         << describe(errs));
        for (const GradErr& e : errs) CHECK(within(e, dt, DType::f32, ver, c.K));
      }
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Properties against the reference, per input type.
// ---------------------------------------------------------------------------------------------

TEST_CASE("CUDA v1 chunked backward equals the float64 reference backward for every operator in float32") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::f32, DType::f32);
}

TEST_CASE("CUDA v1 chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32);
}

TEST_CASE("CUDA v1 chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16);
}

TEST_CASE("CUDA v2 tensor-core chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v2_tensorcore);
}

TEST_CASE("CUDA v2 tensor-core chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v2_tensorcore);
}

TEST_CASE("CUDA v2 chunked backward with float32 inputs equals the float64 reference backward within the float32 bound") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::f32, DType::f32, cuda::BwdVersion::v2_tensorcore);
}

TEST_CASE("CUDA v3 chunked backward on the forward tensor-core kernels equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v3_async);
}

TEST_CASE("CUDA v3 chunked backward on the forward tensor-core kernels with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v3_async);
}

namespace {
/// Rung `ver` (3 to 9) outside rung 3's range gives rung 2's gradients bit for bit: float32 inputs
/// (rung 2 runs rung 1), and bf16 inputs with K = 8 and K = 200.
void check_outside_range_is_rung2(cuda::BwdVersion ver) {
  const std::tuple<DType, index_t> calls[] = {{DType::f32, 64}, {DType::bf16, 8}, {DType::bf16, 200}};
  for (const auto& [dt, K] : calls)
    for (Op op : kOps) {
      BwdCase b;
      b.c = fixed_case(1, 100, 2, K, 24, GateMode::random, true, 41);
      const DevProblem d = as_device_sees(make_bwd_problem(op, b), dt, DType::f32);
      const auto x = cuda_backward(d, dt, DType::f32, cuda::BwdVersion::v2_tensorcore);
      const auto y = cuda_backward(d, dt, DType::f32, ver);
      INFO(cuda::bwd_version_name(ver) << " " << ref::op_name(op) << " " << dname(dt) << " K = " << K);
      check_same_grads(x, y);
    }
}

/// The cases on which two rungs are compared gradient by gradient: two K and V slabs; K, V not
/// multiples of 64 with a ragged last chunk; a small odd K with T = 1.
std::vector<Case> pair_cases() {
  return {fixed_case(2, 300, 4, 128, 128, GateMode::random, true, 31),
          fixed_case(1, 130, 2, 100, 200, GateMode::random, true, 26),
          fixed_case(3, 1, 2, 17, 40, GateMode::mixed, false, 5)};
}

/// Rung b gives rung a's gradients on every case, operator and gate dtype (bf16 inputs): bit for bit,
/// except for the per-channel-gate operators (KDA, GDN2) when chan_tol > 0: within chan_tol
/// relative RMS (check_same_grads).
/// poison_between: the process-wide workspaces are NaN-filled (cuda::poison_device_workspaces) before
/// rung b runs, so that b reading a workspace array it did not write (but a wrote) cannot pass.
/// expect_route (review20): where set, the split route (route.hpp) that rung b's call must have taken, per case and
/// operator, so that a rung which silently fell back to rung a cannot pass by comparing rung a with itself.
/// expect_dstates_grid (rung 24): where set, the dstates kernel's block order and width (last_dstates_grid, route.hpp)
/// that rung b's call must have launched, for rungs whose only change is which dstates kernel runs.
template <class Ops>
void check_rungs_agree(cuda::BwdVersion a, cuda::BwdVersion b, const std::vector<Case>& cases, const Ops& ops,
                       double chan_tol = 0, bool require_finite = false, bool poison_between = false,
                       const std::function<std::string(const Case&, Op)>& expect_route = {},
                       const std::function<std::string(const Case&, Op)>& expect_dstates_grid = {}) {
  for (const Case& cs : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : ops) {
        BwdCase bc;
        bc.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, bc), DType::bf16, gdt);
        const auto x = cuda_backward(d, DType::bf16, gdt, a);
        if (poison_between) cuda::poison_device_workspaces();
        const auto y = cuda_backward(d, DType::bf16, gdt, b);
        const std::string route = cuda::last_backward_split_route();
        const std::string grid = cuda::last_dstates_grid();  // rung b's dstates launch (route.hpp)
        INFO(ref::op_name(op) << " gates " << dname(gdt) << " " << cs << "; route " << route << ", dstates grid "
                              << grid);
        if (expect_route) CHECK(route == expect_route(cs, op));
        if (expect_dstates_grid) CHECK(grid == expect_dstates_grid(cs, op));
        const bool chan = op == Op::kda || op == Op::gdn2;
        check_same_grads(x, y, chan ? chan_tol : 0,
                         std::string(cuda::bwd_version_name(b)) + " vs " + cuda::bwd_version_name(a) + ", " +
                             ref::op_name(op) + " gates " + dname(gdt));
        if (!require_finite) continue;  // NaN on both sides compares equal: require_finite rules it out
        check_all_finite(y);
      }
}

/// Rung 8's bit test's cases: pair_cases (K = V = 128 with two slabs, K = 100 V = 200 ragged, K = 17
/// V = 40 at T = 1, an H = 3 packed batch), a ragged packed batch, K = 36 V = 20 (quads, V not a multiple
/// of 8), K = 18 V = 22 (neither a multiple of 4), a packed batch with an odd row count B T H, and an odd
/// V (review7: du0's pairs on the per-pair path st_pair_w, its last column alone).
std::vector<Case> rung8_bit_cases() {
  std::vector<Case> cases = pair_cases();
  cases.push_back(fixed_case(1, 200, 3, 48, 72, GateMode::random, true, 27, {0, 70, 71, 200}));
  cases.push_back(fixed_case(2, 150, 2, 36, 20, GateMode::random, true, 28));
  cases.push_back(fixed_case(1, 90, 3, 18, 22, GateMode::mixed, true, 29));
  cases.push_back(fixed_case(1, 201, 3, 32, 64, GateMode::random, true, 30, {0, 1, 64, 129, 130, 201}));
  cases.push_back(fixed_case(1, 90, 2, 24, 23, GateMode::random, true, 31));
  return cases;
}

/// Rung 9's bit test's cases, which rungs 10-13 reuse: rung 8's, and log-decays at -30 and -1000
/// (extreme) and at 0 (zero), a quad case (K = 64) and an item case (K = 22 V = 30, ragged packed) each.
std::vector<Case> rung9_bit_cases() {
  std::vector<Case> cases = rung8_bit_cases();
  cases.push_back(fixed_case(1, 150, 2, 64, 64, GateMode::extreme, true, 32));
  cases.push_back(fixed_case(1, 150, 2, 64, 64, GateMode::zero, true, 33));
  cases.push_back(fixed_case(1, 131, 3, 22, 30, GateMode::extreme, true, 34, {0, 67, 131}));
  cases.push_back(fixed_case(1, 131, 3, 22, 30, GateMode::zero, false, 35, {0, 67, 131}));
  return cases;
}

/// Rung 13's bit test's cases, which rung 18's reuses: rung 9's, and the union of the v11 and v12 bit
/// tests' own (K = 72 V = 136 and K = 100 V = 36 ragged, K = 128 V = 20 and K = 100 V = 128 extreme).
std::vector<Case> rung13_bit_cases() {
  std::vector<Case> cases = rung9_bit_cases();
  cases.push_back(fixed_case(1, 200, 2, 72, 136, GateMode::random, true, 36, {0, 65, 200}));  // v11's
  cases.push_back(fixed_case(1, 131, 2, 128, 20, GateMode::extreme, true, 37));              // v11's
  cases.push_back(fixed_case(1, 150, 2, 100, 36, GateMode::random, true, 36));                // v12's
  cases.push_back(fixed_case(1, 131, 2, 100, 128, GateMode::extreme, true, 37, {0, 3, 131}));  // v12's
  return cases;
}
}  // namespace

TEST_CASE("CUDA v3 chunked backward outside its range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v3_async);
}

TEST_CASE("CUDA v4 tensor-core B7 and B9 chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v4_tc_tail);
}

TEST_CASE("CUDA v4 tensor-core B7 and B9 chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v4_tc_tail);
}

TEST_CASE("CUDA v4 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v4_tc_tail);
}

TEST_CASE("CUDA v5 chunked backward with the levels intra kernel in prepare equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v5_levels_front);
}

TEST_CASE("CUDA v5 chunked backward with the levels intra kernel in prepare and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v5_levels_front);
}

TEST_CASE("CUDA v5 grads kernel after rung 3 prepare gives rung 4 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 5's grads-kernel changes (batched stagings and tail, unrolled per-channel B9) claim the
  // same sums in the same order as rung 4's kernel; on rung 4's prepare (LINATTN_BWD5_V3_FRONT,
  // bwd_v5_levels_front.cu) DeltaNet's and GDN's gradients must then be identical. KDA's and GDN2's
  // go through the unrolled float32 B9, whose dk sum src = dP q~ + dL e was found (session 6 call 1,
  // H200) to differ from rung 4's in the last bits of dk and dg: nvcc peels the unrolled loop's
  // remainder and, in the peeled i = r + 1, r + 2, contracts a * b + c * d as fma(a, b, c * d) where
  // rung 4's loop has fma(c, d, a * b) (optimized/cuda/bench/analysis_bwd_v5_bits.md). Those two
  // operators are held to 5e-5 relative RMS instead: measured (session 6 call 2) up to 1.2e-6 for dk
  // and 8.2e-6 for dg with bf16 gates (dg's reverse sum cancels); one wrong element of a gradient
  // this size alone is ~2e-3, an indexing error O(1).
  ::setenv("LINATTN_BWD5_V3_FRONT", "1", 1);
  struct Unset {
    ~Unset() { ::unsetenv("LINATTN_BWD5_V3_FRONT"); }
  } unset;
  check_rungs_agree(cuda::BwdVersion::v4_tc_tail, cuda::BwdVersion::v5_levels_front, pair_cases(), kOps, 5e-5);
}

TEST_CASE("CUDA v5 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v5_levels_front);
}

TEST_CASE("CUDA v6 chunked backward with the per-channel B9 by levels on tensor cores equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v6_tc_b9);
}

TEST_CASE("CUDA v6 chunked backward with the per-channel B9 by levels on tensor cores and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v6_tc_b9);
}

TEST_CASE("CUDA v6 chunked backward gives rung 5 gradients bit for bit for DeltaNet and GDN") {
  SKIP_WITHOUT_GPU();
  // Rung 6 changes B9 only for per-channel gates: for DeltaNet and GDN its grads kernel runs V5Mid's
  // code (V4Mid::run_impl with kBatch) after rung 5's prepare, so every gradient must be identical.
  check_rungs_agree(cuda::BwdVersion::v5_levels_front, cuda::BwdVersion::v6_tc_b9, pair_cases(),
                    std::array{Op::delta_rule, Op::gated_delta_rule});
}

TEST_CASE("CUDA v6 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v6_tc_b9);
}

TEST_CASE("CUDA v7 chunked backward with per-block row bases equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v7_rowbase);
}

TEST_CASE("CUDA v7 chunked backward with per-block row bases and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v7_rowbase);
}

TEST_CASE("CUDA v7 chunked backward gives rung 6 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 7 changes only how the grads kernel forms its global addresses (bwd_common.cuh's RowBase:
  // per-block bases and 32-bit offsets; the same values and floating-point operations in the same
  // order) after rung 6's prepare, states and dstates: every gradient of every operator must equal
  // rung 6's. The cases of the v5-vs-v4 test: two K and V slabs; K, V not multiples of 64 with a
  // ragged last chunk; a small odd K with T = 1 (one row, Lc = 1); and, added for rung 7, H = 3 with
  // a packed batch (odd row strides H W; chunks whose first token, 70 or 71, is not a multiple of 64).
  std::vector<Case> cases = pair_cases();
  cases.push_back(fixed_case(1, 200, 3, 48, 72, GateMode::random, true, 27, {0, 70, 71, 200}));
  check_rungs_agree(cuda::BwdVersion::v6_tc_b9, cuda::BwdVersion::v7_rowbase, cases, kOps);
}

TEST_CASE("CUDA v7 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v7_rowbase);
}

TEST_CASE("CUDA v8 chunked backward with full-width global accesses equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v8_wide);
}

TEST_CASE("CUDA v8 chunked backward with full-width global accesses and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v8_wide);
}

TEST_CASE("CUDA v8 chunked backward gives rung 7 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 8 changes only the width of the grads kernel's global accesses (bwd_common.cuh, Mid::kWide:
  // column pairs stored by 8 bytes where aligned, stagings and tail by 4 columns per thread where K or
  // V is a multiple of 4 and the arrays are aligned; dgamma's butterfly in the same order) after rung
  // 7's prepare, states and dstates: every gradient of every operator must equal rung 7's. Cases: rung
  // 7's (pair_cases: K = V = 128 with two slabs, K = 100 V = 200 ragged, K = 17 V = 40 at T = 1 where
  // the tail and E run item by item and the odd K takes the per-pair test st_pair_w; H = 3 packed
  // batch); K = 36 V = 20 (quads everywhere, V not a multiple of 8); K = 18 V = 22 (neither a multiple
  // of 4: only A's staging by quads; every pair on the even path); a packed batch of ragged chunks
  // with an odd number of rows B T H (GDN's float64 G then leaves the float32 workspace 8- but not
  // 16-byte aligned: its quads fall back, KDA's do not).
  std::vector<Case> cases = rung8_bit_cases();
  check_rungs_agree(cuda::BwdVersion::v7_rowbase, cuda::BwdVersion::v8_wide, cases, kOps);
}

TEST_CASE("CUDA v8 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v8_wide);
}

TEST_CASE("CUDA v9 chunked backward with G E Qg Kd formed in the grads kernel equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v9_noextras);
}

TEST_CASE("CUDA v9 chunked backward with G E Qg Kd formed in the grads kernel and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v9_noextras);
}

TEST_CASE("CUDA v9 chunked backward gives rung 8 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 9 launches no extras kernel: its grads kernel forms G (the float64 row-order cumsum of g per
  // chunk) and E, Qg, Kd with the extras kernel's expressions where rung 8 loads them (bwd_common.cuh,
  // Mid::kNoExtras): every gradient of every operator must equal rung 8's. Cases: rung 8's bit test's
  // (K = V = 128 two slabs; K = 100 V = 200 ragged; K = 17 V = 40 at T = 1, item by item; packed
  // ragged batches with an odd row count B T H; K = 36 V = 20 quads; K = 18 V = 22 item-by-item E
  // and tail; an odd V), and log-decays at -30 and -1000 (extreme: exp(G) underflows to 0 in float32
  // while G_last - G_i stays finite) and at 0 (zero: G = 0, E = e k, Qg = scale q, Kd = k exactly),
  // a quad case (K = 64) and an item case (K = 22 V = 30, ragged packed batch) each.
  std::vector<Case> cases = rung9_bit_cases();
  check_rungs_agree(cuda::BwdVersion::v8_wide, cuda::BwdVersion::v9_noextras, cases, kOps);
}

TEST_CASE("CUDA v9 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v9_noextras);
}

namespace {
/// rms(y - x) / max(rms(x), floor), floor = rms of x's dq, dk and dv together (the file comment's measure,
/// with rung 8's gradients x in the reference's place).
double rel_to(const Tensor<float>& y, const Tensor<float>& x, double floor) {
  double num = 0, den = 0;
  for (index_t i = 0; i < x.numel(); ++i) {
    const double a = y.data()[i], b = x.data()[i];
    num += std::isfinite(a) ? (a - b) * (a - b) : INFINITY;
    den += b * b;
  }
  const double n = x.numel() ? double(x.numel()) : 1.0;
  return std::sqrt(num / n) / std::max({std::sqrt(den / n), floor, 1e-300});
}

/// rel_to's floor: the RMS of x's dq, dk and dv together.
double grad_floor(const ref::RecurrentGrads<float>& x) {
  double sq = 0, cnt = 0;
  for (const Tensor<float>* w : {&x.dq, &x.dk, &x.dv}) {
    for (index_t i = 0; i < w->numel(); ++i) sq += double(w->data()[i]) * w->data()[i];
    cnt += double(w->numel());
  }
  return cnt > 0 ? std::sqrt(sq / cnt) : 0.0;
}

/// A per-channel split rung `ver` (14 or 16) against rung 8 for KDA and GDN2 on `cases`, both gate dtypes
/// (the tests "CUDA v14 per-channel split backward is rung 8 up to float32 summation order for KDA and
/// GDN2" and "CUDA v16 one B9 kernel backward is rung 8 up to float32 summation order for KDA and GDN2" say
/// what and why): dq, dv, dw, dh0 bit for bit; dk, dg, db, dbeta within 5e-4 (stored in bf16) or 2e-5
/// (float32) relative to max(rms(rung 8), rms of rung 8's dq, dk, dv); every gradient finite; with
/// `require_dg_differs`, dg not bit for bit with rung 8's on every case (the rung's kernels ran, not rung 8
/// by a wiring slip). Worst ratios printed under LINATTN_CUDA_BACKWARD_REPORT as
/// "v<ver> vs v8 worst " + label + key.
void check_split_near_v8(cuda::BwdVersion ver, const std::vector<Case>& cases, const std::string& label,
                         bool require_dg_differs) {
  const std::string vname = "v" + std::to_string(static_cast<int>(ver));
  std::map<std::string, double> worst;
  bool dg_differs = false;
  for (const Case& cs : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : {Op::kda, Op::gdn2}) {
        BwdCase bc;
        bc.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, bc), DType::bf16, gdt);
        const auto x = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v8_wide);
        const auto y = cuda_backward(d, DType::bf16, gdt, ver);
        INFO(cuda::bwd_version_name(ver) << " vs bwd_v8_wide, " << ref::op_name(op) << " gates " << dname(gdt) << " " << cs);
        for (const auto& [name, a, b] : {std::tuple{"dq", &x.dq, &y.dq}, {"dv", &x.dv, &y.dv}, {"dw", &x.dw, &y.dw},
                                          {"dh0", &x.dh0, &y.dh0}}) {
          INFO(name << " bit for bit");
          REQUIRE(a->defined() == b->defined());
          if (!a->defined()) continue;
          CHECK(std::memcmp(a->data(), b->data(), sizeof(float) * a->numel()) == 0);
        }
        const double floor = grad_floor(x);
        for (const auto& [name, a, b] : {std::tuple{"dk", &x.dk, &y.dk}, {"dg", &x.dg, &y.dg}, {"db", &x.db, &y.db},
                                          {"dbeta", &x.dbeta, &y.dbeta}}) {
          REQUIRE(a->defined() == b->defined());
          if (!a->defined()) continue;
          const bool bf16_stored = std::string(name) == "dk" || gdt == DType::bf16;
          const double r = rel_to(*b, *a, floor), bound = bf16_stored ? 5e-4 : 2e-5;
          INFO(name << ": rms(" << vname << " - v8) / max(rms(v8), floor) = " << r << ", bound " << bound);
          CHECK(r <= bound);
          const std::string key = std::string(ref::op_name(op)) + " " + name + " gates " + dname(gdt);
          worst[key] = std::max(worst[key], r);
          if (std::string(name) == "dg") dg_differs = dg_differs || std::memcmp(a->data(), b->data(), sizeof(float) * a->numel()) != 0;
        }
        check_all_finite(y);
      }
  if (std::getenv("LINATTN_CUDA_BACKWARD_REPORT"))
    for (const auto& [key, r] : worst) std::cout << vname << " vs v8 worst " << label << key << ": " << r << "\n";
  if (require_dg_differs) {
    // dG is summed in another float32 order than rung 8's (rung 16: dG_part rounded in G1s, then four
    // terms in the B9 kernel; rung 8: six terms in one expression), so dg (float32 with float32 gates)
    // differs from rung 8's in some element over these cases unless the rung's kernels did not run (rung
    // 14, the same reordering, measured dg 2.9e-5 from rung 8).
    INFO(vname << "'s dg equals rung 8's bit for bit on every case: did " << cuda::bwd_version_name(ver) << " run rung 8?");
    CHECK(dg_differs);
  }
}
}  // namespace

TEST_CASE("CUDA v10 split chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v10_split);
}

TEST_CASE("CUDA v10 split chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v10_split);
}

TEST_CASE("CUDA v10 split chunked backward is rung 8 up to float32 summation order") {
  SKIP_WITHOUT_GPU();
  // Rung 10 (bwd_v10_split.cu) splits rung 8's grads kernel into G1 and G2 for DeltaNet and GDN; KDA and
  // GDN2 run rung 8 itself. What is the same: the front (so dh0), dA, du0, dE, dL, de^L, dq^P (the same
  // tiles and products), dq = scale (dQg exp(G) + dq^P) and dv = beta du0 (the same expressions): dq, dv,
  // dh0 bit for bit, and for KDA and GDN2 every gradient. What differs: float32 summation order only,
  // in dk (rung 8: dKd exp(G_last - G) + (M1b^T k + scale M2^T q) + beta de; rung 10: (dKd exp(..) +
  // scale M2^T q) + M1b^T k + beta de, stored once in between) and dG (six terms in one expression, now
  // four in G1 and three in G2), hence dg; and dbeta = <de, k> + <du0, v> is rung 8's sum of the same
  // terms except through u0 = beta v's hi + lo split (G2 forms the product by mul.rn; rung 8's plain
  // product may be contracted by the compiler into the split's lo = u0 - bf16(u0)), so it is held to
  // the same bound as dk and dg rather than to bit equality.
  // The bound. A reordered float32 sum of n terms differs by a few ulps of its largest partial sums:
  // with n <= 7 terms here and dg's reverse sum over <= 64 rows, delta <= ~64 x 6e-8 ~ 4e-6 relative
  // to the floor (the terms are of size |q dq|, |k dk| <= the floor times |q|, |k| ~ 1), typically
  // ~1e-7 to 1e-6. Stored as float32 (dg, dbeta with float32 gates) that is the difference itself:
  // bound 2e-5 (5x the worst case). Stored as bf16 (dk; dg, dbeta with bf16 gates) a difference delta |x|
  // moves the rounding of x with probability <= delta |x| / ulp(x) <= 2^8 delta, by one ulp <= 2^-7 |x|,
  // so the mean square difference is <= 2^8 delta 2^-14 x^2: relative RMS <= sqrt(delta / 64), 1.3e-4 at
  // delta = 1e-6 and 2.5e-4 at 4e-6: bound 5e-4. (A single flip in a case of n elements weighs
  // 2^-7 / sqrt(n); the smallest case with L terms has n >= 90 x 2 x 17 = 3,060: 1.4e-4.) A dropped or
  // misplaced term moves a gradient by O(1) of its size (mutants 98-105 in make_mutants.py).
  // Cases: rung 9's bit test's (rung 8's odd K and V, packed ragged batches with an odd row count,
  // quads and items, g at -30 and -1000 and at 0).
  std::vector<Case> cases = rung9_bit_cases();
  std::map<std::string, double> worst;
  for (const Case& cs : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : kOps) {
        BwdCase bc;
        bc.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, bc), DType::bf16, gdt);
        const auto x = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v8_wide);
        const auto y = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v10_split);
        INFO("bwd_v10_split vs bwd_v8_wide, " << ref::op_name(op) << " gates " << dname(gdt) << " " << cs);
        if (op == Op::kda || op == Op::gdn2) {  // rung 8 itself
          check_same_grads(x, y);
          continue;
        }
        for (const auto& [name, a, b] : {std::tuple{"dq", &x.dq, &y.dq}, {"dv", &x.dv, &y.dv}, {"dh0", &x.dh0, &y.dh0}}) {
          INFO(name << " bit for bit");
          REQUIRE(a->defined() == b->defined());
          if (!a->defined()) continue;
          CHECK(std::memcmp(a->data(), b->data(), sizeof(float) * a->numel()) == 0);
        }
        const double floor = grad_floor(x);
        for (const auto& [name, a, b] : {std::tuple{"dk", &x.dk, &y.dk}, {"dbeta", &x.dbeta, &y.dbeta}, {"dg", &x.dg, &y.dg}}) {
          REQUIRE(a->defined() == b->defined());
          if (!a->defined()) continue;
          const bool bf16_stored = std::string(name) == "dk" || gdt == DType::bf16;
          const double r = rel_to(*b, *a, floor), bound = bf16_stored ? 5e-4 : 2e-5;
          INFO(name << ": rms(v10 - v8) / max(rms(v8), floor) = " << r << ", bound " << bound);
          CHECK(r <= bound);
          const std::string key = std::string(ref::op_name(op)) + " " + name + " gates " + dname(gdt);
          worst[key] = std::max(worst[key], r);
        }
      }
  if (std::getenv("LINATTN_CUDA_BACKWARD_REPORT"))
    for (const auto& [key, r] : worst) std::cout << "v10 vs v8 worst " << key << ": " << r << "\n";
}

TEST_CASE("CUDA v10 split chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v10_split);
}

TEST_CASE("CUDA v11 fast WY chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v11_wyfast);
}

TEST_CASE("CUDA v11 fast WY chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v11_wyfast);
}

TEST_CASE("CUDA v11 gradients equal v10 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 11 (bwd_v11_wyfast.cu) is rung 10 with G2 replaced by bwd11_wy: the same tiles, products and
  // float32 expressions (dE and de are kept on chip instead of stored and reloaded as float32, which
  // changes no value; dbeta's de k terms are summed per lane in rung 10's order, d = lane, lane + 32,
  // ...; the 16-byte loads move the same bytes); G1 and the front are rung 10's. So every gradient bit
  // for bit, and finite (NaN on both sides would compare equal). KDA and GDN2 run rung 8 in both.
  // Cases: rung 10's closeness cases (K = V = 128 and K = 100 V = 200: two K slabs, 16-byte and scalar
  // k paths; odd K and V; packed ragged batches; g at -30, -1000 and 0) and K = 72 V = 136 (three V
  // slabs, a partial second K slab, packed) and K = 128 V = 20 with extreme gates.
  std::vector<Case> cases = rung9_bit_cases();
  cases.push_back(fixed_case(1, 200, 2, 72, 136, GateMode::random, true, 36, {0, 65, 200}));
  cases.push_back(fixed_case(1, 131, 2, 128, 20, GateMode::extreme, true, 37));
  check_rungs_agree(cuda::BwdVersion::v10_split, cuda::BwdVersion::v11_wyfast, cases, kOps, 0, /*require_finite=*/true);
}

TEST_CASE("CUDA v11 fast WY chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v11_wyfast);
}

TEST_CASE("CUDA v12 slab G1 chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v12_g1slab);
}

TEST_CASE("CUDA v12 slab G1 chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v12_g1slab);
}

TEST_CASE("CUDA v12 gradients equal v10 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 12 (bwd_v12_g1slab.cu) replaces rung 10's G1 by one block per 64-channel slab of K: the same
  // staged tiles and products in the same value-slab order (dP recomputed alike by every slab's block),
  // the same staging path (quads or items: dgamma's half-row sums differ between them), rung 10's
  // epilogue expressions and row order for dG_last; G2 is rung 10's. So every gradient, bit for bit,
  // and finite (NaN on both sides would compare equal). KDA and GDN2 run rung 8 in both.
  // Cases: rung 10's closeness cases (odd K and V with V % 4 != 0 and == 0, packed ragged batches,
  // g at -30, -1000 and 0) and K = 100 (a partial second slab) with V = 36 and V = 128.
  std::vector<Case> cases = rung9_bit_cases();
  cases.push_back(fixed_case(1, 150, 2, 100, 36, GateMode::random, true, 36));
  cases.push_back(fixed_case(1, 131, 2, 100, 128, GateMode::extreme, true, 37, {0, 3, 131}));
  check_rungs_agree(cuda::BwdVersion::v10_split, cuda::BwdVersion::v12_g1slab, cases, kOps, 0, /*require_finite=*/true);
}

TEST_CASE("CUDA v12 slab G1 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v12_g1slab);
}

TEST_CASE("CUDA v13 G1 slab and fast WY chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v13_g1g2);
}

TEST_CASE("CUDA v13 G1 slab and fast WY chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v13_g1g2);
}

TEST_CASE("CUDA v18 gradients equal v17 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 18 (bwd_v18_lean.cu) is rung 17 for DeltaNet and GDN with E, Qg and Kd formed inside G1' and G2'
  // by the extras kernel's expressions instead of read from the workspace, and GDN's G from a kernel of
  // its own summing in the same order: every gradient must equal rung 17's bit for bit, and be finite.
  // Cases: rung 13's bit test's (rung 9's: K = V = 128 two slabs, K = 100 V = 200 ragged, T = 1 at K = 17,
  // packed batches, K = 36 / 18 / 22 for the quad and item paths of the E slab (since session 14 K = 36 runs
  // stage_dwa_e, K = 18, 22 stage_e's item path; its quad path needs k not 8-byte aligned, which the API
  // refuses), log-decays at -30 / -1000 and
  // 0; rungs 11 and 12's wide cases), and rung 15's failing tiny cases (T = 2 K = 16 V = 2; T = 1 K = 41
  // V = 10) with extreme gates. KDA and GDN2 run rung 17 itself in rung 18: one set of cases for them.
  // The workspaces are NaN-filled before each rung 18 call (review12): rung 17 leaves E, Qg, Kd in the same
  // workspace, so a stray read of them by rung 18 would otherwise see rung 17's values and pass.
  std::vector<Case> cases = rung13_bit_cases();
  cases.push_back(fixed_case(1, 2, 1, 16, 2, GateMode::extreme, true, 38));
  cases.push_back(fixed_case(1, 1, 1, 41, 10, GateMode::extreme, true, 39));
  const std::vector<Op> scalar_ops = {Op::delta_rule, Op::gated_delta_rule};
  check_rungs_agree(cuda::BwdVersion::v17_hybrid, cuda::BwdVersion::v18_lean, cases, scalar_ops, 0, /*require_finite=*/true,
                    /*poison_between=*/true);
  check_rungs_agree(cuda::BwdVersion::v17_hybrid, cuda::BwdVersion::v18_lean, pair_cases(), kOps, 0, /*require_finite=*/true,
                    /*poison_between=*/true);
}

namespace {
std::vector<Case> review9_edge_cases();  // below (the edge cases of review9)

/// Rung 19's bit test's cases, which rung 20's reuses: rung 13's bit cases, rung 15's tiny extreme-gate cases,
/// review9's edge cases and K = V = 128.
std::vector<Case> rung19_bit_cases() {
  std::vector<Case> cases = rung13_bit_cases();
  cases.push_back(fixed_case(1, 2, 1, 16, 2, GateMode::extreme, true, 38));
  cases.push_back(fixed_case(1, 1, 1, 41, 10, GateMode::extreme, true, 39));
  for (const Case& c : review9_edge_cases()) cases.push_back(c);
  cases.push_back(fixed_case(1, 200, 2, 128, 128, GateMode::random, true, 60));
  return cases;
}

/// Rung 20's bit test's cases, which rungs 21 and 22 reuse: rung 19's, and for rung 20's row copy partial value tiles
/// V = 40 and V = 8, and an even-row packed batch of short sequences (GDN's bf16 dv_new needs an even B T H).
std::vector<Case> rung20_bit_cases() {
  std::vector<Case> cases = rung19_bit_cases();
  cases.push_back(fixed_case(1, 194, 2, 36, 40, GateMode::random, true, 61, {0, 30, 97, 194}));
  cases.push_back(fixed_case(1, 70, 2, 64, 8, GateMode::extreme, true, 62));
  cases.push_back(fixed_case(1, 96, 2, 32, 64, GateMode::random, true, 63, {0, 1, 1, 9, 40, 41, 96}));
  return cases;
}

/// The values a test loops a knob (environment variable) over: `values`, or only the caller's own setting when the
/// environment already sets it (so a run can pin one).
std::vector<std::string> knob_values(const char* name, std::vector<std::string> values) {
  if (const char* v = std::getenv(name)) return {v};
  return values;
}

/// Restores environment variable `name` (its value, or its absence) when the scope ends, however it ends.
struct EnvRestore {
  std::string name, value;
  bool was_set;
  explicit EnvRestore(const char* n) : name(n), was_set(std::getenv(n) != nullptr) {
    if (was_set) value = std::getenv(n);
  }
  ~EnvRestore() {
    if (was_set) setenv(name.c_str(), value.c_str(), 1);
    else unsetenv(name.c_str());
  }
};
}  // namespace

TEST_CASE("CUDA v19 gradients equal v18 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 19 (bwd_v19_dsbf16.cu) is rung 18 with dS' (DeltaNet) and dw_aux (DeltaNet and GDN) handed between
  // kernels as the bf16 values the next kernel multiplies (round to nearest even, as rung 18's kernels round the
  // float32 arrays): every gradient must equal rung 18's bit for bit, and be finite. Rung 18's bit cases (rung 13's: two K slabs and two value tiles at
  // K = V = 128, ragged K = 100 V = 200 with odd value columns past a tile, T = 1, packed batches, K = 36 / 18 /
  // 22 for G1''s quad and item staging paths, extreme and zero log-decays) and rung 15's tiny extreme cases.
  // KDA and GDN2 run rung 18 itself in rung 19: one set of cases for them. NaN-filled workspaces between the
  // two calls: rung 18's float32 dS' and dw_aux fill the same arrays, so a stray float32 read would otherwise pass.
  // Since review19 also review9's edge cases (K = 127 with V = 129: a partial 8-column group in the last value
  // tile of the dS' row copy; V = 256; V = 1; 41 short packed sequences, some empty) and K = V = 128.
  const std::vector<Case> cases = rung19_bit_cases();
  // Both settings of LINATTN_BWD19_DWA_BF16 (dw_aux in bf16 too: off by default, measured no faster) and both
  // value tiles of the dstates kernel, LINATTN_BWD3_BV = 32 and 64 (these small cases would take 32 alone; the
  // benchmark shape takes 64), unless set.
  const std::vector<Op> scalar_ops = {Op::delta_rule, Op::gated_delta_rule};
  {
    EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_dwa("LINATTN_BWD19_DWA_BF16");
    for (const std::string& bv : knob_values("LINATTN_BWD3_BV", {"32", "64"})) {
      setenv("LINATTN_BWD3_BV", bv.c_str(), 1);
      for (const std::string& dwa : knob_values("LINATTN_BWD19_DWA_BF16", {"0", "1"})) {
        setenv("LINATTN_BWD19_DWA_BF16", dwa.c_str(), 1);
        INFO("LINATTN_BWD19_DWA_BF16=" << dwa << " LINATTN_BWD3_BV=" << bv);
        check_rungs_agree(cuda::BwdVersion::v18_lean, cuda::BwdVersion::v19_dsbf16, cases, scalar_ops, 0,
                          /*require_finite=*/true, /*poison_between=*/true);
      }
    }
  }
  check_rungs_agree(cuda::BwdVersion::v18_lean, cuda::BwdVersion::v19_dsbf16, pair_cases(), kOps, 0,
                    /*require_finite=*/true, /*poison_between=*/true);
}

TEST_CASE("CUDA v19 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v19_dsbf16);
}

TEST_CASE("CUDA v20 gradients equal v19 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 20 (bwd_v20_dvbf16.cu) is rung 19 with dv_new handed from the dstates kernel to G1' as its bf16 hi part
  // (DeltaNet and GDN; the dstates kernel's -dv_new tile, sign flipped: round to nearest even is odd-symmetric),
  // the only part G1' multiplies: every gradient must equal rung 19's bit for bit, and be finite. Rung 19's cases
  // (rung 13's bit cases, rung 15's tiny extreme ones, review9's edge cases, K = V = 128), and for the row copy's
  // partial value tiles V = 40 and V = 8 (V % 8 == 0: rung 20's range; V = 129 and V = 1 among review9's run rung
  // 19, as does GDN with an odd number of rows B T H, whose float32 workspace arrays then follow float64 G [rows]
  // unaligned). Every call's route is checked (v20_route below), and GDN gets an even-row packed case of many
  // short sequences (review20: review9's packed ones have odd row counts). NaN-filled
  // workspaces between the two calls: rung 19's float32 du0 shares the slot, so a row the copy missed reads NaN.
  // Both value tiles of the dstates kernel (LINATTN_BWD3_BV = 32, 64) unless set; dw_aux in float32
  // (LINATTN_BWD19_DWA_BF16 is rung 19's knob: rung 20's own kernels ignore it, its fallback to rung 19 does not;
  // the test runs with it off).
  const std::vector<Case> cases = rung20_bit_cases();
  const std::vector<Op> scalar_ops = {Op::delta_rule, Op::gated_delta_rule};
  // The route rung 20 must take (route.hpp), from bwdc::dv_bf16_ok's conditions worked out here: bf16 inputs with
  // 16 <= K <= 128 (rung 3's range), DeltaNet or GDN, V % 8 == 0, and the workspace's float32 arrays 16-byte
  // aligned, which for GDN (float64 G [rows] first) needs an even row count B T H; DeltaNet has no G array. Else
  // rung 19: DeltaNet's own split kernels ("bwd_v19"), GDN's rung 18 ("bwd_v18", with the dw_aux knob off); KDA
  // and GDN2 run no split kernels ("").
  // DeltaNet runs rung 19 as a whole unless LINATTN_BWD20_DN=1 (measured slower on rung 20's kernels).
  auto v20_route = [](const Case& c, Op op) -> std::string {
    const bool scalar = op == Op::delta_rule || op == Op::gated_delta_rule;
    if (!scalar || c.K < 16 || c.K > 128) return "";
    const bool even_rows = (c.B * c.T * c.H) % 2 == 0;
    const char* dn_env = std::getenv("LINATTN_BWD20_DN");
    const bool dn_on = dn_env && std::strcmp(dn_env, "1") == 0;
    if (c.V % 8 == 0 && (op == Op::delta_rule ? dn_on : even_rows)) return "bwd_v20";
    return op == Op::delta_rule ? "bwd_v19" : "bwd_v18";
  };
  {
    EnvRestore keep_dwa("LINATTN_BWD19_DWA_BF16");
    setenv("LINATTN_BWD19_DWA_BF16", "0", 1);
    {
      // Both settings of LINATTN_BWD20_DN (DeltaNet on rung 20's kernels or on rung 19) unless set; DeltaNet alone
      // for the second (GDN's route does not depend on it).
      EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_dn("LINATTN_BWD20_DN");
      for (const std::string& bv : knob_values("LINATTN_BWD3_BV", {"32", "64"})) {
        setenv("LINATTN_BWD3_BV", bv.c_str(), 1);
        const std::vector<std::string> dns = knob_values("LINATTN_BWD20_DN", {"1", "0"});
        for (std::size_t i = 0; i < dns.size(); ++i) {
          setenv("LINATTN_BWD20_DN", dns[i].c_str(), 1);
          INFO("LINATTN_BWD3_BV=" << bv << " LINATTN_BWD20_DN=" << dns[i]);
          check_rungs_agree(cuda::BwdVersion::v19_dsbf16, cuda::BwdVersion::v20_dvbf16, cases,
                            i == 0 ? scalar_ops : std::vector<Op>{Op::delta_rule}, 0, /*require_finite=*/true,
                            /*poison_between=*/true, v20_route);
        }
      }
    }
    check_rungs_agree(cuda::BwdVersion::v19_dsbf16, cuda::BwdVersion::v20_dvbf16, pair_cases(), kOps, 0,
                      /*require_finite=*/true, /*poison_between=*/true, v20_route);
  }
  // The routes above must include both rung 20's own kernels and its fallbacks (so the check can fail both ways).
  int own = 0, fell = 0;  // (with LINATTN_BWD20_DN as it is now)
  for (const Case& c : cases)
    for (Op op : scalar_ops) (v20_route(c, op) == "bwd_v20" ? own : fell) += 1;
  CHECK(own > 0);
  CHECK(fell > 0);
}

TEST_CASE("CUDA v20 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v20_dvbf16);
}

TEST_CASE("CUDA v21 chunked backward with dbeta's du0 v terms on chip equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v21_duvsmem);
}

TEST_CASE("CUDA v21 chunked backward with dbeta's du0 v terms on chip and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v21_duvsmem);
}

namespace {
/// Rung 21's route (route.hpp): its own kernels for DeltaNet and GDN inside rung 18's range (bf16 inputs, 16 <= K <=
/// 128 in these tests), none for KDA and GDN2 (rung 20).
std::string v21_route(const Case& c, Op op) {
  const bool scalar = op == Op::delta_rule || op == Op::gated_delta_rule;
  return scalar && c.K >= 16 && c.K <= 128 ? "bwd_v21" : "";
}

/// What check_v21_near_v20 saw: the worst dbeta ratios, whether dbeta differed from rung 20's with float32 gates on
/// rung 21's own route, and how many calls took that route.
struct V21Tally {
  std::map<std::string, double> worst;
  bool dbeta_differs = false;
  int own = 0;
};

/// Rung 21 against rung 20 on `cases` for `ops`, both gate dtypes, at the current LINATTN_BWD3_BV: every gradient but
/// dbeta bit for bit, dbeta within rung 10's summation-order bounds (2e-5 stored as float32, 5e-4 as bf16, relative to
/// max(rms(rung 20), rms of its dq, dk, dv)), every gradient finite, each call's route checked; NaN-filled workspaces
/// between the two rungs. The test "CUDA v21 gradients equal v20 gradients bit for bit but dbeta within float32
/// summation order" says why.
void check_v21_near_v20(const std::vector<Case>& cases, const std::vector<Op>& ops, V21Tally& t) {
  for (const Case& cs : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : ops) {
        BwdCase bc;
        bc.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, bc), DType::bf16, gdt);
        const auto x = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v20_dvbf16);
        cuda::poison_device_workspaces();
        const auto y = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v21_duvsmem);
        const std::string route = cuda::last_backward_split_route();
        INFO("bwd_v21_duvsmem vs bwd_v20_dvbf16, " << ref::op_name(op) << " gates " << dname(gdt) << " " << cs
                                                   << " LINATTN_BWD3_BV=" << (std::getenv("LINATTN_BWD3_BV") ? std::getenv("LINATTN_BWD3_BV") : "unset"));
        CHECK(route == v21_route(cs, op));
        t.own += route == "bwd_v21";
        check_same_grads(x, y, 0, "", "dbeta");  // every gradient but dbeta bit for bit
        REQUIRE(x.dbeta.defined() == y.dbeta.defined());
        if (x.dbeta.defined()) {
          const double r = rel_to(y.dbeta, x.dbeta, grad_floor(x)), bound = gdt == DType::bf16 ? 5e-4 : 2e-5;
          INFO("dbeta: rms(v21 - v20) / max(rms(v20), floor) = " << r << ", bound " << bound);
          CHECK(r <= bound);
          const std::string key = std::string(ref::op_name(op)) + " dbeta gates " + dname(gdt);
          t.worst[key] = std::max(t.worst[key], r);
          if (gdt == DType::f32 && route == "bwd_v21")
            t.dbeta_differs = t.dbeta_differs ||
                            std::memcmp(x.dbeta.data(), y.dbeta.data(), sizeof(float) * x.dbeta.numel()) != 0;
        }
        check_all_finite(y);
      }
}

/// Rung 22's route: "bwd_v22_kq8" where its launcher picks G1''s octet staging (K % 8 == 0), "bwd_v22" where rung
/// 21's staging runs inside rung 22's kernels, for DeltaNet and GDN inside rung 18's range; none for KDA and GDN2.
std::string v22_route(const Case& c, Op op) {
  const bool scalar = op == Op::delta_rule || op == Op::gated_delta_rule;
  if (!scalar || c.K < 16 || c.K > 128) return "";
  return c.K % 8 == 0 ? "bwd_v22_kq8" : "bwd_v22";
}
}  // namespace

TEST_CASE("CUDA v21 gradients equal v20 gradients bit for bit but dbeta within float32 summation order") {
  SKIP_WITHOUT_GPU();
  // Rung 21 (bwd_v21_duvsmem.cu) is rung 20 (for DeltaNet: its default, rung 19) with G2' forming dbeta's <du0, v>
  // terms on chip instead of storing du0 to ws.du0 and reading it back with v. Every other G2' output (dv = beta du0,
  // dk) comes from the same fragments and expressions, and the front and G1' are rung 20's: dq, dk, dv, dg, dh0 must
  // equal rung 20's bit for bit. dbeta is the same float32 terms summed in another order (each lane's de k terms,
  // then its two columns' du0 v sums over the value slabs, instead of the de k terms then every du0 v term in
  // column order): held to rung 10's summation-order bounds (the test "CUDA v10 split chunked backward is rung 8 up
  // to float32 summation order" derives them), 2e-5 stored as float32 (float32 gates) and 5e-4 stored as bf16,
  // relative to max(rms(rung 20's dbeta), rms of its dq, dk and dv). Every gradient finite; dbeta must differ from
  // rung 20's in some case with float32 gates (else rung 21's G2' did not run), and every call's route is checked
  // (route.hpp). Cases: rung 20's bit test's (rung 13's bit cases, rung 15's extreme ones, review9's edge cases
  // with V = 129, 256, 1, K = V = 128, V = 40 and V = 8 partial value tiles, an even-row packed batch), both value
  // tiles of the dstates kernel, NaN-filled workspaces between the two rungs (a stray read of ws.du0, which rung 21's
  // G2' no longer writes, would read NaN; GDN's dstates kernel still hands bf16 dv_new to G1' through its first half).
  const std::vector<Case> cases = rung20_bit_cases();
  EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_dn("LINATTN_BWD20_DN"), keep_dwa("LINATTN_BWD19_DWA_BF16");
  unsetenv("LINATTN_BWD20_DN");  // rung 20's defaults: DeltaNet on rung 19, dw_aux in float32
  unsetenv("LINATTN_BWD19_DWA_BF16");
  V21Tally t;
  for (const std::string& bv : knob_values("LINATTN_BWD3_BV", {"32", "64"})) {
    setenv("LINATTN_BWD3_BV", bv.c_str(), 1);
    check_v21_near_v20(cases, std::vector<Op>(std::begin(kOps), std::end(kOps)), t);
  }
  if (std::getenv("LINATTN_CUDA_BACKWARD_REPORT"))
    for (const auto& [key, r] : t.worst) std::cout << "v21 vs v20 worst " << key << ": " << r << "\n";
  CHECK(t.own > 0);
  INFO("rung 21's dbeta equals rung 20's bit for bit on every case with float32 gates: did its G2' run?");
  CHECK(t.dbeta_differs);
}

TEST_CASE("CUDA v21 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v21_duvsmem);
}

TEST_CASE("CUDA v22 chunked backward with G1' octet k and q staging equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v22_kq8);
}

TEST_CASE("CUDA v22 chunked backward with G1' octet k and q staging and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v22_kq8);
}

TEST_CASE("CUDA v22 gradients equal v21 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 22 (bwd_v22_kq8.cu) is rung 21 with G1' staging B9's k and q slabs by 16-byte octets where K % 8 == 0 (and
  // rung 21's two-byte staging elsewhere): the same values in the same tiles, so every gradient must equal rung 21's
  // bit for bit, and be finite. Rung 20's bit cases (K a multiple of 8 -- 128, 72, 64, 48, 40, 32, 24, 16 -- takes
  // the octets, including partial last chunks and the slab rows past Lc, and K = 72's second slab of 8 columns; the
  // other K -- 100, 41, 36, 22, 18, 17, 127 -- rung 21's staging inside rung 22's kernel), both value tiles of the
  // dstates kernel, NaN-filled workspaces between the rungs, and each call's route checked (route.hpp): rung 22's own
  // kernels for DeltaNet and GDN inside rung 18's range, named for the staging the launcher picked ("bwd_v22_kq8" where
  // K % 8 == 0), none for KDA and GDN2 (rung 21, i.e. 20). Whether the kernel then really loads octets is not visible
  // in the bits (the same values either way): planted bugs 289 and 290 in the octet path show that it runs.
  const std::vector<Case> cases = rung20_bit_cases();
  EnvRestore keep_bv("LINATTN_BWD3_BV");
  for (const std::string& bv : knob_values("LINATTN_BWD3_BV", {"32", "64"})) {
    setenv("LINATTN_BWD3_BV", bv.c_str(), 1);
    INFO("LINATTN_BWD3_BV=" << bv);
    check_rungs_agree(cuda::BwdVersion::v21_duvsmem, cuda::BwdVersion::v22_kq8, cases, kOps, 0, /*require_finite=*/true,
                      /*poison_between=*/true, v22_route);
  }
  // The routes checked above must include both staging paths of rung 22's own kernels.
  int oct = 0, items = 0;
  for (const Case& c : cases) {
    const std::string r = v22_route(c, Op::delta_rule);
    oct += r == "bwd_v22_kq8", items += r == "bwd_v22";
  }
  CHECK(oct > 0);
  CHECK(items > 0);
}

TEST_CASE("CUDA v22 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v22_kq8);
}

TEST_CASE("CUDA v21 and v22 on two small cases per scalar operator for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // The bit tests of rungs 19-22 run too many calls for compute-sanitizer's racecheck to finish within a device
  // call's bound (killed in sessions 18-20). This one runs the same checks on two small cases, DeltaNet and GDN,
  // both gate dtypes: K = V = 128 over 150 tokens (two value slabs of G2''s du0 v products, two key slabs of G1''s
  // octet staging, a partial last chunk) and K = 36, V = 20 (G2''s scalar v staging, G1''s two-byte k and q staging).
  // Rung 21 against rung 20 as in its bit test (every gradient but dbeta bit for bit, dbeta within float32
  // summation order), rung 22 against rung 21 bit for bit, routes checked, NaN-filled workspaces between the rungs.
  const std::vector<Case> cases = {fixed_case(1, 150, 1, 128, 128, GateMode::random, true, 70),
                                   fixed_case(1, 70, 1, 36, 20, GateMode::random, true, 71)};
  const std::vector<Op> ops = {Op::delta_rule, Op::gated_delta_rule};
  V21Tally t;
  check_v21_near_v20(cases, ops, t);
  CHECK(t.own == int(cases.size() * 2 * ops.size()));
  check_rungs_agree(cuda::BwdVersion::v21_duvsmem, cuda::BwdVersion::v22_kq8, cases, ops, 0, /*require_finite=*/true,
                    /*poison_between=*/true, v22_route);
}

namespace {
/// Rung `ver` with environment variable `knob` unset, then set to `value`, on every case, gate dtype and operator (bf16
/// inputs): the same gradients bit for bit, and finite, with NaN-filled workspaces between the two runs. `check_grid`
/// gets the case and last_dstates_grid() (route.hpp) of both runs, so that a knob that did not take effect cannot pass
/// by comparing the default with itself. The caller restores the environment (EnvRestore).
void check_knob_keeps_bits(cuda::BwdVersion ver, const std::vector<Case>& cases, const char* knob, const char* value,
                           const std::function<void(const Case&, const std::string&, const std::string&)>& check_grid) {
  for (const Case& cs : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : kOps) {
        BwdCase bc;
        bc.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, bc), DType::bf16, gdt);
        INFO(cuda::bwd_version_name(ver) << " " << ref::op_name(op) << " gates " << dname(gdt) << " " << cs);
        unsetenv(knob);
        const auto x = cuda_backward(d, DType::bf16, gdt, ver);
        const std::string gx = cuda::last_dstates_grid();
        cuda::poison_device_workspaces();
        setenv(knob, value, 1);
        const auto y = cuda_backward(d, DType::bf16, gdt, ver);
        const std::string gy = cuda::last_dstates_grid();
        INFO("default " << gx << ", " << knob << "=" << value << " " << gy);
        check_grid(cs, gx, gy);
        check_same_grads(x, y);
        check_all_finite(y);
      }
}
}  // namespace

TEST_CASE("CUDA dstates kernel with its value tile first in the grid gives the same gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // LINATTN_BWD3_VFIRST=1 (session 22's trial, bwd_v3_async.cu's launch_dstates) launches the dstates kernel over
  // (value tiles, sequences, heads) instead of (sequences, heads, value tiles), so that a head's value tiles run side
  // by side and share their K-side reads through L2. Each block computes what it computed before, so every gradient of
  // rung 26 (every operator: all run the dstates kernel; `best` until session 25, whose call 3 found that rungs 27 and
  // 28, `best` since, ignore the knob for DeltaNet: their dstates kernel with dv_new as planes, kDvP, has no value-first
  // launch, bwd_v3_async.cu's launch_dstates) must equal the default order's bit for bit, and be finite; the
  // hook last_dstates_grid (route.hpp) shows which order each call launched, so the test cannot pass by running the
  // default twice. Rung 20's bit cases (two value tiles at V = 128 and V = 200, partial tiles at V = 40, 8, 129; packed
  // batches of up to 66 sequences), both value-tile widths, NaN-filled workspaces between the two runs.
  const std::vector<Case> cases = rung20_bit_cases();
  EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_vf("LINATTN_BWD3_VFIRST");
  int calls = 0, others = 0;
  for (const std::string bv : {"32", "64"}) {  // not 128: that width's kernel (kOne) keeps its order
    setenv("LINATTN_BWD3_BV", bv.c_str(), 1);
    INFO("LINATTN_BWD3_BV=" << bv);
    check_knob_keeps_bits(cuda::BwdVersion::v26_wyasync, cases, "LINATTN_BWD3_VFIRST", "1",
                          [&](const Case&, const std::string& gx, const std::string& gy) {
                            // "" on both sides where rung 26 runs no dstates kernel (outside rung 3's range: rung 2)
                            CHECK(gx == (gy.empty() ? "" : "sequence-first/" + bv));
                            CHECK((gy.empty() || gy == "value-first/" + bv));
                            calls += !gy.empty(), others += gy.empty();
                          });
  }
  INFO("calls with the dstates kernel " << calls << ", without " << others);
  CHECK(calls > others);  // most of the cases are inside rung 3's range
}

TEST_CASE("CUDA dstates kernel over 128 value columns per block gives the same gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // LINATTN_BWD3_BV=128 (session 22's trial, bwd_v3_async.cu's launch_dstates_kp_bv) runs the dstates kernel with a
  // head's 128 value columns in one block (rung 23's single stage of the K-side tiles, one block per SM) where its key
  // width is 128 (K from 65 to 128); elsewhere the knob is ignored. Each value column's products are the same at any
  // width, so every gradient must equal the default width's (64 or 32) bit for bit, and be finite; the hook
  // last_dstates_grid (route.hpp) shows the width each call launched. Three rungs, so that every BV = 128 instance
  // runs: `best` (rung 24, i.e. rung 22 at these small cases' default widths: DeltaNet's dS' in bf16, GDN's dv_new in
  // bf16, KDA and GDN2 neither), rung 20 with
  // LINATTN_BWD20_DN=1 (DeltaNet with both) and rung 23 (its own kOne kernels, 32 columns by default). Rung 20's bit
  // cases (K = 128, 100, 72 with V = 128, 200, 129, 256: one and two 128-column tiles, partial last tiles; packed
  // batches), NaN-filled workspaces between the two runs.
  const std::vector<Case> cases = rung20_bit_cases();
  EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_vf("LINATTN_BWD3_VFIRST"), keep_dn("LINATTN_BWD20_DN");
  unsetenv("LINATTN_BWD3_VFIRST");
  setenv("LINATTN_BWD20_DN", "1", 1);
  int wide = 0, others = 0;
  for (cuda::BwdVersion ver : {cuda::BwdVersion::best, cuda::BwdVersion::v20_dvbf16, cuda::BwdVersion::v23_dsone})
    check_knob_keeps_bits(ver, cases, "LINATTN_BWD3_BV", "128",
                          [&](const Case& cs, const std::string& gx, const std::string& gy) {
                            const bool kp128 = cs.K > 64 && cs.K <= 128;  // tc_pick_kp: the knob applies
                            CHECK(gx.empty() == gy.empty());
                            if (!gy.empty()) CHECK(gy == (kp128 ? std::string("sequence-first/128") : gx));
                            wide += gy == "sequence-first/128", others += gy != "sequence-first/128";
                          });
  INFO("calls at 128 columns " << wide << ", others " << others);
  CHECK(wide > 0);
}

TEST_CASE("CUDA v23 chunked backward with a single-stage dstates kernel equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v23_dsone);
}

TEST_CASE("CUDA v23 chunked backward with a single-stage dstates kernel and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v23_dsone);
}

namespace {
/// Rung 23's route (route.hpp): its own kernels for DeltaNet and GDN inside rung 18's range (bf16 inputs, 16 <= K <=
/// 128 in these tests), named for G1''s staging as rung 22's ("bwd_v23_kq8" where K % 8 == 0); none for KDA and GDN2
/// (rung 21, i.e. 20).
std::string v23_route(const Case& c, Op op) {
  const bool scalar = op == Op::delta_rule || op == Op::gated_delta_rule;
  if (!scalar || c.K < 16 || c.K > 128) return "";
  return c.K % 8 == 0 ? "bwd_v23_kq8" : "bwd_v23";
}

/// Rung 23 against rung 22 bit for bit (every gradient, dh0 included), finite, routes checked, NaN-filled workspaces
/// between the rungs, with LINATTN_BWD3_BV unset (rung 23's own default value tile: 32 at K > 64, rung 21's 64 at the
/// small batches here) and then 32 and 64, unless the caller pins it.
void check_v23_equals_v22(const std::vector<Case>& cases, const std::vector<Op>& ops) {
  EnvRestore keep_bv("LINATTN_BWD3_BV");
  for (const std::string& bv : knob_values("LINATTN_BWD3_BV", {"", "32", "64"})) {
    if (bv.empty()) unsetenv("LINATTN_BWD3_BV");
    else setenv("LINATTN_BWD3_BV", bv.c_str(), 1);
    INFO("LINATTN_BWD3_BV=" << (bv.empty() ? "unset" : bv));
    check_rungs_agree(cuda::BwdVersion::v22_kq8, cuda::BwdVersion::v23_dsone, cases, ops, 0,
                      /*require_finite=*/true, /*poison_between=*/true, v23_route);
  }
}
}  // namespace

TEST_CASE("CUDA v23 gradients equal v22 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 23 (bwd_v23_dsone.cu) is rung 22 with the dstates kernel holding one stage of its w_aux, Qg and Kd tiles
  // instead of two (bwd3_dstates' kOne): each chunk's tiles arrive in two cp.async groups at other points of the
  // chunk loop, the products are the same in the same order. So every gradient, dh0 (the dstates kernel's own output)
  // included, must equal rung 22's bit for bit and be finite. A tile awaited too late, overwritten too early or
  // loaded for the wrong chunk changes the values in a case with several chunks: rung 20's bit cases (1 to 4 chunks
  // per sequence, packed batches, partial last chunks, V = 8 .. 256, K = 16 .. 128 on both key widths of the kernel),
  // and one sequence of 1000 tokens (16 chunks) at K = V = 128, each at the default value tile and at 32 and 64
  // columns. Routes are checked (route.hpp): rung 23's own kernels for DeltaNet and GDN inside rung 18's range, named
  // for G1''s staging as rung 22's, none for KDA and GDN2 (rung 21, i.e. 20). Planted bugs 291 (w_aux, Qg of the
  // wrong chunk) and 292 (Kd from Qg's array) show that the single-stage path runs.
  std::vector<Case> cases = rung20_bit_cases();
  cases.push_back(fixed_case(1, 1000, 2, 128, 128, GateMode::random, true, 73));
  check_v23_equals_v22(cases, std::vector<Op>(std::begin(kOps), std::end(kOps)));
}

TEST_CASE("CUDA v23 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v23_dsone);
}

TEST_CASE("CUDA v23 on two small cases per scalar operator for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 23's bit test on two small cases that still take several chunks through the single-stage pipeline (so that
  // racecheck sees each tile reused): K = V = 128 over 300 tokens (5 chunks, the last partial; the KP = 128 kernel)
  // and K = 36, V = 20 over 200 tokens (4 chunks; KP = 64, a partial value tile). DeltaNet and GDN, both gate dtypes,
  // at the default value tile and at 32 and 64.
  const std::vector<Case> cases = {fixed_case(1, 300, 1, 128, 128, GateMode::random, true, 74),
                                   fixed_case(1, 200, 1, 36, 20, GateMode::random, true, 75)};
  check_v23_equals_v22(cases, {Op::delta_rule, Op::gated_delta_rule});
}

TEST_CASE("CUDA v24 chunked backward with its dstates width pick equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v24_dswide);
}

TEST_CASE("CUDA v24 chunked backward with its dstates width pick and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v24_dswide);
}

namespace {
/// Rung 24's route (route.hpp): rung 22's, named "bwd_v24_kq8" where K % 8 == 0, else "bwd_v24"; none for KDA, GDN2.
std::string v24_route(const Case& c, Op op) {
  const bool scalar = op == Op::delta_rule || op == Op::gated_delta_rule;
  if (!scalar || c.K < 16 || c.K > 128) return "";
  return c.K % 8 == 0 ? "bwd_v24_kq8" : "bwd_v24";
}

/// Rung 24's width at key width 128 as bwd_v24_dswide.cu states its rule, written out here (the library's own is
/// cuda::dstates_wide_pick, route.hpp; the test "CUDA v24 width pick ..." compares the two without a GPU): for nh
/// (sequence, head) pairs of V columns on `sms` SMs, the w of 128, 64, 32 (ties to the wider) with the least
/// ceil(nh ceil(V / w) / sms) x cost(w), cost 2.6, 1.52, 1.
int v24_model_width(long nh, int V, int sms) {
  int pick = 0;
  double pick_t = 0;
  for (const auto& [w, cost] : {std::pair<int, double>{128, 2.6}, {64, 1.52}, {32, 1.0}}) {
    const long waves = (nh * ((V + w - 1) / w) + sms - 1) / sms;
    if (pick == 0 || waves * cost < pick_t) pick = w, pick_t = waves * cost;
  }
  return pick;
}

/// The dstates grid (route.hpp's last_dstates_grid) rung 24 must launch for case c and operator op with
/// LINATTN_BWD3_BV = bv ("" = unset) and LINATTN_BWD3_VFIRST unset, worked out here from bwd_v24_dswide.cu's rule:
/// outside rung 3's range (K < 16 or K > 128 in these bf16 tests) no dstates kernel; a set bv of 32 or 64, or 128 at
/// key width 128 (65 <= K <= 128), is taken as it is; else DeltaNet and GDN (rung 24's own kernels) at key width 128
/// take the width w of 128, 64, 32 (ties to the wider) with the least ceil(N H ceil(V / w) / sms) x cost(w), cost 2.6,
/// 1.52, 1; everything else takes rung 22's pick: 64 where N H ceil(V / 64) >= 132, else 32 (KDA and GDN2 run rung 21,
/// i.e. 20, whose front picks so).
std::string v24_grid(const Case& c, Op op, const std::string& bv, int sms) {
  if (c.K < 16 || c.K > 128) return "";
  const bool kp128 = c.K > 64;
  if (bv == "32" || bv == "64" || (bv == "128" && kp128)) return "sequence-first/" + bv;
  const long nh = (c.cu_seqlens.empty() ? long(c.B) : long(c.cu_seqlens.size()) - 1) * c.H;
  const bool scalar = op == Op::delta_rule || op == Op::gated_delta_rule;
  if (scalar && kp128) return "sequence-first/" + std::to_string(v24_model_width(nh, c.V, sms));
  return nh * ((c.V + 63) / 64) >= 132 ? "sequence-first/64" : "sequence-first/32";
}

/// A packed batch of n ragged sequences (1 to 150 tokens each) at H = 3, K = 100, V = 200, extreme gates.
Case v24_packed_case(int n, std::uint64_t seed) {
  std::vector<index_t> cu = {0};
  for (int i = 0; i < n; ++i) cu.push_back(cu.back() + 1 + (37 * i + 11) % 150);
  return fixed_case(1, cu.back(), 3, 100, 200, GateMode::extreme, true, seed, cu);
}

/// Cases where rung 24's width differs from rung 22's on this device, and one at a threshold: K = V = 128, H = 2,
/// sequences of 70 tokens (two chunks, the last partial): sms / 4 + 1 of them (128 columns: one wave, where 64 would
/// need two), exactly sms / 4 (64: one wave of 64-column blocks, 128 would cost more), sms / 8 + 1 (64, where rung
/// 22 takes 32 and 32 would need two waves); and packed batches at H = 3, K = 100 (key width 128 with K < 128),
/// V = 200: sms / 6 sequences (128: two 128-column tiles per head, the second partial, 2 N H <= sms), and
/// ceil((sms + 1) / 12) (32, where rung 22 takes 64). On the H200 (132 SMs): 34, 33 and 17 sequences, 22 and 12. The
/// test "CUDA v24 width pick ..." checks these widths for every SM count from 16 to 256 without a GPU.
std::vector<Case> v24_wide_cases(int sms) {
  std::vector<Case> cases;
  cases.push_back(fixed_case(sms / 4 + 1, 70, 2, 128, 128, GateMode::random, true, 76));
  cases.push_back(fixed_case(sms / 4, 70, 2, 128, 128, GateMode::random, true, 77));
  cases.push_back(fixed_case(sms / 8 + 1, 70, 2, 128, 128, GateMode::random, true, 81));
  cases.push_back(v24_packed_case(sms / 6, 82));
  cases.push_back(v24_packed_case((sms + 1 + 11) / 12, 78));
  return cases;
}

/// Rung 24 against rung 22 bit for bit (every gradient, dh0 included), finite, routes and dstates widths checked,
/// NaN-filled workspaces between the rungs, with LINATTN_BWD3_BV unset (rung 24's own pick) and then 32, 64 and 128,
/// unless the caller pins it; LINATTN_BWD3_VFIRST unset. Returns how many calls rung 24's own pick (width unset) sent
/// to a width other than rung 22's.
int check_v24_equals_v22(const std::vector<Case>& cases, const std::vector<Op>& ops) {
  EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_vf("LINATTN_BWD3_VFIRST");
  unsetenv("LINATTN_BWD3_VFIRST");
  const int sms = device_sm_count();
  int wide = 0;
  for (const std::string& bv : knob_values("LINATTN_BWD3_BV", {"", "32", "64", "128"})) {
    if (bv.empty()) unsetenv("LINATTN_BWD3_BV");
    else setenv("LINATTN_BWD3_BV", bv.c_str(), 1);
    INFO("LINATTN_BWD3_BV=" << (bv.empty() ? "unset" : bv) << ", " << sms << " SMs");
    check_rungs_agree(cuda::BwdVersion::v22_kq8, cuda::BwdVersion::v24_dswide, cases, ops, 0,
                      /*require_finite=*/true, /*poison_between=*/true, v24_route,
                      [&](const Case& c, Op op) {
                        const std::string g = v24_grid(c, op, bv, sms);
                        // rung 22's width: its front's pick (v24_grid for KDA, whose route is rung 21's)
                        wide += bv.empty() && g != v24_grid(c, Op::kda, bv, sms);
                        return g;
                      });
  }
  return wide;
}

/// Whether the caller pinned LINATTN_BWD3_BV to a width (knob_values then runs that width alone, so rung 24's own
/// pick never runs; set to "" it runs the pick alone).
bool width_pinned() {
  const char* v = std::getenv("LINATTN_BWD3_BV");
  return v && *v;
}
}  // namespace

TEST_CASE("CUDA v24 width pick takes the fastest width measured and agrees with the tests' statement of its rule") {
  // No GPU needed: cuda::dstates_wide_pick (route.hpp) is a host function. (1) At the five shapes session 23 call 3
  // timed with all three widths forced (H = 16, V = 128, 132 SMs; bench/logs_session23/README.md), it picks the width
  // that was fastest there, for DeltaNet and for GDN alike: N H = 32 -> 32, 64 -> 64, 96, 128, 256 -> 128. Those are
  // measurements, not the model, so a model that no longer fits them fails here. (2) It equals v24_model_width, the
  // rule as the GPU bit test states it, for every nh up to 700, nine V and six SM counts, so that the bit test's
  // expected widths are the library's. (3) On any SM count from 16 to 256, v24_wide_cases' sizes give the widths the
  // bit test relies on: sms / 4 + 1 and sms / 4 sequences of two heads at V = 128 -> 128 and 64, sms / 8 + 1 -> 64,
  // sms / 6 of three heads at V = 200 -> 128.
  const std::pair<long, int> measured[] = {{32, 32}, {64, 64}, {96, 128}, {128, 128}, {256, 128}};
  for (const auto& [nh, fastest] : measured) {
    INFO("N H = " << nh);
    CHECK(cuda::dstates_wide_pick(nh, 128, 132) == fastest);
  }
  long compared = 0, differ = 0;
  for (int sms : {16, 78, 108, 114, 132, 148})
    for (int V : {1, 8, 32, 40, 64, 100, 128, 200, 256})
      for (long nh = 1; nh <= 700; ++nh, ++compared)
        if (cuda::dstates_wide_pick(nh, V, sms) != v24_model_width(nh, V, sms)) {
          if (differ++ < 5) FAIL_CHECK("nh " << nh << " V " << V << " sms " << sms << ": library "
                                             << cuda::dstates_wide_pick(nh, V, sms) << ", test's rule "
                                             << v24_model_width(nh, V, sms));
        }
  INFO("compared " << compared << " (nh, V, sms)");
  CHECK(differ == 0);
  for (int sms = 16; sms <= 256; ++sms) {
    INFO("sms " << sms);
    CHECK(cuda::dstates_wide_pick(2L * (sms / 4 + 1), 128, sms) == 128);
    CHECK(cuda::dstates_wide_pick(2L * (sms / 4), 128, sms) == 64);
    CHECK(cuda::dstates_wide_pick(2L * (sms / 8 + 1), 128, sms) == 64);
    CHECK(cuda::dstates_wide_pick(3L * (sms / 6), 200, sms) == 128);
  }
}

TEST_CASE("CUDA v24 gradients equal v22 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 24 (bwd_v24_dswide.cu) is rung 22 with the dstates kernel's value columns per block (32, 64 or 128) picked
  // by a wave-count model at key width 128. Each value column's products are the same at any width, so every
  // gradient, dh0 (the dstates kernel's own output) included, must equal rung 22's bit for bit and be finite. Rung
  // 20's bit cases (small: mostly rung 22's width), v24_wide_cases (sized from this device's SM count: 128 and 64
  // where rung 22 takes 64 and 32, and one at a threshold), each with the width unset and forced to 32, 64 and 128.
  // Each call's route and dstates width are checked against v24_grid, worked out here from the rule, so a rung that
  // ran rung 22's width, or a pick off at a threshold, fails (planted bugs 293 and 294; 291 breaks the 128-column
  // kernel's single stage).
  std::vector<Case> cases = rung20_bit_cases();
  for (const Case& c : v24_wide_cases(device_sm_count())) cases.push_back(c);
  const int wide = check_v24_equals_v22(cases, std::vector<Op>(std::begin(kOps), std::end(kOps)));
  INFO("calls where rung 24's pick differs from rung 22's: " << wide);
  CHECK((wide > 0 || width_pinned()));
}

TEST_CASE("CUDA v24 with its own widths equals the float64 reference backward on cases sized to pick them") {
  SKIP_WITHOUT_GPU();
  // The property tests above draw at most a few (sequence, head) pairs, where rung 24 picks 32 columns (rung 22's
  // kernel); here its 128- and 64-column picks are held to the reference directly (rung 3's bounds, as every rung from
  // 3 on): sms / 4 + 1 sequences of two heads at K = V = 128 (128 columns), sms / 6 packed sequences of three heads at
  // K = 100, V = 200 (128 columns, a partial second tile), sms / 8 + 1 sequences of two heads with extreme gates (64
  // columns), every operator (KDA and GDN2 run rung 21's widths), both gate dtypes, each call's width checked.
  EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_vf("LINATTN_BWD3_VFIRST");
  unsetenv("LINATTN_BWD3_BV");
  unsetenv("LINATTN_BWD3_VFIRST");
  const int sms = device_sm_count();
  const std::vector<Case> cases = {fixed_case(sms / 4 + 1, 70, 2, 128, 128, GateMode::random, true, 83),
                                   v24_packed_case(sms / 6, 84),
                                   fixed_case(sms / 8 + 1, 70, 2, 128, 128, GateMode::extreme, true, 85)};
  for (const Case& cs : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : kOps) {
        BwdCase bc;
        bc.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, bc), DType::bf16, gdt);
        const auto errs = compare_grads(cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v24_dswide),
                                        reference_backward(d));
        const std::string grid = cuda::last_dstates_grid();
        INFO(ref::op_name(op) << " gates " << dname(gdt) << " " << cs << ", dstates " << grid << ": "
                              << describe(errs));
        CHECK(grid == v24_grid(cs, op, "", sms));
        for (const GradErr& e : errs) CHECK(within(e, DType::bf16, gdt, cuda::BwdVersion::v24_dswide, cs.K));
      }
}

TEST_CASE("CUDA v24 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v24_dswide);
}

TEST_CASE("CUDA v24 on small cases per scalar operator for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 24's bit test on the smallest case where its default width is 128 on this device (sms / 4 + 1 sequences of
  // 70 tokens at H = 2, K = V = 128: two chunks each, so racecheck sees the single-stage tiles reused) and K = 36,
  // V = 20 (key width 64: rung 22's kernel), DeltaNet and GDN, both gate dtypes, with the width unset and forced.
  const int sms = device_sm_count();
  const std::vector<Case> cases = {fixed_case(sms / 4 + 1, 70, 2, 128, 128, GateMode::random, true, 79),
                                   fixed_case(1, 200, 1, 36, 20, GateMode::random, true, 80)};
  const int wide = check_v24_equals_v22(cases, {Op::delta_rule, Op::gated_delta_rule});
  CHECK((wide > 0 || width_pinned()));
}

TEST_CASE("CUDA v25 chunked backward with its cp.async G1 equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v25_g1async);
}

TEST_CASE("CUDA v25 chunked backward with its cp.async G1 and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v25_g1async);
}

namespace {
/// Rung 25's route (route.hpp): "bwd_v25_g1a" (its cp.async G1') for DeltaNet inside rung 18's range (16 <= K <= 128
/// in these bf16 tests) with K % 8 == 0 and V % 8 == 0 (the test allocations are aligned, so rung 20's bf16 dv_new range
/// holds there); every other call runs rung 24 and takes its route (GDN: "bwd_v24_kq8" / "bwd_v24"; KDA, GDN2: none).
std::string v25_route(const Case& c, Op op) {
  if (op == Op::delta_rule && c.K >= 16 && c.K <= 128 && c.K % 8 == 0 && c.V % 8 == 0) return "bwd_v25_g1a";
  return v24_route(c, op);
}

/// Rung b against its predecessor a bit for bit (every gradient, dh0 included), finite, routes (b's, from `route`) and
/// dstates widths (rung 24's rule: rungs 25 to 27 run its front) checked, NaN-filled workspaces between the rungs,
/// LINATTN_BWD3_BV and LINATTN_BWD3_VFIRST unset. Returns how many calls took b's own kernels (route `own_route`).
/// Rungs 25 to 27's bit tests share it.
int check_rung_equals_prev(cuda::BwdVersion a, cuda::BwdVersion b, std::string (*route)(const Case&, Op),
                           const char* own_route, const std::vector<Case>& cases, const std::vector<Op>& ops) {
  EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_vf("LINATTN_BWD3_VFIRST");
  unsetenv("LINATTN_BWD3_BV");
  unsetenv("LINATTN_BWD3_VFIRST");
  const int sms = device_sm_count();
  int own = 0;
  check_rungs_agree(a, b, cases, ops, 0, /*require_finite=*/true, /*poison_between=*/true,
                    [&](const Case& c, Op op) {
                      const std::string r = route(c, op);
                      own += r == own_route;
                      return r;
                    },
                    [&](const Case& c, Op op) { return v24_grid(c, op, "", sms); });
  return own;
}

/// Rung 25 against rung 24 (check_rung_equals_prev). Returns how many calls took rung 25's own G1'.
int check_v25_equals_v24(const std::vector<Case>& cases, const std::vector<Op>& ops) {
  return check_rung_equals_prev(cuda::BwdVersion::v24_dswide, cuda::BwdVersion::v25_g1async, v25_route, "bwd_v25_g1a",
                                cases, ops);
}

/// Cases for rung 25's slab pipeline beyond rung 20's bit cases: one to four value slabs (V = 8, 64, 136 with a partial
/// third slab, 256), two K slabs with a partial second one (K = 72), partial last chunks, and a packed batch of short
/// sequences (rows past Lc zero-filled in every copy).
std::vector<Case> v25_slab_cases() {
  return {fixed_case(1, 150, 2, 128, 8, GateMode::random, true, 86),
          fixed_case(2, 100, 1, 72, 64, GateMode::extreme, true, 87),
          fixed_case(1, 130, 2, 40, 136, GateMode::random, true, 88),
          fixed_case(1, 70, 1, 128, 256, GateMode::random, true, 89),
          fixed_case(1, 120, 3, 64, 96, GateMode::random, true, 90, {0, 1, 17, 64, 65, 120})};
}

/// The bit tests' cases of rungs 25 to 27: rung 20's bit cases, v25_slab_cases and v24_wide_cases (sized from this
/// device's SM count: the 128- and 64-column dstates kernels, which these rungs' fronts run with bf16 dv_new too).
std::vector<Case> v25_bit_cases() {
  std::vector<Case> cases = rung20_bit_cases();
  for (const Case& c : v25_slab_cases()) cases.push_back(c);
  for (const Case& c : v24_wide_cases(device_sm_count())) cases.push_back(c);
  return cases;
}
}  // namespace

TEST_CASE("CUDA v25 gradients equal v24 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 25 (bwd_v25_g1async.cu) is rung 24 with DeltaNet's G1' loading its operands by cp.async, a value slab ahead of
  // its products: the same bf16 values in the same tiles (do, dS' and dv_new copied as the bf16 arrays rungs 19 and 20
  // hand over; v_new and S converted from their float32 slabs with rung 24's roundings), the same products in the same
  // order and rung 12's epilogue at G = 0. So every gradient, dh0 included, must equal rung 24's bit for bit and be
  // finite. Rung 20's bit cases, v25_slab_cases and v24_wide_cases (rung 25 runs rung 24's front: 128- and 64-column
  // dstates kernels with bf16 dv_new too), every operator (GDN, KDA, GDN2 run rung 24 itself), each call's route and
  // dstates width checked: DeltaNet must take rung 25's own G1' wherever K % 8 == 0 and V % 8 == 0, else rung 24's.
  const std::vector<Case> cases = v25_bit_cases();
  const int own = check_v25_equals_v24(cases, std::vector<Op>(std::begin(kOps), std::end(kOps)));
  INFO("calls that took rung 25's own G1': " << own);
  CHECK(own > 0);
  // and some DeltaNet calls outside its range (V or K not a multiple of 8) take rung 24's
  int outside = 0;
  for (const Case& c : cases) outside += v25_route(c, Op::delta_rule) != "bwd_v25_g1a";
  CHECK(outside > 0);
}

TEST_CASE("CUDA v25 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v25_g1async);
}

TEST_CASE("CUDA v25 on small cases for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 25's bit test on small DeltaNet cases that still pipeline: K = V = 128 over 150 tokens (two value slabs, so
  // both tile sets and the k, q copies into set 0; two K slabs; a partial last chunk), K = 40 V = 136 over 70 tokens
  // (three slabs, the last partial: k, q into set 1) and K = 64 V = 8 (one slab). Both gate dtypes; GDN on the first
  // case (rung 24's kernels, for the route).
  const std::vector<Case> cases = {fixed_case(1, 150, 1, 128, 128, GateMode::random, true, 91),
                                   fixed_case(1, 70, 1, 40, 136, GateMode::random, true, 92),
                                   fixed_case(1, 100, 1, 64, 8, GateMode::random, true, 93)};
  CHECK(check_v25_equals_v24(cases, {Op::delta_rule}) == 6);
  check_v25_equals_v24({cases[0]}, {Op::gated_delta_rule});
}

TEST_CASE("CUDA v26 chunked backward with its cp.async G2 equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v26_wyasync);
}

TEST_CASE("CUDA v26 chunked backward with its cp.async G2 and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v26_wyasync);
}

namespace {
/// Rung 26's route: "bwd_v26_wya" where rung 25 takes its own G1' (v25_route's "bwd_v25_g1a"), else rung 25's (24's).
std::string v26_route(const Case& c, Op op) {
  const std::string r = v25_route(c, op);
  return r == "bwd_v25_g1a" ? "bwd_v26_wya" : r;
}

/// Rung 26 against rung 25 (check_rung_equals_prev). Returns how many calls took rung 26's own kernels.
int check_v26_equals_v25(const std::vector<Case>& cases, const std::vector<Op>& ops) {
  return check_rung_equals_prev(cuda::BwdVersion::v25_g1async, cuda::BwdVersion::v26_wyasync, v26_route, "bwd_v26_wya",
                                cases, ops);
}
}  // namespace

TEST_CASE("CUDA v26 gradients equal v25 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 26 (bwd_v26_wyasync.cu) is rung 25 with DeltaNet's G2' loading its operands by cp.async ahead of the products
  // that need them and dw_aux handed from G1' as the bf16 values G2' multiplies (rung 19's rounding): the same tiles,
  // products and expressions, so every gradient, dh0 included, must equal rung 25's bit for bit and be finite. Rung
  // 25's cases (one to four value slabs, one and two key slabs, partial chunks and slabs, packed batches, the wide
  // dstates cases), every operator (others run rung 25 itself), each call's route and dstates width checked.
  const std::vector<Case> cases = v25_bit_cases();
  const int own = check_v26_equals_v25(cases, std::vector<Op>(std::begin(kOps), std::end(kOps)));
  INFO("calls that took rung 26's own kernels: " << own);
  CHECK(own > 0);
}

TEST_CASE("CUDA v26 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v26_wyasync);
}

TEST_CASE("CUDA v26 on small cases for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 26's bit test on small DeltaNet cases that pipeline: K = V = 128 over 150 tokens (two value slabs, two key
  // slabs: dw_aux 1 over the second dE slab, k 1 in the last v tile), K = 40 V = 136 over 70 tokens (three value slabs,
  // one key slab) and K = 64 V = 8 (one of each). Both gate dtypes.
  const std::vector<Case> cases = {fixed_case(1, 150, 1, 128, 128, GateMode::random, true, 94),
                                   fixed_case(1, 70, 1, 40, 136, GateMode::random, true, 95),
                                   fixed_case(1, 100, 1, 64, 8, GateMode::random, true, 96)};
  CHECK(check_v26_equals_v25(cases, {Op::delta_rule}) == 6);
}

TEST_CASE("CUDA v27 chunked backward with dv_new in bf16 planes equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v27_dvplanes);
}

TEST_CASE("CUDA v27 chunked backward with dv_new in bf16 planes and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v27_dvplanes);
}

namespace {
/// Rung 27's route: "bwd_v27_dvp" where rung 26 takes its own kernels, else rung 26's (24's).
std::string v27_route(const Case& c, Op op) {
  const std::string r = v26_route(c, op);
  return r == "bwd_v26_wya" ? "bwd_v27_dvp" : r;
}

/// Rung 27 against rung 26 (check_rung_equals_prev). Returns how many calls took rung 27's own kernels.
int check_v27_equals_v26(const std::vector<Case>& cases, const std::vector<Op>& ops) {
  return check_rung_equals_prev(cuda::BwdVersion::v26_wyasync, cuda::BwdVersion::v27_dvplanes, v27_route, "bwd_v27_dvp",
                                cases, ops);
}
}  // namespace

TEST_CASE("CUDA v27 gradients equal v26 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 27 (bwd_v27_dvplanes.cu) is rung 26 with DeltaNet's dv_new stored by the dstates kernel as its bf16 hi and lo
  // parts (the values G2' multiplies) instead of float32 plus a bf16 copy of the hi part: the same tiles in both
  // gradient kernels, so every gradient, dh0 included, must equal rung 26's bit for bit and be finite. The float32
  // dv_new is not written on this path; NaN-filled workspaces between the rungs make a stale read of it show. Rung 26's
  // cases (every dstates width among them: the planes are stored by every dstates kernel), every operator, each call's
  // route and dstates width checked.
  const std::vector<Case> cases = v25_bit_cases();
  const int own = check_v27_equals_v26(cases, std::vector<Op>(std::begin(kOps), std::end(kOps)));
  INFO("calls that took rung 27's own kernels: " << own);
  CHECK(own > 0);
}

TEST_CASE("CUDA v27 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v27_dvplanes);
}

namespace {
/// The sanitizer cases of rungs 27 to 30 (rung 26's shapes, seeds 97-99): DeltaNet at K = V = 128 over 150 tokens (two
/// value slabs, two key slabs), K = 40 V = 136 over 70 tokens (three value slabs, one key slab), K = 64 V = 8 (one of each).
std::vector<Case> v27_sanitizer_cases() {
  return {fixed_case(1, 150, 1, 128, 128, GateMode::random, true, 97),
          fixed_case(1, 70, 1, 40, 136, GateMode::random, true, 98),
          fixed_case(1, 100, 1, 64, 8, GateMode::random, true, 99)};
}
}  // namespace

TEST_CASE("CUDA v27 on small cases for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 27's bit test on rung 26's sanitizer cases (two, three and one value slabs; two and one key slabs).
  const std::vector<Case> cases = v27_sanitizer_cases();
  CHECK(check_v27_equals_v26(cases, {Op::delta_rule}) == 6);
}

TEST_CASE("CUDA v28 chunked backward with bf16 states equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v28_sbf16);
}

TEST_CASE("CUDA v28 chunked backward with bf16 states and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v28_sbf16);
}

namespace {
/// Rung 28's route: "bwd_v28_sbf" where rung 27 takes its own kernels (the same range), else rung 27's (24's).
std::string v28_route(const Case& c, Op op) {
  const std::string r = v27_route(c, op);
  return r == "bwd_v27_dvp" ? "bwd_v28_sbf" : r;
}

/// Rung 28 against rung 27 (check_rung_equals_prev). Returns how many calls took rung 28's own kernels.
int check_v28_equals_v27(const std::vector<Case>& cases, const std::vector<Op>& ops) {
  return check_rung_equals_prev(cuda::BwdVersion::v27_dvplanes, cuda::BwdVersion::v28_sbf16, v28_route, "bwd_v28_sbf",
                                cases, ops);
}
}  // namespace

TEST_CASE("CUDA v28 gradients equal v27 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 28 (bwd_v28_sbf16.cu) is rung 27 with the state entering every chunk stored by the backward's states kernel as
  // its bf16 hi part (round to nearest even) and copied by G1' straight into its tiles, where rung 27 stored float32 and
  // G1' rounded it on chip: the same bf16 values in the same products, so every gradient, dh0 included, must equal rung
  // 27's bit for bit and be finite. NaN-filled workspaces between the rungs make a read of the float32 S (or of S's
  // unwritten second half) show. Rung 25's cases (one to three value slabs, one and two key slabs, ragged chunks, every
  // dstates width), every operator, each call's route and dstates width checked, and (after session 25's review) an
  // in-range case without an initial state (the first chunk's S = 0 stored from the hi tile). (The saving forward's bf16
  // states: test_cuda_saved.cu.)
  std::vector<Case> cases = v25_bit_cases();
  cases.push_back(fixed_case(1, 130, 2, 64, 64, GateMode::random, false, 141));
  const int own = check_v28_equals_v27(cases, std::vector<Op>(std::begin(kOps), std::end(kOps)));
  INFO("calls that took rung 28's own kernels: " << own);
  CHECK(own > 0);
}

TEST_CASE("CUDA v28 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v28_sbf16);
}

TEST_CASE("CUDA v28 on small cases for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 28's bit test on rung 26's sanitizer cases (two, three and one value slabs; two and one key slabs).
  const std::vector<Case> cases = v27_sanitizer_cases();
  CHECK(check_v28_equals_v27(cases, {Op::delta_rule}) == 6);
}

TEST_CASE("CUDA v29 chunked backward with B1 on the hi part of dS' equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v29_b1hi);
}

TEST_CASE("CUDA v29 chunked backward with B1 on the hi part of dS' and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v29_b1hi);
}

namespace {
/// Rung 29's route: "bwd_v29_b1h" where rung 28 takes its own kernels (the same range), else rung 28's (27's, 24's).
std::string v29_route(const Case& c, Op op) {
  const std::string r = v28_route(c, op);
  return r == "bwd_v28_sbf" ? "bwd_v29_b1h" : r;
}

/// A rung that is not bit for bit with its base (`ver` beside `base`) on `cases`, every operator, both gate dtypes,
/// against the float64 reference: `ver` within rung 3's bounds; each call's route checked (`route_of`); where `ver`
/// runs its own kernels (route `own`), some case must differ from `base` in each gradient of `grads` ("dv", "dk": the
/// products the rung changed ran), elsewhere every gradient equals `base`'s bit for bit (`base` ran). DeltaNet runs at every dstates
/// width (LINATTN_BWD3_BV unset, 32, 64 and 128: the small cases' own pick is 32 columns, the benchmark's 128), the
/// other operators with the width unset. Worst ratios of both rungs printed under LINATTN_CUDA_BACKWARD_REPORT. Returns
/// how many calls took `ver`'s own kernels.
int check_near_base(const std::vector<std::pair<Case, bool>>& cases, const std::string& title, cuda::BwdVersion ver,
                    cuda::BwdVersion base, const std::string& own, std::string (*route_of)(const Case&, Op),
                    const std::vector<std::string>& grads) {
  EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_vf("LINATTN_BWD3_VFIRST");
  unsetenv("LINATTN_BWD3_VFIRST");
  std::map<std::string, std::array<double, 2>> worst;  // per operator and gradient: ver, base
  int n_own = 0;
  std::map<std::string, int> own_differs;  // per gradient of `grads`: own calls where it differs from base's
  for (const auto& [c, dht] : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : kOps) {
        BwdCase b;
        b.c = c, b.with_dht = dht;
        const DevProblem d = as_device_sees(make_bwd_problem(op, b), DType::bf16, gdt);
        const auto want = reference_backward(d);
        const std::vector<std::string> widths =
            op == Op::delta_rule ? knob_values("LINATTN_BWD3_BV", {"", "32", "64", "128"}) : std::vector<std::string>{""};
        for (const std::string& bv : widths) {
          if (bv.empty()) unsetenv("LINATTN_BWD3_BV");
          else setenv("LINATTN_BWD3_BV", bv.c_str(), 1);
          const auto y = cuda_backward(d, DType::bf16, gdt, ver);
          const std::string route = cuda::last_backward_split_route(), grid = cuda::last_dstates_grid();
          const auto yb = cuda_backward(d, DType::bf16, gdt, base);
          const auto e = compare_grads(y, want), eb = compare_grads(yb, want);
          INFO(cuda::bwd_version_name(ver) << " " << ref::op_name(op) << " gates " << dname(gdt) << " " << b
                                           << "; LINATTN_BWD3_BV=" << (bv.empty() ? "unset" : bv) << "; route " << route
                                           << ", dstates grid " << grid << ": " << describe(e));
          CHECK(route == route_of(c, op));
          for (const GradErr& x : e) CHECK(within(x, DType::bf16, gdt, ver, c.K));
          check_all_finite(y);
          for (std::size_t i = 0; i < e.size(); ++i) {
            auto& w = worst[std::string(ref::op_name(op)) + " " + e[i].name];
            w[0] = std::max(w[0], e[i].ratio()), w[1] = std::max(w[1], eb[i].ratio());
          }
          if (route == own) {
            ++n_own;
            for (const std::string& grad : grads) {
              const auto& g = grad == "dk" ? y.dk : y.dv;
              const auto& gb = grad == "dk" ? yb.dk : yb.dv;
              REQUIRE(g.numel() == gb.numel());
              own_differs[grad] += std::memcmp(g.data(), gb.data(), sizeof(float) * g.numel()) != 0;
            }
          } else {
            check_same_grads(yb, y);
          }
        }
      }
  if (std::getenv("LINATTN_CUDA_BACKWARD_REPORT")) {
    std::cout << title << " (worst err / max(rms, floor), " << cuda::bwd_version_name(ver) << " / "
              << cuda::bwd_version_name(base) << "):";
    for (const auto& [name, w] : worst) std::cout << "  " << name << " " << w[0] << " / " << w[1];
    std::cout << "\n";
  }
  for (const std::string& grad : grads) {
    INFO("calls on " << cuda::bwd_version_name(ver) << "'s own kernels: " << n_own << ", of which " << grad
                     << " differs from " << cuda::bwd_version_name(base) << "'s: " << own_differs[grad]);
    CHECK(own_differs[grad] > 0);
  }
  return n_own;
}

/// Rung 29 (bwd_v29_b1hi.cu) beside rung 28 (check_near_base): its own kernels change dv_new, so dv.
int check_v29_near_v28(const std::vector<std::pair<Case, bool>>& cases, const std::string& title) {
  return check_near_base(cases, title, cuda::BwdVersion::v29_b1hi, cuda::BwdVersion::v28_sbf16, "bwd_v29_b1h",
                         v29_route, {"dv"});
}
}  // namespace

TEST_CASE("CUDA v29 B1 on the hi part of dS' keeps every gradient within rung 3 bounds beside rung 28 on fixed cases") {
  SKIP_WITHOUT_GPU();
  // Rung 29 changes one product of the dstates kernel (dv_new = P^T do + Kd dS' with dS' rounded to bf16, as fla's dhu),
  // so it is not bit for bit with rung 28: held to rung 3's bounds against the float64 reference on rung 20's bit cases
  // and rung 25's slab cases (one to four value slabs, two key slabs, ragged chunks, packed batches), rung 15's failing
  // cases (T = 1, 2 with extreme gates, no dht, where a few large terms cancel) and 16 chunks at K = V = 128 (the error
  // of a long reverse chain), at every dstates width (check_v29_near_v28), every operator (GDN, KDA, GDN2 and DeltaNet
  // outside the range must equal rung 28 bit for bit), both gate dtypes. (Not rung 24's SM-sized wide cases: their
  // float64 references take minutes; the width knob runs the same kernels on these.)
  std::vector<std::pair<Case, bool>> cases;
  for (const Case& c : rung20_bit_cases()) cases.push_back({c, true});
  for (const Case& c : v25_slab_cases()) cases.push_back({c, true});
  cases.push_back({fixed_case(1, 2, 1, 16, 2, GateMode::extreme, false, 1), false});
  cases.push_back({fixed_case(1, 1, 1, 41, 10, GateMode::extreme, false, 537651), false});
  cases.push_back({fixed_case(1, 1, 1, 40, 16, GateMode::extreme, false, 121), false});
  cases.push_back({fixed_case(1, 2, 1, 16, 8, GateMode::extreme, true, 2901), true});
  cases.push_back({fixed_case(1, 1024, 1, 128, 128, GateMode::random, true, 2902), true});
  const int own = check_v29_near_v28(cases, "v29 fixed cases");
  CHECK(own > 0);
}

TEST_CASE("CUDA v29 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v29_b1hi);
}

TEST_CASE("CUDA v29 on small cases for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 26's sanitizer cases (two, three and one value slabs; two and one key slabs), DeltaNet on rung 29's kernels.
  std::vector<std::pair<Case, bool>> cases;
  for (const Case& c : v27_sanitizer_cases()) cases.push_back({c, true});
  CHECK(check_v29_near_v28(cases, "v29 sanitizer cases") > 0);
}

TEST_CASE("CUDA v30 chunked backward with two stages of w_aux and Qg equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v30_dsw2);
}

namespace {
/// Rung 30's route: "bwd_v30_dsw" where rung 29 takes its own kernels (the same range), else rung 29's.
std::string v30_route(const Case& c, Op op) {
  const std::string r = v29_route(c, op);
  return r == "bwd_v29_b1h" ? "bwd_v30_dsw" : r;
}

/// Rung 30 against rung 29 bit for bit (check_rungs_agree: every gradient, dh0 included, finite, NaN-filled workspaces
/// between the rungs), each call's route and dstates width checked, with LINATTN_BWD3_BV unset (rung 24's pick) and
/// 128 (rung 30's kW2 kernel wherever K > 64, on every case's shape). Returns how many calls ran rung 30's kW2 kernel
/// (its own route at 128 columns).
int check_v30_equals_v29(const std::vector<Case>& cases, const std::vector<Op>& ops) {
  EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_vf("LINATTN_BWD3_VFIRST");
  unsetenv("LINATTN_BWD3_VFIRST");
  const int sms = device_sm_count();
  int w2 = 0;
  for (const std::string& bv : knob_values("LINATTN_BWD3_BV", {"", "128"})) {
    if (bv.empty()) unsetenv("LINATTN_BWD3_BV");
    else setenv("LINATTN_BWD3_BV", bv.c_str(), 1);
    INFO("LINATTN_BWD3_BV=" << (bv.empty() ? "unset" : bv) << ", " << sms << " SMs");
    check_rungs_agree(cuda::BwdVersion::v29_b1hi, cuda::BwdVersion::v30_dsw2, cases, ops, 0, /*require_finite=*/true,
                      /*poison_between=*/true,
                      [&](const Case& c, Op op) {
                        const std::string r = v30_route(c, op);
                        w2 += r == "bwd_v30_dsw" && v24_grid(c, op, bv, sms) == "sequence-first/128";
                        return r;
                      },
                      [&](const Case& c, Op op) { return v24_grid(c, op, bv, sms); });
  }
  return w2;
}
}  // namespace

TEST_CASE("CUDA v30 gradients equal v29 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 30 (bwd_v30_dsw2.cu) is rung 29 with the 128-column dstates kernel keeping w_aux and Qg in two stages (the lo
  // tile's bytes), copying chunk ci - 1's a step earlier and dropping one barrier per chunk: the same products in the
  // same order on the same values, so every gradient must equal rung 29's bit for bit and be finite. Rung 28's bit cases
  // (v25_bit_cases: one to four value slabs, two key slabs, ragged chunks, packed batches, rung 24's SM-sized cases that
  // pick 128 columns) and an in-range case of one chunk, every operator, with the width unset and at 128 columns.
  std::vector<Case> cases = v25_bit_cases();
  cases.push_back(fixed_case(1, 40, 2, 128, 128, GateMode::random, true, 3001));
  const int w2 = check_v30_equals_v29(cases, std::vector<Op>(std::begin(kOps), std::end(kOps)));
  INFO("calls that ran rung 30's two-stage 128-column dstates kernel: " << w2);
  CHECK(w2 > 0);
}

TEST_CASE("CUDA v30 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v30_dsw2);
}

TEST_CASE("CUDA v30 on small cases for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 26's sanitizer cases (two, three and one value slabs; two and one key slabs) at 128 columns where K > 64.
  const std::vector<Case> cases = v27_sanitizer_cases();
  CHECK(check_v30_equals_v29(cases, {Op::delta_rule}) > 0);
}

TEST_CASE("CUDA v31 chunked backward with a bf16 hand-over between G1' and G2' equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v31_dkbf16);
}

TEST_CASE("CUDA v31 chunked backward with a bf16 hand-over between G1' and G2' and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v31_dkbf16);
}

namespace {
/// Rung 31's route: "bwd_v31_dkh" where rung 29 takes its own kernels (the same range), else rung 29's.
std::string v31_route(const Case& c, Op op) {
  const std::string r = v29_route(c, op);
  return r == "bwd_v29_b1h" ? "bwd_v31_dkh" : r;
}
/// Rung 31 (bwd_v31_dkbf16.cu) beside rung 29 (check_near_base): its own kernels round dk_part to bf16 (dk differs) and
/// multiply dv_new's hi plane only in B8's du0 (dv = beta du0 differs).
int check_v31_near_v29(const std::vector<std::pair<Case, bool>>& cases, const std::string& title) {
  return check_near_base(cases, title, cuda::BwdVersion::v31_dkbf16, cuda::BwdVersion::v29_b1hi, "bwd_v31_dkh",
                         v31_route, {"dk", "dv"});
}
}  // namespace

TEST_CASE("CUDA v31 bf16 hand-over keeps every gradient within rung 3 bounds beside rung 29 on fixed cases") {
  SKIP_WITHOUT_GPU();
  // Rung 31 rounds dk_part to bf16 between G1' and G2' and multiplies dv_new's hi plane only in G2' (as fla's dqkwg and
  // wy_bwd), so it is not bit for bit with rung 29: held to rung 3's bounds against the float64 reference on rung 29's
  // fixed cases (rung 20's bit cases, rung 25's slab cases, rung 15's failing cases with extreme gates and no dht, 16
  // chunks at K = V = 128) at every dstates width, every operator (GDN, KDA, GDN2 and DeltaNet outside the range must
  // equal rung 29 bit for bit), both gate dtypes.
  std::vector<std::pair<Case, bool>> cases;
  for (const Case& c : rung20_bit_cases()) cases.push_back({c, true});
  for (const Case& c : v25_slab_cases()) cases.push_back({c, true});
  cases.push_back({fixed_case(1, 2, 1, 16, 2, GateMode::extreme, false, 1), false});
  cases.push_back({fixed_case(1, 1, 1, 41, 10, GateMode::extreme, false, 537651), false});
  cases.push_back({fixed_case(1, 1, 1, 40, 16, GateMode::extreme, false, 121), false});
  cases.push_back({fixed_case(1, 2, 1, 16, 8, GateMode::extreme, true, 2901), true});
  cases.push_back({fixed_case(1, 1024, 1, 128, 128, GateMode::random, true, 2902), true});
  cases.push_back({fixed_case(2, 100, 2, 64, 72, GateMode::random, false, 3101), false});  // no dht, ragged, V != K
  const int own = check_v31_near_v29(cases, "v31 fixed cases");
  CHECK(own > 0);
}

TEST_CASE("CUDA v31 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v31_dkbf16);
}

TEST_CASE("CUDA v31 on small cases for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 26's sanitizer cases (two, three and one value slabs; two and one key slabs), DeltaNet on rung 31's kernels.
  std::vector<std::pair<Case, bool>> cases;
  for (const Case& c : v27_sanitizer_cases()) cases.push_back({c, true});
  CHECK(check_v31_near_v29(cases, "v31 sanitizer cases") > 0);
}

TEST_CASE("CUDA v32 chunked backward with G1' outputs stored as whole rows equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v32_g1stage);
}

namespace {
/// Rung 32's route: "bwd_v32_g1s" where rung 31 takes its own kernels (the same range), else rung 31's.
std::string v32_route(const Case& c, Op op) {
  const std::string r = v31_route(c, op);
  return r == "bwd_v31_dkh" ? "bwd_v32_g1s" : r;
}
/// `ver` against `base` bit for bit (check_rungs_agree: every gradient, dh0 included, finite, NaN-filled workspaces
/// between the rungs) with LINATTN_BWD3_BV unset, each call's route (`route_of`) and dstates width (rung 24's pick)
/// checked. Returns how many calls took `ver`'s own route `own`.
int check_bits_at_default_width(cuda::BwdVersion base, cuda::BwdVersion ver, const std::string& own,
                                std::string (*route_of)(const Case&, Op), const std::vector<Case>& cases,
                                const std::vector<Op>& ops) {
  EnvRestore keep_bv("LINATTN_BWD3_BV"), keep_vf("LINATTN_BWD3_VFIRST");
  unsetenv("LINATTN_BWD3_BV");
  unsetenv("LINATTN_BWD3_VFIRST");
  const int sms = device_sm_count();
  int n_own = 0;
  check_rungs_agree(base, ver, cases, ops, 0, /*require_finite=*/true, /*poison_between=*/true,
                    [&](const Case& c, Op op) {
                      const std::string r = route_of(c, op);
                      n_own += r == own;
                      return r;
                    },
                    [&](const Case& c, Op op) { return v24_grid(c, op, "", sms); });
  return n_own;
}
/// Rung 32 against rung 31 bit for bit (check_bits_at_default_width).
int check_v32_equals_v31(const std::vector<Case>& cases, const std::vector<Op>& ops) {
  return check_bits_at_default_width(cuda::BwdVersion::v31_dkbf16, cuda::BwdVersion::v32_g1stage, "bwd_v32_g1s",
                                     v32_route, cases, ops);
}
}  // namespace

TEST_CASE("CUDA v32 gradients equal v31 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 32 (bwd_v32_g1stage.cu) is rung 31 with G1''s bf16 outputs staged in shared memory and stored as 16-byte row
  // segments: the same bf16_rn values in the same places, so every gradient must equal rung 31's bit for bit and be
  // finite. Rung 28's bit cases (one to four value slabs, two key slabs, ragged chunks, packed batches, rung 24's
  // SM-sized cases) and an in-range case of one chunk, every operator.
  std::vector<Case> cases = v25_bit_cases();
  cases.push_back(fixed_case(1, 40, 2, 128, 128, GateMode::random, true, 3201));
  CHECK(check_v32_equals_v31(cases, std::vector<Op>(std::begin(kOps), std::end(kOps))) > 0);
}

TEST_CASE("CUDA v32 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v32_g1stage);
}

TEST_CASE("CUDA v32 on small cases for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 26's sanitizer cases (two, three and one value slabs; two and one key slabs), DeltaNet on rung 32's kernels.
  CHECK(check_v32_equals_v31(v27_sanitizer_cases(), {Op::delta_rule}) > 0);
}

TEST_CASE("CUDA v33 chunked backward with G2' outputs stored as whole rows equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v33_g2stage);
}

TEST_CASE("CUDA v33 chunked backward with G2' outputs stored as whole rows and bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v33_g2stage);
}

namespace {
/// Rung 33's route: "bwd_v33_g2s" where rung 32 takes its own kernels (the same range), else rung 32's.
std::string v33_route(const Case& c, Op op) {
  const std::string r = v32_route(c, op);
  return r == "bwd_v32_g1s" ? "bwd_v33_g2s" : r;
}
/// Rung 33 against rung 32 bit for bit (check_bits_at_default_width).
int check_v33_equals_v32(const std::vector<Case>& cases, const std::vector<Op>& ops) {
  return check_bits_at_default_width(cuda::BwdVersion::v32_g1stage, cuda::BwdVersion::v33_g2stage, "bwd_v33_g2s",
                                     v33_route, cases, ops);
}
}  // namespace

TEST_CASE("CUDA v33 gradients equal v32 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 33 (bwd_v33_g2stage.cu) is rung 32 with G2''s dv and dk staged in shared memory it leaves free (the dv_new lo
  // tile, each key slab's dE entries) and stored as 16-byte row segments: the same bf16_rn values in the same places,
  // so every gradient must equal rung 32's bit for bit and be finite (dv and dk are NaN-filled outputs: a row the
  // copy-out misses stays NaN). Rung 28's bit cases (one to four value slabs, two key slabs, ragged chunks, packed
  // batches, rung 24's SM-sized cases) and an in-range case of one chunk, every operator.
  std::vector<Case> cases = v25_bit_cases();
  cases.push_back(fixed_case(1, 40, 2, 128, 128, GateMode::random, true, 3301));
  CHECK(check_v33_equals_v32(cases, std::vector<Op>(std::begin(kOps), std::end(kOps))) > 0);
}

TEST_CASE("CUDA v33 chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v33_g2stage);
}

TEST_CASE("CUDA v33 on small cases for the sanitizers") {
  SKIP_WITHOUT_GPU();
  // Rung 26's sanitizer cases (two, three and one value slabs; two and one key slabs), DeltaNet on rung 33's kernels.
  CHECK(check_v33_equals_v32(v27_sanitizer_cases(), {Op::delta_rule}) > 0);
}

TEST_CASE("CUDA v18 lean chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v18_lean);
}

TEST_CASE("CUDA v18 lean chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v18_lean);
}

TEST_CASE("CUDA v18 lean chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v18_lean);
}

TEST_CASE("CUDA v13 gradients equal v10 gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  // Rung 13 (bwd_v13_g1g2.cu) is rung 10's front, then rung 12's G1' and rung 11's G2', each a drop-in
  // for rung 10's kernel with the same workspace contract and bit for bit by design (the v11 and v12
  // tests above); so every gradient bit for bit with rung 10, and finite (NaN on both sides would
  // compare equal). KDA and GDN2 run rung 8 in both. Cases: the union of the v11 and v12 bit tests'.
  check_rungs_agree(cuda::BwdVersion::v10_split, cuda::BwdVersion::v13_g1g2, rung13_bit_cases(), kOps, 0,
                    /*require_finite=*/true);
}

TEST_CASE("CUDA v13 G1 slab and fast WY chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v13_g1g2);
}

TEST_CASE("CUDA v14 per-channel split chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v14_pchan);
}

TEST_CASE("CUDA v14 per-channel split chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v14_pchan);
}

TEST_CASE("CUDA v14 gradients equal v13 gradients bit for bit for DeltaNet and GDN") {
  SKIP_WITHOUT_GPU();
  // Rung 14 (bwd_v14_pchan.cu) runs rung 13 itself for DeltaNet and GDN: every gradient bit for bit,
  // and finite. Cases: rung 9's bit test's (odd K and V, packed ragged batches, g at -30, -1000 and 0).
  const Op ops[] = {Op::delta_rule, Op::gated_delta_rule};
  check_rungs_agree(cuda::BwdVersion::v13_g1g2, cuda::BwdVersion::v14_pchan, rung9_bit_cases(), ops, 0,
                    /*require_finite=*/true);
}

TEST_CASE("CUDA v14 per-channel split backward is rung 8 up to float32 summation order for KDA and GDN2") {
  SKIP_WITHOUT_GPU();
  // Rung 14 splits rung 8's grads kernel for KDA and GDN2 into G1' (one block per 64-channel slab, B9's P
  // half by levels) and G2 (B9's L half by levels). The same: the front (dh0); dQg, dKd, dw_aux, dP, du0 (the same tiles and products);
  // dq^P (the same level products on every pair kept: bwd_v14_pchan.cu's header), hence dq = scale (dQg
  // exp(G) + dq^P); dv = (beta | w) du0 and GDN2's dw = du0 v (the same expressions): dq, dv, dw, dh0 bit
  // for bit. Different: float32 summation order in dk (dk^L and dk^P now summed apart, then dk_part +
  // dk^L + gate de) and dG (four terms in G1, three in G2), hence dg; and de, hence db = de k and dbeta,
  // through u0 = (beta | w) v formed by mul.rn where rung 8's plain product may be contracted into
  // put_split's lo (rung 10's test says why): dk, dg, db, dbeta within rung 10's bounds, 5e-4 where the
  // gradient is stored in bf16 (dk; the gate gradients with bf16 gates) and 2e-5 in float32, relative to
  // max(rms(rung 8), rms of rung 8's dq, dk, dv). A FIRST GUESS from rung 10's analysis (the sums here
  // have <= 12 level terms per channel instead of 6 products): to be tightened from the differences this
  // test prints under LINATTN_CUDA_BACKWARD_REPORT on the device. A dropped or misplaced term moves a
  // gradient by O(1) of its size (make_mutants.py's v14 group).
  // Cases: rung 9's bit test's (K = 36 V = 20, K = 18 V = 22, K = 100 V = 200, packed ragged batches with
  // an odd row count, quads and items, log-decays at -30 / -1000 and at 0, initial states) and K = 128
  // V = 20 (two K slabs) with extreme gates; float32 and bf16 gates.
  std::vector<Case> cases = rung9_bit_cases();
  cases.push_back(fixed_case(1, 131, 2, 128, 20, GateMode::extreme, true, 37));
  check_split_near_v8(cuda::BwdVersion::v14_pchan, cases, "", /*require_dg_differs=*/false);
}

TEST_CASE("CUDA v14 slab G1 gives the one-block G1 gradients bit for bit for KDA and GDN2") {
  SKIP_WITHOUT_GPU();
  // Rung 14's state side runs G1' (bwd14_g1s: one block per 64-channel slab, rung 12's tiling) unless its
  // grid is too wide; the test hook LINATTN_BWD14_ONE_BLOCK_G1 selects the one-block G1 (bwd_grads_tc with
  // V14Mid: rung 10's tiling) instead. Both stage the same tiles, run the same products and level
  // products in the same order and the same epilogue expressions (dQg and dKd parked in the workspace as
  // float32 by G1'): every gradient bit for bit, and finite. G2 and the front are the same code in both.
  // Cases: rung 9's bit test's (odd K and V, packed ragged batches, log-decays at -30, -1000 and 0) and
  // K = 100 V = 36 (a partial second slab), K = 128 V = 20 extreme, K = 72 V = 136 packed.
  std::vector<Case> cases = rung9_bit_cases();
  cases.push_back(fixed_case(1, 150, 2, 100, 36, GateMode::random, true, 36));
  cases.push_back(fixed_case(1, 131, 2, 128, 20, GateMode::extreme, true, 37));
  cases.push_back(fixed_case(1, 200, 2, 72, 136, GateMode::random, true, 38, {0, 65, 200}));
  for (const Case& cs : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : {Op::kda, Op::gdn2}) {
        BwdCase bc;
        bc.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, bc), DType::bf16, gdt);
        ::setenv("LINATTN_BWD14_ONE_BLOCK_G1", "1", 1);
        struct Unset {
          ~Unset() { ::unsetenv("LINATTN_BWD14_ONE_BLOCK_G1"); }
        } unset;
        const auto x = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v14_pchan);
        ::unsetenv("LINATTN_BWD14_ONE_BLOCK_G1");
        const auto y = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v14_pchan);
        INFO("bwd_v14_pchan slab G1 vs one-block G1, " << ref::op_name(op) << " gates " << dname(gdt) << " " << cs);
        check_same_grads(x, y);
        check_all_finite(y);
      }
}

TEST_CASE("CUDA v14 per-channel split chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v14_pchan);
}

// Rung 15 has no property against the reference: its two (prop_matches_reference with either gate dtype)
// failed on the H200 (session 10 call 1), shrinking to T = 2 K = 16 V = 2 and T = 1 K = 41 V = 10 with
// extreme gates (dk 1.1-1.9x, KDA dbeta 3x rung 3's bounds). Rung 3's bounds were not loosened for it:
// rung 17 keeps the two lo operands that those cases need, and its fixed-case test below asserts that
// rung 15 exceeds a bound on those cases for every operator (so the cases can tell the two apart).
// Rung 15 stays in kRungs and rung3_family (the shared fixed cases, which it passes) and keeps its
// fixed-case and outside-range tests.

TEST_CASE("CUDA v15 hi-only products keep every gradient within rung 3 bounds beside rungs 13 and 8 on fixed cases") {
  SKIP_WITHOUT_GPU();
  // Rung 15 rounds every float32 operand of G1' and G2' to bf16 (one MMA per product). On fixed cases
  // (odd sizes K = 36 V = 20 and K = 100 V = 200, a packed ragged batch, log-decays of 0 and of -1000,
  // both gate dtypes) every gradient is held to rung 3's bounds against the float64 reference; its error
  // ratio is printed next to rung 13's and rung 8's (LINATTN_CUDA_BACKWARD_REPORT) to compare with the
  // model's prediction. dk must differ from that of the rung whose kernels rung 15 runs hi-only (13 for
  // DeltaNet and GDN, 8 for KDA and GDN2): the hi-only kernels ran, not the hi + lo ones by a wiring slip.
  const std::vector<Case> cases = {fixed_case(1, 150, 2, 36, 20, GateMode::random, true, 1501),
                                   fixed_case(1, 130, 1, 100, 200, GateMode::mixed, true, 1502),
                                   fixed_case(1, 100, 2, 48, 40, GateMode::random, true, 1503, {0, 7, 70, 100}),
                                   fixed_case(1, 150, 2, 64, 64, GateMode::zero, true, 1504),
                                   fixed_case(1, 150, 2, 64, 64, GateMode::extreme, true, 1505)};
  std::map<std::string, std::array<double, 3>> worst;  // per operator and gradient: v15, v13, v8
  for (const Case& cs : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : kOps) {
        BwdCase b;
        b.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, b), DType::bf16, gdt);
        const auto want = reference_backward(d);
        const auto y15 = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v15_hionly);
        const auto y13 = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v13_g1g2);
        const auto y8 = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v8_wide);
        const auto e15 = compare_grads(y15, want), e13 = compare_grads(y13, want), e8 = compare_grads(y8, want);
        INFO("bwd_v15_hionly " << ref::op_name(op) << " gates " << dname(gdt) << " " << cs << ": " << describe(e15));
        for (const GradErr& e : e15) CHECK(within(e, DType::bf16, gdt, cuda::BwdVersion::v15_hionly, cs.K));
        for (std::size_t i = 0; i < e15.size(); ++i) {
          auto& w = worst[std::string(ref::op_name(op)) + " " + e15[i].name];
          w[0] = std::max(w[0], e15[i].ratio()), w[1] = std::max(w[1], e13[i].ratio()), w[2] = std::max(w[2], e8[i].ratio());
        }
        const auto& base = (op == Op::kda || op == Op::gdn2) ? y8 : y13;
        REQUIRE(y15.dk.numel() == base.dk.numel());
        CHECK(std::memcmp(y15.dk.data(), base.dk.data(), sizeof(float) * y15.dk.numel()) != 0);
      }
  if (std::getenv("LINATTN_CUDA_BACKWARD_REPORT"))
    for (const auto& [key, w] : worst)
      std::cout << "v15 fixed cases worst err / max(rms, floor) " << key << ": v15 " << w[0] << "  v13 " << w[1]
                << "  v8 " << w[2] << "\n";
}

TEST_CASE("CUDA v15 hi-only products chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v15_hionly);
}

TEST_CASE("CUDA v16 one B9 kernel chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v16_b9one);
}

TEST_CASE("CUDA v16 one B9 kernel chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v16_b9one);
}

TEST_CASE("CUDA v16 gradients equal v13 gradients bit for bit for DeltaNet and GDN") {
  SKIP_WITHOUT_GPU();
  // Rung 16 (bwd_v16_b9one.cu) runs rung 13 itself for DeltaNet and GDN: every gradient bit for bit,
  // and finite. Cases: rung 9's bit test's (odd K and V, packed ragged batches, g at -30, -1000 and 0).
  const Op ops[] = {Op::delta_rule, Op::gated_delta_rule};
  check_rungs_agree(cuda::BwdVersion::v13_g1g2, cuda::BwdVersion::v16_b9one, rung9_bit_cases(), ops, 0,
                    /*require_finite=*/true);
}

TEST_CASE("CUDA v16 one B9 kernel backward is rung 8 up to float32 summation order for KDA and GDN2") {
  SKIP_WITHOUT_GPU();
  // Rung 16 runs rung 8's front, rung 14's split without B9 (G1s: B2, B4, B5; G2s: B6, B8, B7) and one B9
  // kernel that calls rung 8's own b9_levels on dP and A^T T1 read back from the workspace. The same by
  // design: the front (dh0); dQg, dP, du0 (the same tiles and products); dq^P (the same function on the same
  // dP), hence dq = scale (dQg exp(G) + dq^P), rung 8's expression; dv = (beta | w) du0 and GDN2's dw = du0 v:
  // dq, dv, dw, dh0 bit for bit (memcmp). Different: float32 summation order in dk (dk_part + dk^LP + gate
  // de) and dG (dG_part from G1s, four terms added by the B9 kernel), hence dg; and possibly de (hence db,
  // dbeta) in the last bits through u0 = (beta | w) v by mul.rn (rung 14's note). Bounds: rung 14's test's
  // (5e-4 where stored in bf16: dk and the gate gradients with bf16 gates; 2e-5 in float32), relative to
  // max(rms(rung 8), rms of rung 8's dq, dk, dv); rung 14 measured dk 3.7e-5, dg 2.9e-5 and dbeta, db bit
  // for bit under them (RESULTS.md Status). A dropped or misplaced term moves a gradient by O(1) of its
  // size (make_mutants.py's v16 group). Cases: rung 9's bit test's (K = 36 V = 20, K = 18 V = 22, K = 100
  // V = 200, packed ragged batches, log-decays at -30 / -1000 and 0, initial states) and K = 128 V = 20
  // (two K slabs) with extreme gates; float32 and bf16 gates. The worst ratios are printed under
  // LINATTN_CUDA_BACKWARD_REPORT ("v16 vs v8 worst ...").
  std::vector<Case> cases = rung9_bit_cases();
  cases.push_back(fixed_case(1, 131, 2, 128, 20, GateMode::extreme, true, 37));
  check_split_near_v8(cuda::BwdVersion::v16_b9one, cases, "", /*require_dg_differs=*/true);
}

TEST_CASE("CUDA v16 one B9 kernel chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v16_b9one);
}

TEST_CASE("CUDA v17 hybrid products chunked backward equals the float64 reference backward for every operator in bfloat16") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::f32, cuda::BwdVersion::v17_hybrid);
}

TEST_CASE("CUDA v17 hybrid products chunked backward with bfloat16 gates equals the reference backward on the rounded gates") {
  SKIP_WITHOUT_GPU();
  prop_matches_reference(DType::bf16, DType::bf16, cuda::BwdVersion::v17_hybrid);
}

TEST_CASE("CUDA v17 hybrid products chunked backward outside rung 3 range runs rung 2 bit for bit") {
  SKIP_WITHOUT_GPU();
  check_outside_range_is_rung2(cuda::BwdVersion::v17_hybrid);
}

TEST_CASE("CUDA v17 hybrid products keep every gradient within rung 3 bounds on rung 15 failing cases and fixed cases") {
  SKIP_WITHOUT_GPU();
  // Rung 15's fixed cases, and the cases its properties shrank to on the H200 (session 10 call 1: T = 2
  // K = 16 V = 2 and T = 1 K = 41 V = 10, gates extreme, no initial state, no dht, seeds 1 and 537651;
  // rung 15's dk 1.5-1.9x and KDA dbeta 3x their bounds there) and seed 121 of the latter shape (where
  // bench/models/bwd_v17_hybrid_model.py, on the generator's own inputs, puts DeltaNet's and GDN's dbeta
  // at 4.1x its bound if du0 drops dv_new's lo and dk at 1.6-2.8x if dP drops v_new's lo; rung 17 at
  // <= 0.45x on these small cases), both gate dtypes, every operator:
  // rung 17 within rung 3's bounds against the float64 reference; its ratios printed next to rungs 15,
  // 13 and 8 (LINATTN_CUDA_BACKWARD_REPORT), and rung 15 required to leave a bound on some case for every operator. Wiring: for every operator rung
  // 17's dk differs from both rung 15's and that of the rung whose kernels it runs with lo kept (13 for
  // DeltaNet and GDN, 8 for KDA and GDN2) on some case (its own kernels ran, neither the hi + lo nor the
  // hi-only ones by a slip).
  struct Fixed {
    Case c;
    bool dht;
  };
  const std::vector<Fixed> cases = {{fixed_case(1, 2, 1, 16, 2, GateMode::extreme, false, 1), false},
                                    {fixed_case(1, 1, 1, 41, 10, GateMode::extreme, false, 537651), false},
                                    {fixed_case(1, 1, 1, 41, 10, GateMode::extreme, false, 121), false},
                                    {fixed_case(1, 150, 2, 36, 20, GateMode::random, true, 1501), true},
                                    {fixed_case(1, 130, 1, 100, 200, GateMode::mixed, true, 1502), true},
                                    {fixed_case(1, 100, 2, 48, 40, GateMode::random, true, 1503, {0, 7, 70, 100}), true},
                                    {fixed_case(1, 150, 2, 64, 64, GateMode::zero, true, 1504), true},
                                    {fixed_case(1, 150, 2, 64, 64, GateMode::extreme, true, 1505), true}};
  std::map<std::string, std::array<double, 4>> worst;  // per operator and gradient: v17, v15, v13, v8
  std::map<Op, std::array<bool, 2>> differs;           // dk differs from v13's (KDA, GDN2: v8's), v15's
  std::map<Op, bool> v15_out;                          // rung 15 exceeds a bound somewhere (session 10: all four)
  for (const Fixed& f : cases)
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : kOps) {
        BwdCase b;
        b.c = f.c, b.with_dht = f.dht;
        const DevProblem d = as_device_sees(make_bwd_problem(op, b), DType::bf16, gdt);
        const auto want = reference_backward(d);
        const auto y17 = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v17_hybrid);
        const auto y15 = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v15_hionly);
        const auto y13 = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v13_g1g2);
        const auto y8 = cuda_backward(d, DType::bf16, gdt, cuda::BwdVersion::v8_wide);
        const auto e17 = compare_grads(y17, want), e15 = compare_grads(y15, want);
        const auto e13 = compare_grads(y13, want), e8 = compare_grads(y8, want);
        INFO("bwd_v17_hybrid " << ref::op_name(op) << " gates " << dname(gdt) << " " << b << ": " << describe(e17));
        for (const GradErr& e : e17) CHECK(within(e, DType::bf16, gdt, cuda::BwdVersion::v17_hybrid, f.c.K));
        for (const GradErr& e : e15) v15_out[op] = v15_out[op] || !within(e, DType::bf16, gdt, cuda::BwdVersion::v15_hionly, f.c.K);
        for (std::size_t i = 0; i < e17.size(); ++i) {
          auto& w = worst[std::string(ref::op_name(op)) + " " + e17[i].name];
          w[0] = std::max(w[0], e17[i].ratio()), w[1] = std::max(w[1], e15[i].ratio());
          w[2] = std::max(w[2], e13[i].ratio()), w[3] = std::max(w[3], e8[i].ratio());
        }
        REQUIRE(y17.dk.numel() == y13.dk.numel());
        REQUIRE(y17.dk.numel() == y15.dk.numel());
        const auto& base = (op == Op::kda || op == Op::gdn2) ? y8 : y13;
        REQUIRE(y17.dk.numel() == base.dk.numel());
        auto& df = differs[op];
        df[0] = df[0] || std::memcmp(y17.dk.data(), base.dk.data(), sizeof(float) * y17.dk.numel()) != 0;
        df[1] = df[1] || std::memcmp(y17.dk.data(), y15.dk.data(), sizeof(float) * y17.dk.numel()) != 0;
      }
  for (Op op : kOps) {
    INFO(ref::op_name(op) << ": rung 17's dk differs from rung 13's (KDA, GDN2: rung 8's) / rung 15's on some case");
    CHECK(differs[op][0]);
    CHECK(differs[op][1]);
    // The cases see what rung 17's two lo operands are for: with every product hi only (rung 15) some
    // gradient leaves rung 3's bounds (on the H200, session 10 calls 3-4: worst dk 0.052 DeltaNet, 0.047
    // GDN, 0.029 KDA, 0.017 GDN2; dbeta 0.083 DeltaNet, 0.060 KDA; bounds 1e-2 and 2e-2).
    INFO(ref::op_name(op) << ": rung 15 (hi only) leaves rung 3's bounds on some case");
    CHECK(v15_out[op]);
  }
  if (std::getenv("LINATTN_CUDA_BACKWARD_REPORT"))
    for (const auto& [key, w] : worst)
      std::cout << "v17 fixed cases worst err / max(rms, floor) " << key << ": v17 " << w[0] << "  v15 " << w[1]
                << "  v13 " << w[2] << "  v8 " << w[3] << "\n";
}

namespace {
/// review9 (session 9): shapes the v11 / v12 / v13 tests above do not reach, for rung 13 as `best`.
///   K = 127, V = 129, H = 3, packed: an odd K past 64 with many rows per block, so dk's bf16 pairs
///     (st_bf_pair) alternate between the 4-byte and the per-element path row by row (H K odd; the
///     bit tests' only odd K, 17, has T = 1: one row per block); G1' and G2''s second K slab holds 63
///     channels, the last pair one; V = 129: three V slabs, the last one column, dbeta's V > 128 loop;
///   K = V = 16, H = 1: the smallest K of the range (two k octets per row, one slab);
///   K = 128, V = 256, T = 100: G2''s dG buffer full ([64][128]), four V slabs, 16-byte k and v loads;
///   K = 65, V = 1: a second K slab of one channel (G1' block with 63 idle columns), V = 1 everywhere;
///   41 packed sequences of 0 to 9 tokens and one of 70, H = 3, extreme gates: many one-chunk blocks
///     with Lc = 1 .. 9 (partial rows in every product, dbeta's four-row batches mostly empty).
std::vector<Case> review9_edge_cases() {
  std::vector<index_t> cu = {0};
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<int> len(0, 9);
  for (int s = 0; s < 40; ++s) cu.push_back(cu.back() + len(rng));
  cu.push_back(cu.back() + 70);
  const index_t T = cu.back();
  return {fixed_case(1, 100, 3, 127, 129, GateMode::random, true, 51, {0, 7, 70, 100}),
          fixed_case(2, 130, 1, 16, 16, GateMode::random, true, 52),
          fixed_case(1, 100, 1, 128, 256, GateMode::mixed, true, 53),
          fixed_case(1, 100, 2, 65, 1, GateMode::random, false, 54),
          fixed_case(1, T, 3, 40, 24, GateMode::extreme, true, 55, cu)};
}
}  // namespace

TEST_CASE("CUDA v11 v12 and v13 gradients equal v10 gradients bit for bit at odd and extreme head sizes and on many short sequences") {
  SKIP_WITHOUT_GPU();
  // Rungs 11, 12 and 13 compute rung 10's values by design (their bit tests above); these cases add
  // shapes those tests do not cover (review9_edge_cases). Every gradient finite as well: the host API
  // fills the gradient buffers with NaN, so an element no kernel writes fails.
  const std::vector<Case> cases = review9_edge_cases();
  for (cuda::BwdVersion ver : {cuda::BwdVersion::v11_wyfast, cuda::BwdVersion::v12_g1slab, cuda::BwdVersion::v13_g1g2}) {
    INFO(cuda::bwd_version_name(ver));
    check_rungs_agree(cuda::BwdVersion::v10_split, ver, cases, kOps, 0, /*require_finite=*/true);
  }
}

TEST_CASE("CUDA v13 chunked backward equals the float64 reference backward at odd and extreme head sizes and on many short sequences") {
  SKIP_WITHOUT_GPU();
  // Bit equality with rung 10 (the test above) cannot see an error rung 10 shares; this holds rung 13
  // and `best` (rung 18 in sessions 11-17, rung 19 since session 18) to the reference with rung 3's bounds on the same cases, every
  // operator (KDA, GDN2: rung 8 inside rung 13), both gate dtypes.
  for (const Case& cs : review9_edge_cases())
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : kOps) {
        BwdCase b;
        b.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, b), DType::bf16, gdt);
        const auto want = reference_backward(d);
        for (cuda::BwdVersion ver : {cuda::BwdVersion::v13_g1g2, cuda::BwdVersion::best}) {
          const auto errs = compare_grads(cuda_backward(d, DType::bf16, gdt, ver), want);
          INFO(cuda::bwd_version_name(ver) << " " << ref::op_name(op) << " gates " << dname(gdt) << " " << cs << ": "
                                           << describe(errs));
          for (const GradErr& e : errs) CHECK(within(e, DType::bf16, gdt, cuda::BwdVersion::v13_g1g2, cs.K));
        }
      }
}

namespace {
/// review10 (session 9, before rungs 15 and 16 first run): review9_edge_cases (odd K = 127 with V = 129
/// and H = 3, packed; K = V = 16; K = 128 V = 256; K = 65 V = 1; 41 short sequences with extreme gates),
/// which no rung 15 or 16 test reaches, and K = 120 V = 255, H = 1, sequences of 1, 128 and 11 tokens:
/// V odd past 128 (G2' / G2s stage their V slabs by items, the last of 63 columns; KDA dbeta's V > 128
/// loop in the B9 kernel), K a multiple of 8 but not of 64 (a second K slab of 56 channels in G1' / G1s
/// and in b9_levels), two full chunks of one sequence next to a one-token sequence.
std::vector<Case> review10_cases() {
  std::vector<Case> cases = review9_edge_cases();
  cases.push_back(fixed_case(1, 140, 1, 120, 255, GateMode::mixed, true, 61, {0, 1, 129, 140}));
  return cases;
}
}  // namespace

TEST_CASE("CUDA v15 and v16 chunked backward equal the float64 reference backward at odd and extreme head sizes and on many short sequences") {
  SKIP_WITHOUT_GPU();
  // Rungs 15 (hi-only G1', G2' and rung 8's kernel) and 16 (G1s, G2s, the B9 kernel for KDA and GDN2;
  // rung 13 for DeltaNet and GDN) against the float64 reference with rung 3's bounds on review10_cases,
  // every operator, both gate dtypes (the host API fills the gradient buffers with NaN: an element no
  // kernel writes fails as an infinite error).
  for (const Case& cs : review10_cases())
    for (DType gdt : {DType::f32, DType::bf16})
      for (Op op : kOps) {
        BwdCase b;
        b.c = cs;
        const DevProblem d = as_device_sees(make_bwd_problem(op, b), DType::bf16, gdt);
        const auto want = reference_backward(d);
        for (cuda::BwdVersion ver : {cuda::BwdVersion::v15_hionly, cuda::BwdVersion::v16_b9one}) {
          const auto errs = compare_grads(cuda_backward(d, DType::bf16, gdt, ver), want);
          INFO(cuda::bwd_version_name(ver) << " " << ref::op_name(op) << " gates " << dname(gdt) << " " << cs << ": "
                                           << describe(errs));
          for (const GradErr& e : errs) CHECK(within(e, DType::bf16, gdt, ver, cs.K));
        }
      }
}

TEST_CASE("CUDA v16 one B9 kernel backward is rung 8 up to float32 summation order at odd and extreme head sizes and on many short sequences") {
  SKIP_WITHOUT_GPU();
  // The rung 8 comparison of "CUDA v16 one B9 kernel backward is rung 8 up to float32 summation order for
  // KDA and GDN2" (dq, dv, dw, dh0 bit for bit; dk, dg, db, dbeta within its bounds; finite) on
  // review10_cases: odd and partial K slabs in G1s and b9_levels (pairs on st_pair_w), V = 1 and V > 128,
  // Lc = 1 .. 9 blocks, H = 3 (the hand-over indexed by chunk and head).
  check_split_near_v8(cuda::BwdVersion::v16_b9one, review10_cases(), "(review10 cases) ", /*require_dg_differs=*/true);
}

// ---------------------------------------------------------------------------------------------
// Edge cases, each for every operator and both input types.
// ---------------------------------------------------------------------------------------------

TEST_CASE("CUDA chunked backward is exact at the tuned and the largest head sizes up to K = V = 256") {
  SKIP_WITHOUT_GPU();
  const index_t sizes[][2] = {{64, 64}, {128, 128}, {256, 256}, {200, 129}, {1, 256}, {256, 3}, {48, 80}};
  std::uint64_t seed = 11;
  for (const auto& kv : sizes) check_case(fixed_case(1, 130, 2, kv[0], kv[1], GateMode::random, true, seed++));
}

TEST_CASE("CUDA chunked backward at T = 1 equals one step of the reference backward") {
  SKIP_WITHOUT_GPU();
  check_case(fixed_case(3, 1, 2, 64, 64, GateMode::random, true, 5));
  check_case(fixed_case(1, 1, 1, 128, 128, GateMode::mixed, false, 6), /*with_dht=*/false);
}

TEST_CASE("CUDA chunked backward with ragged last chunks equals the reference for lengths around 64") {
  SKIP_WITHOUT_GPU();
  std::uint64_t seed = 100;
  for (index_t T : {63, 64, 65, 127, 128, 129, 200})
    check_case(fixed_case(2, T, 2, 64, 48, GateMode::random, true, seed++));
}

TEST_CASE("CUDA chunked backward stays finite and exact with log-decays of 0 and -1000 and gates of 0 and 1") {
  SKIP_WITHOUT_GPU();
  std::uint64_t seed = 300;
  for (GateMode gm : {GateMode::zero, GateMode::extreme, GateMode::mixed})
    check_case(fixed_case(1, 150, 2, 64, 64, gm, true, seed++));
}

TEST_CASE("CUDA chunked backward of a packed batch of many short sequences equals the reference") {
  SKIP_WITHOUT_GPU();
  std::vector<index_t> cu = {0};
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> len(0, 9);
  for (int s = 0; s < 60; ++s) cu.push_back(cu.back() + len(rng));
  cu.push_back(cu.back() + 70);  // one sequence longer than a chunk
  cu.push_back(cu.back());       // and an empty one at the end
  const index_t T = cu.back();
  check_case(fixed_case(1, T, 2, 64, 64, GateMode::random, true, 17, cu));
  check_case(fixed_case(1, T, 1, 32, 40, GateMode::mixed, false, 18, cu), /*with_dht=*/false);
}

TEST_CASE("CUDA chunked backward of 66 sequences of two heads with wide value tiles equals the reference") {
  SKIP_WITHOUT_GPU();
  // N * H = 132 blocks per 64 value columns: the recurrences of rung 3 take 64-column tiles (BV = 64)
  // here, 32 (or the forward's 16) in every smaller case.
  check_case(fixed_case(66, 70, 2, 64, 64, GateMode::random, true, 19));
}

TEST_CASE("CUDA chunked backward at K = V = 128 with 64 and 32 column value tiles and at V up to 256 equals the reference") {
  SKIP_WITHOUT_GPU();
  // The benchmark's head size on the recurrences' wide tiles: N H = 132 gives BV = 64 in both
  // recurrences of rung 3 (v2_state<128, 64, kBwd>, bwd3_dstates<128, 64>), N H = 34 gives 32;
  // every other case runs BV = 16 / 32 or K = 64. Then V = 256 and 200 with K inside rung 3's
  // range (the head-size test's V > 128 cases have K outside it and run rung 2).
  check_case(fixed_case(66, 40, 2, 128, 128, GateMode::random, true, 23));
  check_case(fixed_case(17, 40, 2, 128, 128, GateMode::random, true, 24));
  check_case(fixed_case(1, 130, 2, 128, 256, GateMode::random, true, 25));
  check_case(fixed_case(1, 130, 2, 100, 200, GateMode::random, true, 26));
}

TEST_CASE("CUDA chunked backward is deterministic: two runs give bitwise equal gradients") {
  SKIP_WITHOUT_GPU();
  for (cuda::BwdVersion ver : kRungs)
  for (Op op : kOps) {
    BwdCase b;
    b.c = fixed_case(2, 300, 4, 128, 128, GateMode::random, true, 31);
    const DevProblem d = as_device_sees(make_bwd_problem(op, b), DType::bf16, DType::f32);
    const auto x = cuda_backward(d, DType::bf16, DType::f32, ver);
    const auto y = cuda_backward(d, DType::bf16, DType::f32, ver);
    INFO(cuda::bwd_version_name(ver) << " " << ref::op_name(op));
    check_same_grads(x, y);
  }
}

// ---------------------------------------------------------------------------------------------
// Argument checks (no GPU needed: they fail before any device work).
// ---------------------------------------------------------------------------------------------

TEST_CASE("CUDA chunked backward rejects bad arguments with a linattn Error naming the argument") {
  const Problem<float> p = cast_problem<float>(make_problem<double>(Op::kda, fixed_case(1, 10, 2, 8, 8, GateMode::random, false, 1)));
  const Tensor<float> do_({1, 10, 2, 8});
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of([&] {
               Tensor<float> q({1, 10, 2, 257}), k({1, 10, 2, 257}), g({1, 10, 2, 257});
               cuda::chunk_kda_backward(q, k, p.v, g, p.gates.beta, do_, {});
             }),
             Contains("'q.shape[3] (K)'") && Contains("K <= 256") && Contains("257"));
  CHECK_THAT(error_of([&] {
               Tensor<float> bad({1, 10, 2, 7});
               cuda::chunk_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, bad, {});
             }),
             Contains("chunk_kda_backward") && Contains("'do'") && Contains("[1, 10, 2, 7]"));
  CHECK_THAT(error_of([&] {
               Tensor<float> bad = do_.clone();
               bad.data()[3] = NAN;
               cuda::chunk_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, bad, {});
             }),
             Contains("'do'"));
  CHECK_THAT(error_of([&] {
               Tensor<float> dht({1, 2, 8, 9});
               cuda::chunk_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, do_, dht);
             }),
             Contains("'dht'") && Contains("[1, 2, 8, 9]"));
  CHECK_THAT(error_of([&] { cuda::chunk_backward(Op::linear_attn, p.q, p.k, p.v, {}, do_, {}, {}); }),
             Contains("'op'") && Contains("linear_attn"));
  CHECK_THAT(error_of([&] {
               Tensor<float> g = p.gates.g.clone();
               g.data()[5] = 0.5f;  // a log-decay must be <= 0
               cuda::chunk_kda_backward(p.q, p.k, p.v, g, p.gates.beta, do_, {});
             }),
             Contains("'g'") && Contains("0.5"));
  CHECK_THAT(error_of([&] {
               ref::RecurrentOptions<float> opt;
               opt.return_trace = true;
               cuda::chunk_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, do_, {}, opt);
             }),
             Contains("'return_trace'"));
  CHECK_THAT(error_of([&] {
               cuda::DeviceBwdArgs a;
               a.fwd.op = Op::kda;
               a.fwd.B = 1, a.fwd.T = 4, a.fwd.H = 1, a.fwd.K = 4, a.fwd.V = 4;
               float x = 0;
               a.fwd.q = a.fwd.k = a.fwd.v = a.fwd.g = a.fwd.beta = &x;
               a.fwd.scale = 1;
               a.do_ = a.dq = a.dk = a.dv = a.dbeta = &x;
               a.dh0 = &x;
               cuda::backward_device(a);  // dg missing
             }),
             Contains("backward_device") && Contains("'dg'"));
}
