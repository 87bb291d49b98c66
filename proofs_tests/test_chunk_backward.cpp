// proofs_tests/test_chunk_backward.cpp -- the chunked CPU backward (optimized/cpu/chunk_backward.hpp)
// equals the reference backward (reference/recurrent_backward.hpp, itself proven by finite
// differences in test_gradcheck_reference.cpp) for DeltaNet, GDN, KDA and GDN2.
//
// Cases (gen_case + make_problem, as for the forward): T from 1 to a few hundred so that the last
// chunk is ragged and several chunks carry the state, chunk sizes 16 / 32 / 64, d_k != d_v and
// non-powers of two (up to 20, so rows span more than one padded vector), gate modes random,
// g = 0 exactly, very negative g and mixtures with exact 0/1 gates, initial states, packed batches
// with empty sequences, with and without a final-state gradient dht, sometimes the in-kernel L2
// normalisation of q and k and a custom scale. The loss is L = <do, o> + <dht, S_T> with random
// do and dht. Every gradient is compared by relative RMS error (generators.hpp `compare`).
//
// Trace cotangents (CLER / CLER-H): with random dwritten and dv_bar the loss is
// L = <do, o> + <dht, S_T> + <dwritten, written> + <dv_bar, v_bar>; there is no reference backward
// for it, so the float64 chunked gradients are checked against central differences of L computed
// with the REFERENCE forward and its trace (ref::naive_recurrent_<op>, return_trace), one random
// direction per input tensor; float32 against the float64 chunked result; zero cotangents against
// the call without them, exactly.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "generators.hpp"
#include "optimized/cpu/chunk_backward.hpp"
#include "optimized/cpu/simd_level.hpp"
#include "reference/backward.hpp"

using namespace linattn;
using namespace linattn::testing;
using ref::Op;

namespace {

/// Bounds on rms(error) / max(rms(wanted), floor) (expect_grads_close), measured with
/// LINATTN_CHUNK_BACKWARD_REPORT=1 over RC_PARAMS seeds 1-5 and the default seed (100 cases each):
/// worst float64 6e-15, worst float32 8.7e-6 (dk); the bounds leave a margin of 100x and 10x.
constexpr double kTol64 = 1e-12;
constexpr double kTol32 = 1e-4;
/// float32 after a gate of -1000, with the reference on the same float32-rounded inputs: worst
/// 1.8e-6 (dg; others <= 4.5e-7) over 3,000 cases; a difference of cumulative sums gives up to 7e-5.
constexpr double kTolGate32 = 1e-5;

/// The structure of one backward case: the forward case plus chunk size, dht, l2norm, scale.
struct BwdCase {
  Case c;
  index_t chunk = 64;
  bool with_dht = true, l2norm = false, custom_scale = false;
};

std::ostream& operator<<(std::ostream& os, const BwdCase& b) {
  return os << b.c << " chunk=" << b.chunk << " dht=" << b.with_dht << " l2norm=" << b.l2norm
            << " scale=" << (b.custom_scale ? "0.7" : "default");
}

/// T is mostly short (1..70: one to a few chunks) and sometimes long (up to 300: many chunks).
rc::Gen<BwdCase> gen_bwd_case() {
  return rc::gen::exec([] {
    BwdCase b;
    CaseLimits lim;
    lim.max_B = 2, lim.max_H = 2, lim.max_K = 20, lim.max_V = 20;
    lim.max_T = *rc::gen::weightedElement<index_t>({{4, 70}, {1, 300}});
    b.c = *gen_case(lim);
    b.chunk = *rc::gen::element<index_t>(16, 32, 64);
    b.with_dht = *rc::gen::weightedElement<bool>({{3, true}, {1, false}});
    b.l2norm = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    b.custom_scale = *rc::gen::arbitrary<bool>();
    return b;
  });
}

/// A full backward problem in float64: forward inputs, do, dht.
struct BwdProblem {
  Problem<double> p;
  Tensor<double> do_, dht;
};

BwdProblem make_bwd_problem(Op op, const BwdCase& b) {
  BwdProblem r;
  r.p = make_problem<double>(op, b.c, /*unit_keys=*/!b.l2norm);
  r.p.opt.use_qk_l2norm = b.l2norm;
  r.p.opt.output_final_state = false;
  if (b.custom_scale) r.p.opt.scale = 0.7;
  std::mt19937_64 rng(b.c.seed ^ 0x5851f42d4c957f2dULL);
  std::normal_distribution<double> nd(0.0, 1.0);
  r.do_ = Tensor<double>({b.c.B, b.c.T, b.c.H, b.c.V});
  for (double& x : r.do_) x = nd(rng);
  if (b.with_dht) {
    r.dht = Tensor<double>({r.p.N, b.c.H, b.c.K, b.c.V});
    for (double& x : r.dht) x = nd(rng);
  }
  return r;
}

ref::RecurrentGrads<double> reference_backward(const BwdProblem& b) {
  const Problem<double>& p = b.p;
  switch (p.op) {
    case Op::delta_rule:
      return ref::naive_recurrent_delta_rule_backward(p.q, p.k, p.v, p.gates.beta, b.do_, b.dht,
                                                      p.opt);
    case Op::gated_delta_rule:
      return ref::naive_recurrent_gated_delta_rule_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta,
                                                            b.do_, b.dht, p.opt);
    case Op::kda:
      return ref::naive_recurrent_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, b.do_,
                                               b.dht, p.opt);
    case Op::gdn2:
      return ref::naive_recurrent_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b, p.gates.w,
                                                b.do_, b.dht, p.opt);
    default: break;
  }
  return {};
}

template <class T>
cpu::ChunkOptions<T> chunk_options(const RecurrentOptions<T>& o, index_t chunk, int threads = 0) {
  cpu::ChunkOptions<T> c;
  static_cast<RecurrentOptions<T>&>(c) = o;
  c.chunk_size = chunk;
  c.num_threads = threads;
  return c;
}

/// The trace cotangents dL/dwritten and dL/dv_bar ([B, T, H, V] each; undefined = 0).
struct TraceCot {
  Tensor<double> dwritten, dv_bar;
};

/// The chunked backward of a problem in precision T, through the operator's own entry point
/// (with the trace cotangents `tc`, if any).
template <class T>
ref::RecurrentGrads<T> chunked_backward(const BwdProblem& b, index_t chunk, int threads = 0,
                                        const TraceCot& tc = {}) {
  const Problem<T> p = cast_problem<T>(b.p);
  const Tensor<T> do_ = cast<T>(b.do_), dht = cast<T>(b.dht);
  const Tensor<T> dwr = cast<T>(tc.dwritten), dvb = cast<T>(tc.dv_bar);
  const cpu::ChunkOptions<T> o = chunk_options(p.opt, chunk, threads);
  switch (p.op) {
    case Op::delta_rule:
      return cpu::chunk_delta_rule_backward(p.q, p.k, p.v, p.gates.beta, do_, dht, o, dwr, dvb);
    case Op::gated_delta_rule:
      return cpu::chunk_gated_delta_rule_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, do_, dht,
                                                  o, dwr, dvb);
    case Op::kda:
      return cpu::chunk_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, do_, dht, o, dwr, dvb);
    case Op::gdn2:
      return cpu::chunk_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b, p.gates.w, do_, dht, o,
                                      dwr, dvb);
    default: break;
  }
  return {};
}

/// The largest errors seen per gradient (printed at the end of a TEST_CASE when
/// LINATTN_CHUNK_BACKWARD_REPORT is set), to measure the bounds stated above.
struct Worst {
  std::map<std::string, double> by_grad;
  void print(const std::string& title) const {
    if (!std::getenv("LINATTN_CHUNK_BACKWARD_REPORT")) return;
    std::cout << title << " (worst error / max(rms of the wanted gradient, floor)):";
    for (const auto& [name, w] : by_grad) std::cout << "  " << name << " " << w;
    std::cout << "\n";
  }
};

/// RMS of the difference, and RMS of `want`.
template <class T>
std::pair<double, double> rms_err(const Tensor<T>& got, const Tensor<double>& want) {
  double num = 0, den = 0;
  for (index_t i = 0; i < want.numel(); ++i) {
    const double g = static_cast<double>(got.data()[i]), w = want.data()[i];
    num += std::isfinite(g) ? (g - w) * (g - w) : INFINITY;
    den += w * w;
  }
  const double n = want.numel() ? double(want.numel()) : 1.0;
  return {std::sqrt(num / n), std::sqrt(den / n)};
}

/// Every gradient the operator has: defined in both or in neither, of the same shape, and
///   rms(got - want) <= tol max(rms(want), floor),  floor = the RMS of dq, dk and dv together.
/// The floor matters where a gradient is legitimately tiny next to the others (dg with g = -30:
/// the true dg is ~1e-15, while the chunked form sums products of size |q dq| ~ |k dk|, whose
/// rounding the floor measures; docs/derivation-backward.md, "Chunked backward", explains).
template <class T>
void expect_grads_close(const ref::RecurrentGrads<T>& got, const ref::RecurrentGrads<double>& want,
                        double tol, Worst& worst) {
  const std::vector<std::tuple<const char*, const Tensor<T>*, const Tensor<double>*>> all = {
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
  for (const auto& [name, g, w] : all) {
    RC_ASSERT(g->defined() == w->defined());
    if (!w->defined()) continue;
    RC_ASSERT(g->shape() == w->shape());
    const auto [err, scale] = rms_err(*g, *w);
    const double ref_scale = std::max(scale, floor);
    RC_LOG() << name << ": rms error " << err << ", rms " << scale << ", floor " << floor << " ("
             << compare(*g, *w).str() << ")\n";
    RC_ASSERT(err <= tol * ref_scale);
    if (ref_scale > 0) worst.by_grad[name] = std::max(worst.by_grad[name], err / ref_scale);
  }
}

void double_property(Op op) {
  Worst worst;
  rc::prop("chunked = reference", [&] {
    const BwdCase b = *gen_bwd_case();
    RC_LOG() << ref::op_name(op) << " " << b << "\n";
    const BwdProblem pb = make_bwd_problem(op, b);
    expect_grads_close(chunked_backward<double>(pb, b.chunk), reference_backward(pb), kTol64, worst);
  });
  worst.print(std::string(ref::op_name(op)) + " float64");
}

}  // namespace

TEST_CASE("Chunked DeltaNet backward equals the reference backward in float64") {
  double_property(Op::delta_rule);
}

TEST_CASE("Chunked GDN backward equals the reference backward in float64") {
  double_property(Op::gated_delta_rule);
}

TEST_CASE("Chunked KDA backward equals the reference backward in float64") {
  double_property(Op::kda);
}

TEST_CASE("Chunked GDN2 backward equals the reference backward in float64") {
  double_property(Op::gdn2);
}

TEST_CASE("Chunked backward in float32 is within relative RMS 1e-4 of the float64 reference backward") {
  Worst worst;
  rc::prop("float32 chunked ~ float64 reference", [&] {
    const Op op = *rc::gen::element(Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2);
    const BwdCase b = *gen_bwd_case();
    RC_LOG() << ref::op_name(op) << " " << b << "\n";
    const BwdProblem pb = make_bwd_problem(op, b);
    expect_grads_close(chunked_backward<float>(pb, b.chunk), reference_backward(pb), kTol32, worst);
  });
  worst.print("float32");
}

TEST_CASE("Chunked backward equals the reference backward when V spans several column panels") {
  // The forward's state panels are 32 doubles / 64 floats wide and the other properties draw
  // V <= 20: here V is 33 to 140, in float64 and float32, for every operator.
  Worst worst;
  rc::prop("chunked = reference with V in [33, 140]", [&] {
    const Op op = *rc::gen::element(Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2);
    BwdCase b;
    CaseLimits lim;
    lim.max_B = 2, lim.max_H = 2, lim.max_K = 9, lim.max_V = 1, lim.max_T = 40;
    b.c = *gen_case(lim);
    b.c.V = *rc::gen::inRange<index_t>(33, 141);
    b.chunk = *rc::gen::element<index_t>(16, 32, 64);
    b.with_dht = *rc::gen::arbitrary<bool>();
    b.l2norm = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    RC_LOG() << ref::op_name(op) << " " << b << "\n";
    const BwdProblem pb = make_bwd_problem(op, b);
    const ref::RecurrentGrads<double> want = reference_backward(pb);
    expect_grads_close(chunked_backward<double>(pb, b.chunk), want, kTol64, worst);
    expect_grads_close(chunked_backward<float>(pb, b.chunk), want, kTol32, worst);
  });
  worst.print("wide V");
}

TEST_CASE("Chunked float32 backward keeps its accuracy after a log-gate of -1000 inside a chunk") {
  // As the forward's property: the backward's decays exp(G_last - G_i) and exp(G_i - G_j) are sums
  // of the gates in between, never differences of cumulative sums, which cancel in float32 after a
  // gate of -1000 (random gates rarely build such a sum inside one chunk).
  Worst worst;
  rc::prop("float32 chunked ~ float64 reference with g = -1000 early in the chunk", [&] {
    const Op op = *rc::gen::element(Op::gated_delta_rule, Op::kda, Op::gdn2);
    BwdCase b;
    CaseLimits lim;
    lim.max_B = 2, lim.max_H = 2, lim.max_K = 9, lim.max_V = 9, lim.allow_packed = false;
    b.c = *gen_case(lim);
    b.c.T = *rc::gen::inRange<index_t>(16, 65);
    b.c.K = *rc::gen::inRange<index_t>(4, 10), b.c.V = *rc::gen::inRange<index_t>(4, 10);  // K = V = 1: ill-conditioned
    b.c.gates = GateMode::random;
    b.chunk = 64;
    b.with_dht = *rc::gen::arbitrary<bool>();
    const index_t t0 = *rc::gen::inRange<index_t>(0, b.c.T / 4);
    BwdProblem pb = make_bwd_problem(op, b);
    set_token_log_gate(pb.p.gates.g, t0, -1000.0);
    RC_LOG() << ref::op_name(op) << " " << b << " t0=" << t0 << "\n";
    // the float64 reference of the float32-rounded problem: only the kernel's own rounding counts
    BwdProblem pr = pb;
    pr.p = cast_problem<double>(cast_problem<float>(pb.p));
    pr.do_ = cast<double>(cast<float>(pb.do_)), pr.dht = cast<double>(cast<float>(pb.dht));
    expect_grads_close(chunked_backward<float>(pb, b.chunk), reference_backward(pr), kTolGate32, worst);
  });
  worst.print("float32 after g = -1000");
}

TEST_CASE("Every compiled instruction-set version of the chunked backward equals the reference backward") {
  // baseline (SSE2), AVX2 and AVX-512 differ in vector width, tile shapes and the order of sums;
  // each must equal the reference (levels this CPU lacks are skipped)
  const cpu::SimdLevel best = cpu::best_simd_level();
  Worst worst;
  rc::prop("each SIMD level == reference (float64)", [&] {
    const Op op = *rc::gen::element(Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2);
    const BwdCase b = *gen_bwd_case();
    const BwdProblem pb = make_bwd_problem(op, b);
    const auto want = reference_backward(pb);
    for (cpu::SimdLevel l : {cpu::SimdLevel::baseline, cpu::SimdLevel::avx2, cpu::SimdLevel::avx512}) {
      if (static_cast<int>(l) > static_cast<int>(best)) continue;
      RC_LOG() << ref::op_name(op) << " " << b << " level " << cpu::simd_level_name(l) << "\n";
      cpu::set_simd_level(l);
      const auto got = chunked_backward<double>(pb, b.chunk);
      cpu::set_simd_level(cpu::SimdLevel::automatic);
      expect_grads_close(got, want, kTol64, worst);
    }
  });
  worst.print("every SIMD level, float64");
}

TEST_CASE("Chunked backward gradients do not depend on the number of threads") {
  rc::prop("1 thread = 3 threads, bit for bit", [] {
    const Op op = *rc::gen::element(Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2);
    BwdCase b = *gen_bwd_case();
    RC_LOG() << ref::op_name(op) << " " << b << "\n";
    const BwdProblem pb = make_bwd_problem(op, b);
    const auto one = chunked_backward<float>(pb, b.chunk, 1), three = chunked_backward<float>(pb, b.chunk, 3);
    for (const auto& [x, y] : {std::pair{&one.dq, &three.dq}, {&one.dk, &three.dk}, {&one.dv, &three.dv},
                               {&one.dg, &three.dg}, {&one.dbeta, &three.dbeta}, {&one.db, &three.db},
                               {&one.dw, &three.dw}, {&one.dh0, &three.dh0}}) {
      RC_ASSERT(x->defined() == y->defined());
      for (index_t i = 0; i < x->numel(); ++i) RC_ASSERT(x->data()[i] == y->data()[i]);
    }
  });
}

namespace {
/// Run `f`, expect a linattn::Error whose message names `fn`, the argument, and says expected/got.
template <class F>
void expect_error(F f, const std::string& fn, const std::string& arg) {
  try {
    f();
  } catch (const Error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find(fn + ":") == 0);
    CHECK(m.find("'" + arg + "'") != std::string::npos);
    CHECK(m.find("expected") != std::string::npos);
    CHECK(m.find("but got") != std::string::npos);
    return;
  }
  FAIL("no linattn::Error from " << fn << " for argument " << arg);
}
}  // namespace

TEST_CASE("Chunked backward rejects malformed do dht chunk_size and forward inputs naming the argument") {
  Case c;
  c.B = 1, c.T = 5, c.H = 2, c.K = 3, c.V = 4, c.seed = 7;
  BwdCase b;
  b.c = c;
  const BwdProblem pb = make_bwd_problem(Op::gdn2, b);
  const Problem<double>& p = pb.p;
  cpu::ChunkOptions<double> o = chunk_options(p.opt, 16);
  auto gdn2 = [&](const Tensor<double>& do_, const Tensor<double>& dht, const cpu::ChunkOptions<double>& opt) {
    return cpu::chunk_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b, p.gates.w, do_, dht, opt);
  };
  CHECK_NOTHROW(gdn2(pb.do_, pb.dht, o));
  const std::string fn = "chunk_gdn2_backward";
  expect_error([&] { gdn2(Tensor<double>({1, 5, 2, 3}), pb.dht, o); }, fn, "do");  // V = 4
  expect_error([&] { gdn2(Tensor<double>(), pb.dht, o); }, fn, "do");
  Tensor<double> bad_do = pb.do_.clone();
  bad_do(0, 2, 1, 3) = NAN;
  expect_error([&] { gdn2(bad_do, pb.dht, o); }, fn, "do");
  expect_error([&] { gdn2(pb.do_, Tensor<double>({1, 2, 4, 3}), o); }, fn, "dht");  // K x V swapped
  Tensor<double> bad_dht = pb.dht.clone();
  bad_dht(0, 1, 2, 3) = INFINITY;
  expect_error([&] { gdn2(pb.do_, bad_dht, o); }, fn, "dht");
  cpu::ChunkOptions<double> o48 = o;
  o48.chunk_size = 48;
  expect_error([&] { gdn2(pb.do_, pb.dht, o48); }, fn, "chunk_size");
  cpu::ChunkOptions<double> oneg = o;
  oneg.num_threads = -1;
  expect_error([&] { gdn2(pb.do_, pb.dht, oneg); }, fn, "num_threads");
  // The forward's own checks (ref::validate_recurrent) apply too.
  Tensor<double> g_pos = p.gates.g.clone();
  g_pos(0, 1, 0, 0) = 0.5;
  expect_error([&] {
    cpu::chunk_gdn2_backward(p.q, p.k, p.v, g_pos, p.gates.b, p.gates.w, pb.do_, pb.dht, o);
  }, fn, "g");
  expect_error([&] {
    cpu::chunk_delta_rule_backward(p.q, p.k, p.v, Tensor<double>({1, 5, 2}, 1.5), pb.do_, pb.dht, o);
  }, "chunk_delta_rule_backward", "beta");
  expect_error([&] { cpu::chunk_backward(Op::linear_attn, p.q, p.k, p.v, p.gates, pb.do_, pb.dht, o); },
               "chunk_backward", "op");
}

// ------------------------------------------------------------------------------------------------
// Trace cotangents dwritten and dv_bar (CLER / CLER-H through the chunked core)
// ------------------------------------------------------------------------------------------------

namespace {

/// Bound on the scaled error of one directional derivative (directional_fd_error; five-point
/// differences of the reference forward, h = 2e-5), measured with LINATTN_CHUNK_BACKWARD_REPORT=1
/// over RC_PARAMS seeds 1-3 and the default seed (100 cases per operator each): worst 4.0e-7 (dq,
/// GDN and KDA; the differences' own truncation and rounding: K = 1 with L2-normalised keys is
/// strongly curved), typically 1e-8 to 1e-7. The float32 test's worst was 7.0e-6 (dk) against its
/// 1e-4 bound.
constexpr double kTolFd = 2e-6;
constexpr double kFdStep = 2e-5;

/// Random trace cotangents for a problem; `which`: 1 dwritten only, 2 dv_bar only, 3 both.
TraceCot make_trace_cot(const BwdCase& b, int which) {
  std::mt19937_64 rng(b.c.seed ^ 0x2545f4914f6cdd1dULL);
  std::normal_distribution<double> nd(0.0, 1.0);
  TraceCot tc;
  auto draw = [&] {
    Tensor<double> t({b.c.B, b.c.T, b.c.H, b.c.V});
    for (double& x : t) x = nd(rng);
    return t;
  };
  if (which & 1) tc.dwritten = draw();
  if (which & 2) tc.dv_bar = draw();
  return tc;
}

double dot(const Tensor<double>& a, const Tensor<double>& b) {
  if (!a.defined() || !b.defined()) return 0.0;
  double s = 0;
  for (index_t i = 0; i < a.numel(); ++i) s += a.data()[i] * b.data()[i];
  return s;
}

/// L = <do, o> + <dht, S_T> + <dwritten, written> + <dv_bar, v_bar> by the REFERENCE forward.
double trace_loss(const Problem<double>& p, const BwdProblem& b, const TraceCot& tc) {
  Problem<double> r = p;
  r.opt.return_trace = true;
  r.opt.output_final_state = b.dht.defined();
  const auto out = run_reference(r);
  return dot(b.do_, out.o) + dot(b.dht, out.final_state) + dot(tc.dwritten, out.written) +
         dot(tc.dv_bar, out.v_bar);
}

/// For every input tensor x (q, k, v, g, beta | b, w, the initial state): a random direction u
/// (zero where x is within 1e-3 of a bound of its range, so that x + s u stays valid), the
/// analytic <grad_x, u> against the five-point central difference of s -> L(x + s u). Returns the
/// worst error, scaled by max(|numeric|, 0.01 ||grad_x||, 1e-4 max(|L|, ||(dq, dk, dv)||)) (a
/// random direction's derivative is ~ ||grad_x||: the second floor keeps an unlucky
/// near-orthogonal u from asking for more than that; the third covers the differences' rounding,
/// ~1e-16 |L| / h = 1e-12 |L|, where a gradient is legitimately tiny: dg with g = -1000, dk of a
/// normalised key with K = 1).
double directional_fd_error(const BwdProblem& b, const TraceCot& tc,
                            const ref::RecurrentGrads<double>& gr, std::uint64_t seed,
                            std::map<std::string, double>& worst) {
  const Problem<double>& p = b.p;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  double worst_all = 0, gqkv = 0;
  for (const Tensor<double>* t : {&gr.dq, &gr.dk, &gr.dv})
    for (index_t i = 0; i < t->numel(); ++i) gqkv += t->data()[i] * t->data()[i];
  const double floor = 1e-4 * std::max(std::abs(trace_loss(p, b, tc)), std::sqrt(gqkv));
  auto check = [&](const char* name, const Tensor<double>& x, const Tensor<double>& grad, double lo,
                   double hi, auto set) {
    if (!x.defined()) return;
    RC_ASSERT(grad.defined());
    RC_ASSERT(grad.shape() == x.shape());
    Tensor<double> u(x.shape());
    double an = 0, gn = 0;
    for (index_t i = 0; i < x.numel(); ++i) {
      const double xi = x.data()[i];
      const bool free = xi > lo + 1e-3 && xi < hi - 1e-3;
      u.data()[i] = free ? std::clamp(nd(rng), -3.0, 3.0) : 0.0;
      an += grad.data()[i] * u.data()[i];
      gn += grad.data()[i] * grad.data()[i];
    }
    auto at = [&](double s) {
      Tensor<double> xs = x.clone();
      for (index_t i = 0; i < xs.numel(); ++i) xs.data()[i] += s * u.data()[i];
      Problem<double> ps = p;
      set(ps, xs);
      return trace_loss(ps, b, tc);
    };
    const double h = kFdStep;
    const double num = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h);
    const double scale = std::max({std::abs(num), 0.01 * std::sqrt(gn), floor, 1e-300});
    const double err = std::abs(an - num) / scale;
    RC_LOG() << name << ": analytic " << an << ", numeric " << num << ", error " << err << "\n";
    worst[name] = std::max(worst[name], err);
    worst_all = std::max(worst_all, err);
  };
  using P = Problem<double>;
  check("q", p.q, gr.dq, -INFINITY, INFINITY, [](P& r, const Tensor<double>& x) { r.q = x; });
  check("k", p.k, gr.dk, -INFINITY, INFINITY, [](P& r, const Tensor<double>& x) { r.k = x; });
  check("v", p.v, gr.dv, -INFINITY, INFINITY, [](P& r, const Tensor<double>& x) { r.v = x; });
  check("g", p.gates.g, gr.dg, -INFINITY, 0.0, [](P& r, const Tensor<double>& x) { r.gates.g = x; });
  check("beta", p.gates.beta, gr.dbeta, 0.0, 1.0, [](P& r, const Tensor<double>& x) { r.gates.beta = x; });
  check("b", p.gates.b, gr.db, 0.0, 1.0, [](P& r, const Tensor<double>& x) { r.gates.b = x; });
  check("w", p.gates.w, gr.dw, 0.0, 1.0, [](P& r, const Tensor<double>& x) { r.gates.w = x; });
  check("h0", p.opt.initial_state, gr.dh0, -INFINITY, INFINITY,
        [](P& r, const Tensor<double>& x) { r.opt.initial_state = x; });
  return worst_all;
}

/// Cases for the finite-difference check: T up to 70 (several chunks of 16 and 32).
rc::Gen<BwdCase> gen_fd_case() {
  return rc::gen::exec([] {
    BwdCase b;
    CaseLimits lim;
    lim.max_B = 2, lim.max_H = 2, lim.max_K = 12, lim.max_V = 12, lim.max_T = 70;
    b.c = *gen_case(lim);
    b.chunk = *rc::gen::element<index_t>(16, 32, 64);
    b.with_dht = *rc::gen::arbitrary<bool>();
    b.l2norm = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    b.custom_scale = *rc::gen::arbitrary<bool>();
    return b;
  });
}

void trace_fd_property(Op op) {
  std::map<std::string, double> worst;
  rc::prop("chunked gradient with trace cotangents = finite differences of the reference", [&] {
    const BwdCase b = *gen_fd_case();
    const int which = *rc::gen::weightedElement<int>({{1, 1}, {1, 2}, {3, 3}});
    RC_LOG() << ref::op_name(op) << " " << b << " cotangents " << which << "\n";
    const BwdProblem pb = make_bwd_problem(op, b);
    const TraceCot tc = make_trace_cot(b, which);
    const auto gr = chunked_backward<double>(pb, b.chunk, 0, tc);
    RC_ASSERT(directional_fd_error(pb, tc, gr, b.c.seed + 17, worst) <= kTolFd);
  });
  if (std::getenv("LINATTN_CHUNK_BACKWARD_REPORT")) {
    std::cout << ref::op_name(op) << " trace cotangents, worst directional FD error:";
    for (const auto& [n, w] : worst) std::cout << "  " << n << " " << w;
    std::cout << "\n";
  }
}

}  // namespace

TEST_CASE("Chunked DeltaNet backward with dwritten and dv_bar equals finite differences of the reference forward and trace") {
  trace_fd_property(Op::delta_rule);
}

TEST_CASE("Chunked GDN backward with dwritten and dv_bar equals finite differences of the reference forward and trace") {
  trace_fd_property(Op::gated_delta_rule);
}

TEST_CASE("Chunked KDA backward with dwritten and dv_bar equals finite differences of the reference forward and trace") {
  trace_fd_property(Op::kda);
}

TEST_CASE("Chunked GDN2 backward with dwritten and dv_bar equals finite differences of the reference forward and trace") {
  trace_fd_property(Op::gdn2);
}

TEST_CASE("Chunked backward with trace cotangents in float32 is within relative RMS 1e-4 of float64") {
  Worst worst;
  rc::prop("float32 chunked with dwritten and dv_bar ~ float64 chunked", [&] {
    const Op op = *rc::gen::element(Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2);
    const BwdCase b = *gen_bwd_case();
    RC_LOG() << ref::op_name(op) << " " << b << "\n";
    const BwdProblem pb = make_bwd_problem(op, b);
    const TraceCot tc = make_trace_cot(b, 3);
    expect_grads_close(chunked_backward<float>(pb, b.chunk, 0, tc),
                       chunked_backward<double>(pb, b.chunk, 0, tc), kTol32, worst);
  });
  worst.print("float32 with trace cotangents");
}

namespace {
template <class T>
void expect_identical(const ref::RecurrentGrads<T>& x, const ref::RecurrentGrads<T>& y) {
  for (const auto& [a, b] : {std::pair{&x.dq, &y.dq}, {&x.dk, &y.dk}, {&x.dv, &y.dv}, {&x.dg, &y.dg},
                             {&x.dbeta, &y.dbeta}, {&x.db, &y.db}, {&x.dw, &y.dw}, {&x.dh0, &y.dh0}}) {
    RC_ASSERT(a->defined() == b->defined());
    for (index_t i = 0; i < a->numel(); ++i) RC_ASSERT(a->data()[i] == b->data()[i]);
  }
}
}  // namespace

TEST_CASE("Chunked backward with zero dwritten and dv_bar equals the call without them exactly") {
  rc::prop("zero trace cotangents change nothing (float64 and float32)", [] {
    const Op op = *rc::gen::element(Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2);
    const BwdCase b = *gen_fd_case();  // T <= 70: several chunks, a ragged last one
    RC_LOG() << ref::op_name(op) << " " << b << "\n";
    const BwdProblem pb = make_bwd_problem(op, b);
    TraceCot zero;
    zero.dwritten = Tensor<double>({b.c.B, b.c.T, b.c.H, b.c.V});
    zero.dv_bar = Tensor<double>({b.c.B, b.c.T, b.c.H, b.c.V});
    for (Tensor<double>* t : {&zero.dwritten, &zero.dv_bar})
      for (double& x : *t) x = 0.0;
    expect_identical(chunked_backward<double>(pb, b.chunk, 0, zero), chunked_backward<double>(pb, b.chunk));
    expect_identical(chunked_backward<float>(pb, b.chunk, 0, zero), chunked_backward<float>(pb, b.chunk));
  });
}

TEST_CASE("Chunked backward with dwritten and dv_bar does not depend on the number of threads") {
  rc::prop("1 thread = 3 threads with trace cotangents, bit for bit", [] {
    const Op op = *rc::gen::element(Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2);
    const BwdCase b = *gen_fd_case();  // T <= 70: several chunks, a ragged last one
    const BwdProblem pb = make_bwd_problem(op, b);
    const TraceCot tc = make_trace_cot(b, 3);
    expect_identical(chunked_backward<float>(pb, b.chunk, 1, tc), chunked_backward<float>(pb, b.chunk, 3, tc));
  });
}

TEST_CASE("Chunked backward rejects malformed dwritten and dv_bar naming the argument") {
  Case c;
  c.B = 1, c.T = 5, c.H = 2, c.K = 3, c.V = 4, c.seed = 11;
  BwdCase b;
  b.c = c;
  const BwdProblem pb = make_bwd_problem(Op::kda, b);
  const Problem<double>& p = pb.p;
  const cpu::ChunkOptions<double> o = chunk_options(p.opt, 16);
  const TraceCot tc = make_trace_cot(b, 3);
  auto kda = [&](const Tensor<double>& dwr, const Tensor<double>& dvb) {
    return cpu::chunk_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, pb.do_, pb.dht, o, dwr, dvb);
  };
  CHECK_NOTHROW(kda(tc.dwritten, tc.dv_bar));
  CHECK_NOTHROW(kda(Tensor<double>(), tc.dv_bar));
  const std::string fn = "chunk_kda_backward";
  expect_error([&] { kda(Tensor<double>({1, 5, 2, 3}), tc.dv_bar); }, fn, "dwritten");  // V = 4
  expect_error([&] { kda(tc.dwritten, Tensor<double>({1, 4, 2, 4})); }, fn, "dv_bar");  // T = 5
  Tensor<double> bad = tc.dv_bar.clone();
  bad(0, 3, 1, 2) = NAN;
  expect_error([&] { kda(tc.dwritten, bad); }, fn, "dv_bar");
  Tensor<double> badw = tc.dwritten.clone();
  badw(0, 0, 0, 0) = INFINITY;
  expect_error([&] { kda(badw, tc.dv_bar); }, fn, "dwritten");
  expect_error([&] {
    cpu::chunk_backward(Op::kda, p.q, p.k, p.v, p.gates, pb.do_, pb.dht, o, Tensor<double>({1, 5, 2, 3}));
  }, "chunk_backward", "dwritten");
}
