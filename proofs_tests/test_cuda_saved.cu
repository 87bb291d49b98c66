// proofs_tests/test_cuda_saved.cu -- the training forward that keeps what the backward's prepare
// would recompute (optimized/cuda/chunk_cuda.hpp, SavedForward; issue 6) and the backward that reads
// it: forward_device(args, version, &saved) gives o and the final state of forward_device bit for
// bit, and backward_device(args, version, &saved) gives the gradients of backward_device(args,
// version) bit for bit for the rungs of cuda::saved_bwd_versions() (best, 5 to 20: those whose
// prepare writes forward rung 4's intra outputs), so the saved path inherits every property the backward
// tests prove of those rungs; a property checks it against the float64 reference backward too. Since
// session 14 the saving forward and rung 18's prepare write those outputs with rung 7's intra kernel (kA)
// for DeltaNet and GDN: for rungs 18 to 20 (and `best`) the comparison is that kernel against itself, for rungs 5
// to 17 it is rung 7's kernel against rung 4's.
// Every compared element must also be finite, so an element neither path wrote (NaN on both sides)
// fails. The forward and the backward on two streams without a synchronisation, and a refill on one
// stream while a backward on another still reads the object, give the same gradients (the object's
// events order them; a spinning kernel holds the first stream so that a missing wait shows).
// Bad uses (another op, B, T, H, K, V, dtype, scale, sequences, q or v buffer; an empty or
// moved-from object; rungs 1-4; rung 5 with LINATTN_BWD5_V3_FRONT) are linattn::Errors naming
// 'saved' (or 'version' / 'save' for the forward).
//
// Every call goes through the device API on buffers this file allocates; gradient, o and final-state
// buffers are filled with NaN bits first, and before every backward the process-wide workspaces are
// too (cuda::poison_device_workspaces), so a saved path that reads what no kernel of its call wrote
// -- e.g. the previous recompute backward's A -- fails instead of passing on stale equal values. A
// new SavedForward's buffer starts as NaN bits as well (forward_device), so A or a workspace tile the
// forward fails to write shows.
// Saved states (forward_device(args, version, &saved, true); RESULTS.md "Saved states"): the saving
// forward's state kernel also stores the state entering every chunk and v_new into the object (beside
// A), and the saved backward reads them there and skips A's copy and its states kernel; its scratch is
// the process-wide workspace, NaN-filled before each backward as without states. (d) checks o, the
// final state and every gradient bit for bit with the recompute path for every saved rung (a fresh
// object per rung), a second backward from the same object, a reused object refilled with and without
// states (best and rung 16), and the refusal of with_states without a SavedForward; the object's size
// is checked without a GPU. Rung 28 reads the states kept as bf16 (forward_device's states_bf16): (d) fills its object
// so, checks states_bf16() against rung 28's range computed here, and (e) checks that the other rungs refuse such an
// object and that states_bf16 needs with_states.
// Without a usable GPU every test that needs one says why (Catch2 WARN) and returns; the argument
// checks that need no device run everywhere.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "generators.hpp"
#include "optimized/cuda/chunk_cuda.hpp"
#include "cuda_test_common.hpp"
#include "cuda_bwd_problem.hpp"

using namespace linattn;
using namespace linattn::testing;
using cuda::BwdVersion;
using cuda::DType;
using cuda::Version;

namespace {

#define CU(expr) REQUIRE((expr) == cudaSuccess)

const Op kOps[] = {Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2};
const char* dname(DType dt) { return dt == DType::f32 ? "f32" : "bf16"; }

/// The backward rungs that accept a saved forward (chunk_cuda.hpp, saved_bwd_versions).
std::vector<BwdVersion> saved_rungs() { return cuda::saved_bwd_versions(); }

/// Every rung the backward ladder names (bwd_version_name gives "?" past its end), best excluded.
std::vector<BwdVersion> ladder_rungs() {
  std::vector<BwdVersion> r;
  for (int v = 1; v < 32; ++v)
    if (std::string(cuda::bwd_version_name(static_cast<BwdVersion>(v))) != "?") r.push_back(static_cast<BwdVersion>(v));
  return r;
}

/// Holds a stream for about `cycles` SM clocks (a single spinning thread), so that work queued
/// behind it on that stream runs late.
__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// ---------------------------------------------------------------------------------------------
// Problems (as test_cuda_backward.cu builds them: the reference sees exactly the device's inputs).
// ---------------------------------------------------------------------------------------------

/// The problem in float32 as the device sees it (bf16 inputs: q, k, v, do rounded to bf16; the gates
/// too with bf16 gates), with do and dht (cuda_bwd_problem.hpp, as test_cuda_backward.cu builds it).
DevProblem make_dev_problem(Op op, const BwdCase& b, DType gdt) {
  return as_device_sees(make_bwd_problem(op, b), DType::bf16, gdt);
}

// ---------------------------------------------------------------------------------------------
// Device buffers and one problem on the device.
// ---------------------------------------------------------------------------------------------

struct Dev {
  void* p = nullptr;
  std::size_t bytes = 0;
  Dev() = default;
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { if (p) cudaFree(p); }
  void alloc(std::size_t n) {
    bytes = n;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
  }
  void nan_fill() {
    if (cudaMemset(p, 0xff, bytes ? bytes : 1) != cudaSuccess) throw std::runtime_error("cudaMemset failed");
  }
  void upload(const Tensor<float>& t, DType dt) {
    if (!t.defined()) return;
    const std::size_t n = std::size_t(t.numel());
    std::vector<std::uint16_t> h;
    const void* src = t.data();
    if (dt == DType::bf16) {
      h.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        const float r = cuda::round_to_bf16(t.data()[i]);
        std::uint32_t u;
        std::memcpy(&u, &r, 4);
        h[i] = std::uint16_t(u >> 16);
      }
      src = h.data();
    }
    alloc(n * (dt == DType::f32 ? 4 : 2));
    if (cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) throw std::runtime_error("cudaMemcpy failed");
  }
  std::vector<unsigned char> raw() const {
    std::vector<unsigned char> h(bytes);
    if (bytes && cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
      throw std::runtime_error("cudaMemcpy failed");
    return h;
  }
  Tensor<float> download(std::vector<index_t> shape, DType dt) const {
    Tensor<float> t(std::move(shape));
    const std::vector<unsigned char> h = raw();
    for (index_t i = 0; i < t.numel(); ++i) {
      if (dt == DType::f32) {
        std::memcpy(t.data() + i, h.data() + 4 * i, 4);
      } else {
        std::uint16_t b;
        std::memcpy(&b, h.data() + 2 * i, 2);
        const std::uint32_t u = std::uint32_t(b) << 16;
        std::memcpy(t.data() + i, &u, 4);
      }
    }
    return t;
  }
};

/// A DevProblem's tensors on the device (inputs bf16, gates in `gdt`), its output and gradient
/// buffers, and the argument blocks of the device API.
struct OnDevice {
  Op op;
  DType gdt;
  index_t B, T, H, K, V, N;
  Dev q, k, v, g, beta, b, w, h0, do_, dht, o, ht, dq, dk, dv, dg, dbeta, db, dw, dh0;
  std::vector<std::int64_t> cu;
  cuda::DeviceBwdArgs a;  // a.fwd: the forward's arguments

  OnDevice(const DevProblem& d, DType gate_dtype) : op(d.p.op), gdt(gate_dtype) {
    const Problem<float>& p = d.p;
    B = p.q.size(0), T = p.q.size(1), H = p.q.size(2), K = p.q.size(3), V = p.v.size(3), N = p.N;
    q.upload(p.q, DType::bf16), k.upload(p.k, DType::bf16), v.upload(p.v, DType::bf16);
    g.upload(p.gates.g, gdt), beta.upload(p.gates.beta, gdt), b.upload(p.gates.b, gdt), w.upload(p.gates.w, gdt);
    h0.upload(p.opt.initial_state, DType::f32);
    do_.upload(d.do_, DType::bf16), dht.upload(d.dht, DType::f32);
    const std::size_t nqk = std::size_t(B * T * H * K), nv = std::size_t(B * T * H * V);
    const std::size_t ntok = std::size_t(B * T * H), ns = std::size_t(N * H * K * V), gsz = gdt == DType::f32 ? 4 : 2;
    o.alloc(2 * nv), ht.alloc(4 * ns);
    dq.alloc(2 * nqk), dk.alloc(2 * nqk), dv.alloc(2 * nv), dh0.alloc(4 * ns);
    if (op == Op::gated_delta_rule) dg.alloc(gsz * ntok);
    if (op == Op::kda || op == Op::gdn2) dg.alloc(gsz * nqk);
    if (op == Op::gdn2) db.alloc(gsz * nqk), dw.alloc(gsz * nv);
    else dbeta.alloc(gsz * ntok);
    cu.assign(p.opt.cu_seqlens.begin(), p.opt.cu_seqlens.end());

    cuda::DeviceArgs& f = a.fwd;
    f.op = op, f.dtype = DType::bf16, f.gate_dtype = gdt;
    f.B = B, f.T = T, f.H = H, f.K = K, f.V = V;
    f.q = q.p, f.k = k.p, f.v = v.p, f.g = g.p, f.beta = beta.p, f.b = b.p, f.w = w.p;
    f.o = o.p;
    f.scale = p.opt.scale ? float(*p.opt.scale) : 1.0f / std::sqrt(float(K));
    f.initial_state = static_cast<const float*>(h0.p);
    f.final_state = static_cast<float*>(ht.p);
    if (!cu.empty()) f.cu_seqlens = cu.data(), f.num_seqs = N;
    a.do_ = do_.p, a.dht = static_cast<const float*>(dht.p);
    a.dq = dq.p, a.dk = dk.p, a.dv = dv.p, a.dg = dg.p, a.dbeta = dbeta.p, a.db = db.p, a.dw = dw.p;
    a.dh0 = static_cast<float*>(dh0.p);
  }

  /// o and the final state (raw bytes, NaN-filled before), by forward_device(version[, save]).
  std::pair<std::vector<unsigned char>, std::vector<unsigned char>> forward(Version ver,
                                                                           cuda::SavedForward* save = nullptr,
                                                                           bool states = false, bool states_bf16 = false) {
    o.nan_fill(), ht.nan_fill();
    if (save) cuda::forward_device(a.fwd, ver, save, states, states_bf16);
    else cuda::forward_device(a.fwd, ver);
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("forward failed");
    return {o.raw(), ht.raw()};
  }

  /// The gradients of backward_device(version[, saved]), every buffer and workspace NaN-filled before.
  ref::RecurrentGrads<float> backward(BwdVersion ver, const cuda::SavedForward* saved = nullptr) {
    nan_fill_grads();
    cuda::poison_device_workspaces();
    if (saved) cuda::backward_device(a, ver, saved);
    else cuda::backward_device(a, ver);
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("backward failed");
    return grads();
  }
  void nan_fill_grads() {
    for (Dev* x : {&dq, &dk, &dv, &dg, &dbeta, &db, &dw, &dh0})
      if (x->p) x->nan_fill();
  }
  /// The gradient buffers as they are now.
  ref::RecurrentGrads<float> grads() const {
    ref::RecurrentGrads<float> gr;
    gr.dq = dq.download({B, T, H, K}, DType::bf16);
    gr.dk = dk.download({B, T, H, K}, DType::bf16);
    gr.dv = dv.download({B, T, H, V}, DType::bf16);
    if (op == Op::gated_delta_rule) gr.dg = dg.download({B, T, H}, gdt);
    if (op == Op::kda || op == Op::gdn2) gr.dg = dg.download({B, T, H, K}, gdt);
    if (op == Op::gdn2) gr.db = db.download({B, T, H, K}, gdt), gr.dw = dw.download({B, T, H, V}, gdt);
    else gr.dbeta = dbeta.download({B, T, H}, gdt);
    gr.dh0 = dh0.download({N, H, K, V}, DType::f32);
    return gr;
  }
};

using GradList = std::vector<std::tuple<const char*, const Tensor<float>*, const Tensor<float>*>>;
GradList pairs(const ref::RecurrentGrads<float>& x, const ref::RecurrentGrads<float>& y) {
  return {{"dq", &x.dq, &y.dq},          {"dk", &x.dk, &y.dk}, {"dv", &x.dv, &y.dv}, {"dg", &x.dg, &y.dg},
          {"dbeta", &x.dbeta, &y.dbeta}, {"db", &x.db, &y.db}, {"dw", &x.dw, &y.dw}, {"dh0", &x.dh0, &y.dh0}};
}

/// The number of elements of t that are not finite.
index_t non_finite(const Tensor<float>& t) {
  index_t n = 0;
  for (index_t i = 0; i < t.numel(); ++i) n += std::isfinite(t.data()[i]) ? 0 : 1;
  return n;
}

/// y's gradients equal x's bit for bit (the same set defined) and are finite (so that an element
/// neither path wrote, NaN bits on both sides, fails). The caller's INFO names the case.
void check_same_grads(const ref::RecurrentGrads<float>& x, const ref::RecurrentGrads<float>& y) {
  for (const auto& [name, a, c] : pairs(x, y)) {
    INFO(name);
    REQUIRE(a->defined() == c->defined());
    if (!a->defined()) continue;
    CHECK(std::memcmp(a->data(), c->data(), sizeof(float) * a->numel()) == 0);
    CHECK(non_finite(*c) == 0);
  }
}

/// Non-finite elements of raw device bytes holding bfloat16 (bf16 = true) or float32 values.
std::size_t non_finite_raw(const std::vector<unsigned char>& h, bool bf16) {
  std::size_t n = 0;
  const std::size_t esz = bf16 ? 2 : 4;
  for (std::size_t i = 0; i + esz <= h.size(); i += esz) {
    std::uint32_t u = 0;
    if (bf16) {
      std::uint16_t b;
      std::memcpy(&b, h.data() + i, 2);
      u = std::uint32_t(b) << 16;
    } else {
      std::memcpy(&u, h.data() + i, 4);
    }
    float x;
    std::memcpy(&x, &u, 4);
    n += std::isfinite(x) ? 0 : 1;
  }
  return n;
}

/// Rung 3's bounds with bf16 inputs, which hold for rungs 3 to 8 (test_cuda_backward.cu's file
/// comment): relative RMS of dq, dk, dv, dh0 within 1e-2, of the gate gradients within 2e-2, both
/// against max(rms(want), rms of dq, dk, dv together).
constexpr double kTol = 1e-2, kTolGates = 2e-2;

/// "" when every gradient is within its bound of the reference, else what is not.
std::string off_reference(const ref::RecurrentGrads<float>& got, const ref::RecurrentGrads<double>& want) {
  const std::vector<std::tuple<const char*, const Tensor<float>*, const Tensor<double>*>> all = {
      {"dq", &got.dq, &want.dq},          {"dk", &got.dk, &want.dk}, {"dv", &got.dv, &want.dv},
      {"dg", &got.dg, &want.dg},          {"dbeta", &got.dbeta, &want.dbeta}, {"db", &got.db, &want.db},
      {"dw", &got.dw, &want.dw},          {"dh0", &got.dh0, &want.dh0}};
  double sq = 0, cnt = 0;
  for (const Tensor<double>* w : {&want.dq, &want.dk, &want.dv}) {
    for (index_t i = 0; i < w->numel(); ++i) sq += w->data()[i] * w->data()[i];
    cnt += double(w->numel());
  }
  const double floor = cnt > 0 ? std::sqrt(sq / cnt) : 0.0;
  std::ostringstream bad;
  for (const auto& [name, g, w] : all) {
    if (g->defined() != w->defined() || (w->defined() && g->shape() != w->shape())) {
      bad << name << ": undefined or wrong shape; ";
      continue;
    }
    if (!w->defined()) continue;
    double num = 0, den = 0;
    for (index_t i = 0; i < w->numel(); ++i) {
      const double x = double(g->data()[i]), y = w->data()[i];
      num += std::isfinite(x) ? (x - y) * (x - y) : INFINITY;
      den += y * y;
    }
    const double n = w->numel() ? double(w->numel()) : 1.0, err = std::sqrt(num / n), rms = std::sqrt(den / n);
    const std::string s = name;
    const double tol = (s == "dg" || s == "dbeta" || s == "db" || s == "dw") ? kTolGates : kTol;
    if (!(err <= tol * std::max(rms, floor)))
      bad << name << ": err " << err << " rms " << rms << " floor " << floor << " bound " << tol << "; ";
  }
  return bad.str();
}

Case fixed_case(index_t B, index_t T, index_t H, index_t K, index_t V, GateMode gm, bool init, std::uint64_t seed,
                std::vector<index_t> cu = {}) {
  Case c;
  c.B = B, c.T = T, c.H = H, c.K = K, c.V = V, c.gates = gm, c.initial_state = init, c.seed = seed;
  c.cu_seqlens = std::move(cu);
  return c;
}

/// The fixed cases of test (a): T = 1, ragged last chunks, K != V, K = 64 and 128, a K that is not a
/// power of two, an initial state or not, a packed batch of many short sequences (with empty ones),
/// V > 128 (four value tiles), V % 8 == 4 (tci::load_vtile's second quad of GDN2's float32 w), odd K
/// and V; without dht in one. A custom scale where the seed is even.
std::vector<BwdCase> fixed_cases() {
  std::vector<index_t> cu = {0};
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> len(0, 9);
  for (int s = 0; s < 40; ++s) cu.push_back(cu.back() + len(rng));
  cu.push_back(cu.back() + 70);  // one sequence longer than a chunk
  cu.push_back(cu.back());       // and an empty one at the end
  const std::vector<Case> cases = {
      fixed_case(2, 1, 2, 64, 64, GateMode::random, true, 101),            // T = 1
      fixed_case(1, 65, 2, 64, 48, GateMode::random, false, 102),          // ragged, K != V
      fixed_case(2, 130, 2, 128, 128, GateMode::mixed, true, 103),         // K = V = 128, ragged
      fixed_case(1, 100, 3, 40, 72, GateMode::random, true, 104),          // K = 40 (not a power of two)
      fixed_case(1, 63, 1, 100, 36, GateMode::extreme, false, 105),        // K = 100, g down to -1000
      fixed_case(1, cu.back(), 2, 64, 64, GateMode::random, true, 106, cu),  // packed batch
      fixed_case(1, 70, 2, 64, 200, GateMode::random, true, 107),          // V = 200 > 128 (VP = 256)
      fixed_case(1, 70, 2, 36, 20, GateMode::mixed, false, 108),           // K = 36, V = 20 (V % 8 == 4)
      fixed_case(1, 67, 1, 33, 17, GateMode::random, true, 109),           // odd K and V
  };
  std::vector<BwdCase> out;
  for (const Case& c : cases) {
    BwdCase b;
    b.c = c, b.custom_scale = c.seed % 2 == 0, b.with_dht = c.seed != 108;
    out.push_back(b);
  }
  return out;
}

/// Test (a) for one case, operator and gate dtype: o and the final state of the saving forward
/// equal forward_device's bit for bit and are finite, and for every saved rung the saved backward's
/// gradients equal the recompute backward's bit for bit and are finite; a reused SavedForward
/// (filled before by another call) gives them too; best's are within the bounds of the reference.
void check_saved_case(const BwdCase& b, Op op, DType gdt, cuda::SavedForward& reused,
                      const std::vector<BwdVersion>& rungs = saved_rungs()) {
  const DevProblem d = make_dev_problem(op, b, gdt);
  OnDevice dev(d, gdt);
  INFO(ref::op_name(op) << " gates " << dname(gdt) << " " << b);
  const auto plain = dev.forward(Version::best);
  cuda::SavedForward saved;
  const auto with_save = dev.forward(Version::best, &saved);
  REQUIRE(!saved.empty());
  CHECK(saved.bytes() == cuda::SavedForward::bytes_needed(dev.a.fwd));
  CHECK(std::memcmp(plain.first.data(), with_save.first.data(), plain.first.size()) == 0);    // o
  CHECK(std::memcmp(plain.second.data(), with_save.second.data(), plain.second.size()) == 0);  // final state
  CHECK(non_finite_raw(with_save.first, true) == 0);
  CHECK(non_finite_raw(with_save.second, false) == 0);
  dev.forward(Version::v4_levels, &reused);
  for (BwdVersion ver : rungs) {
    INFO(cuda::bwd_version_name(ver));
    const auto from_saved = dev.backward(ver, &saved);
    const auto recomputed = dev.backward(ver);
    check_same_grads(recomputed, from_saved);
    check_same_grads(recomputed, dev.backward(ver, &reused));
    if (ver == BwdVersion::best) {
      const std::string bad = off_reference(from_saved, reference_backward(d));
      INFO("against the reference: " << bad);
      CHECK(bad.empty());
    }
  }
}

/// Test (d) for one case, operator and gate dtype: with saved states, o and the final state equal
/// forward_device's bit for bit and are finite; for every saved rung, a fresh object's saved backward
/// gives the recompute backward's gradients bit for bit and finite, and so does a second backward from
/// it; for best and rung 16, `reused` (refilled, alternately with and without states) too. Rung 28's object is filled
/// with states_bf16 (its states bf16 exactly where rung 28's range says: DeltaNet, K % 8 == 0, V % 8 == 0, K <= 128; the
/// problems here are bf16 with K >= 16 and aligned buffers), and rung 27's gradients are its want as well.
void check_saved_states_case(const BwdCase& b, Op op, DType gdt, cuda::SavedForward& reused,
                             const std::vector<BwdVersion>& rungs = saved_rungs()) {
  const DevProblem d = make_dev_problem(op, b, gdt);
  OnDevice dev(d, gdt);
  INFO(ref::op_name(op) << " gates " << dname(gdt) << " " << b);
  const auto plain = dev.forward(Version::best);
  bool reuse_states = true;
  for (BwdVersion ver : rungs) {
    INFO(cuda::bwd_version_name(ver));
    cuda::SavedForward saved;
    // rungs 28 to 33 and best (rung 33 since session 32) read bf16 states (chunk_cuda.hpp)
    const bool s_bf16 = cuda::bwd_reads_bf16_states(ver);
    const auto with_save = dev.forward(Version::best, &saved, true, s_bf16);
    REQUIRE(saved.has_states());
    const bool bf16_range = op == Op::delta_rule && b.c.K >= 16 && b.c.K <= 128 && b.c.K % 8 == 0 && b.c.V % 8 == 0;
    CHECK(saved.states_bf16() == (s_bf16 && bf16_range));
    CHECK(saved.bytes() == cuda::SavedForward::bytes_needed(dev.a.fwd, true));
    CHECK(std::memcmp(plain.first.data(), with_save.first.data(), plain.first.size()) == 0);    // o
    CHECK(std::memcmp(plain.second.data(), with_save.second.data(), plain.second.size()) == 0);  // final state
    CHECK(non_finite_raw(with_save.first, true) == 0);
    CHECK(non_finite_raw(with_save.second, false) == 0);
    const auto from_saved = dev.backward(ver, &saved);
    const auto recomputed = dev.backward(ver);
    check_same_grads(recomputed, from_saved);
    check_same_grads(recomputed, dev.backward(ver, &saved));  // the kept arrays read twice
    if (ver == BwdVersion::v28_sbf16)  // rung 28 = rung 27, bit for bit
      check_same_grads(dev.backward(BwdVersion::v27_dvplanes), from_saved);
    if (ver == BwdVersion::best || ver == BwdVersion::v16_b9one) {  // (rung 16: its hand-over region)
      dev.forward(Version::v4_levels, &reused, reuse_states);
      CHECK(reused.has_states() == reuse_states);
      check_same_grads(recomputed, dev.backward(ver, &reused));
      reuse_states = !reuse_states;
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// (a) Bit for bit: the saving forward's o, the saved backward's gradients.
// ---------------------------------------------------------------------------------------------

TEST_CASE("CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  cuda::SavedForward reused;  // refilled by every case: its memory reused or grown
  for (const BwdCase& b : fixed_cases())
    for (Op op : kOps)
      for (DType gdt : {DType::f32, DType::bf16}) check_saved_case(b, op, gdt, reused);
}

TEST_CASE("CUDA saved backward can be run twice from one saved forward with the same gradients") {
  SKIP_WITHOUT_GPU();
  for (Op op : kOps) {
    BwdCase b;
    b.c = fixed_case(1, 200, 2, 128, 64, GateMode::random, true, 111);
    const DevProblem d = make_dev_problem(op, b, DType::f32);
    OnDevice dev(d, DType::f32);
    cuda::SavedForward saved;
    dev.forward(Version::best, &saved);
    INFO(ref::op_name(op));
    const auto first = dev.backward(BwdVersion::best, &saved);
    check_same_grads(first, dev.backward(BwdVersion::best, &saved));  // the saved buffer is only read
    check_same_grads(first, dev.backward(BwdVersion::best));
  }
}

// ---------------------------------------------------------------------------------------------
// (b) Against the float64 reference backward, random shapes and gates.
// ---------------------------------------------------------------------------------------------

TEST_CASE("CUDA saved backward after a saving forward equals the float64 reference backward within the rung 3 bounds") {
  SKIP_WITHOUT_GPU();
  const std::vector<BwdVersion> rungs = saved_rungs();
  for (Op op : kOps)
    rc::prop(std::string(ref::op_name(op)) + " saved backward equals the reference", [=] {
      BwdCase b;
      CaseLimits lim;
      lim.max_B = 2, lim.max_H = 2, lim.max_K = 40, lim.max_V = 40;
      lim.max_T = *rc::gen::weightedElement<index_t>({{4, 70}, {1, 200}});
      b.c = *gen_case(lim);
      // The saving forward takes 16 <= K <= 128 (forward rung 4's range): K from there, up to 128 in one case of four.
      b.c.K = *rc::gen::inRange<index_t>(16, *rc::gen::weightedElement<index_t>({{3, 41}, {1, 129}}));
      b.with_dht = *rc::gen::weightedElement<bool>({{3, true}, {1, false}});
      b.custom_scale = *rc::gen::arbitrary<bool>();
      const DType gdt = *rc::gen::arbitrary<bool>() ? DType::bf16 : DType::f32;
      const BwdVersion ver = *rc::gen::elementOf(rungs);
      const DevProblem d = make_dev_problem(op, b, gdt);
      OnDevice dev(d, gdt);
      cuda::SavedForward saved;
      dev.forward(Version::best, &saved);
      const std::string bad = off_reference(dev.backward(ver, &saved), reference_backward(d));
      RC_LOG() << cuda::bwd_version_name(ver) << " " << ref::op_name(op) << " gates " << dname(gdt) << " " << b
               << "\n" << bad << "\n";
      RC_ASSERT(bad.empty());
    });
}

// ---------------------------------------------------------------------------------------------
// (c) Bad uses.
// ---------------------------------------------------------------------------------------------

TEST_CASE("CUDA saved backward refuses an empty or moved-from SavedForward with a linattn Error naming saved") {
  // No device work happens before these checks: they run without a GPU too.
  cuda::DeviceBwdArgs a;
  a.fwd.op = Op::kda, a.fwd.dtype = DType::bf16;
  a.fwd.B = 1, a.fwd.T = 4, a.fwd.H = 1, a.fwd.K = 16, a.fwd.V = 16;
  alignas(16) float x[4] = {};  // the device API refuses arrays off a 16-byte boundary before 'saved'
  a.fwd.q = a.fwd.k = a.fwd.v = a.fwd.g = a.fwd.beta = x;
  a.fwd.scale = 0.25f;
  a.do_ = a.dq = a.dk = a.dv = a.dg = a.dbeta = x;
  a.dh0 = x;
  using Catch::Matchers::Contains;
  cuda::SavedForward never_filled;
  CHECK(never_filled.empty());
  CHECK_THAT(error_of([&] { cuda::backward_device(a, BwdVersion::best, &never_filled); }),
             Contains("backward_device") && Contains("'saved'") && Contains("empty SavedForward"));
  cuda::SavedForward moved_to(std::move(never_filled));
  CHECK_THAT(error_of([&] { cuda::backward_device(a, BwdVersion::v8_wide, &moved_to); }),
             Contains("'saved'") && Contains("empty SavedForward"));
}

TEST_CASE("CUDA saving forward refuses a rung or a call whose intra kernel is not forward rung 4 with a linattn Error") {
  // Refused before any device work: runs without a GPU too.
  cuda::DeviceArgs f;
  f.op = Op::delta_rule, f.dtype = DType::bf16;
  f.B = 1, f.T = 4, f.H = 1, f.K = 16, f.V = 16;
  alignas(16) float x[4] = {};  // the device API refuses arrays off a 16-byte boundary first
  f.q = f.k = f.v = f.beta = x;
  f.o = x;
  f.scale = 0.25f;
  cuda::SavedForward s;
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of([&] { cuda::forward_device(f, Version::v1_simple, &s); }),
             Contains("forward_device") && Contains("'version'") && Contains("v1_simple"));
  CHECK_THAT(error_of([&] { cuda::forward_device(f, Version::v6_lean, &s); }), Contains("'version'") && Contains("v6_lean"));
  f.dtype = DType::f32;  // best would run v1 for float32 inputs
  CHECK_THAT(error_of([&] { cuda::forward_device(f, Version::best, &s); }), Contains("'save'") && Contains("bfloat16"));
  f.dtype = DType::bf16, f.K = 8;  // K < 16: v1 too
  CHECK_THAT(error_of([&] { cuda::forward_device(f, Version::v4_levels, &s); }),
             Contains("'save'") && Contains("forward rung 4's range") && Contains("K = 8"));
  f.K = 16;  // a version outside the ladder is named by its number
  CHECK_THAT(error_of([&] { cuda::forward_device(f, static_cast<Version>(42), &s); }),
             Contains("'version'") && Contains("got 42"));
  CHECK(s.empty());
}

TEST_CASE("CUDA saved backward refuses every backward rung outside saved_bwd_versions and rung 5 with LINATTN_BWD5_V3_FRONT") {
  // The rung is checked before the object: runs without a GPU too (the object is empty, so a listed
  // rung gets past the rung check and is refused as empty instead).
  cuda::DeviceBwdArgs a;
  a.fwd.op = Op::gated_delta_rule, a.fwd.dtype = DType::bf16;
  a.fwd.B = 1, a.fwd.T = 4, a.fwd.H = 1, a.fwd.K = 16, a.fwd.V = 16;
  alignas(16) float x[4] = {};
  a.fwd.q = a.fwd.k = a.fwd.v = a.fwd.g = a.fwd.beta = x;
  a.fwd.scale = 0.25f;
  a.do_ = a.dq = a.dk = a.dv = a.dg = a.dbeta = x;
  a.dh0 = x;
  using Catch::Matchers::Contains;
  const std::vector<BwdVersion> listed = cuda::saved_bwd_versions();
  auto is_listed = [&](BwdVersion v) { return std::find(listed.begin(), listed.end(), v) != listed.end(); };
  // best (= rung 21 since session 20) and the rungs whose prepare writes rung 4's intra outputs are listed; rungs 1-4 are not.
  CHECK(is_listed(BwdVersion::best));
  CHECK(is_listed(BwdVersion::v8_wide));
  for (BwdVersion v : {BwdVersion::v1_simple, BwdVersion::v2_tensorcore, BwdVersion::v3_async, BwdVersion::v4_tc_tail})
    CHECK(!is_listed(v));
  const std::string rung_msg = "a backward rung whose prepare writes forward rung 4's intra outputs (best, 5";
  cuda::SavedForward empty;
  for (BwdVersion v : ladder_rungs()) {
    INFO(cuda::bwd_version_name(v));
    const std::string e = error_of([&] { cuda::backward_device(a, v, &empty); });
    if (is_listed(v)) CHECK_THAT(e, Contains("'saved'") && Contains("empty SavedForward") && !Contains(rung_msg));
    else CHECK_THAT(e, Contains("'saved'") && Contains(rung_msg) && Contains(cuda::bwd_version_name(v)));
  }
  // Rung 5 with its rung 3 front (any value of the variable, as bwd_v5_levels_front.cu reads it).
  ::setenv("LINATTN_BWD5_V3_FRONT", "", 1);
  const std::string e5 = error_of([&] { cuda::backward_device(a, BwdVersion::v5_levels_front, &empty); });
  ::unsetenv("LINATTN_BWD5_V3_FRONT");
  CHECK_THAT(e5, Contains("'saved'") && Contains(rung_msg) && Contains("LINATTN_BWD5_V3_FRONT"));
}

TEST_CASE("CUDA saved backward refuses a saved forward of another op or T or dtype or a rung 1 to 4 backward with a linattn Error naming saved") {
  SKIP_WITHOUT_GPU();
  using Catch::Matchers::Contains;
  BwdCase b;
  b.c = fixed_case(1, 70, 2, 32, 32, GateMode::random, true, 121);
  const DevProblem dk = make_dev_problem(Op::kda, b, DType::f32);
  const DevProblem dg = make_dev_problem(Op::gdn2, b, DType::f32);
  OnDevice kda(dk, DType::f32), gdn2(dg, DType::f32);
  cuda::SavedForward saved;
  kda.forward(Version::best, &saved);
  // Another op (and its inputs).
  CHECK_THAT(error_of([&] { gdn2.backward(BwdVersion::best, &saved); }),
             Contains("backward_device") && Contains("'saved'") && Contains("op (kda against gdn2)"));
  // Another T (the same buffers, a shorter call).
  cuda::DeviceBwdArgs shorter = kda.a;
  shorter.fwd.T = 65;
  CHECK_THAT(error_of([&] { cuda::backward_device(shorter, BwdVersion::best, &saved); }),
             Contains("'saved'") && Contains("shape"));
  // Another gate dtype.
  cuda::DeviceBwdArgs other_dtype = kda.a;
  other_dtype.fwd.gate_dtype = DType::bf16;
  CHECK_THAT(error_of([&] { cuda::backward_device(other_dtype, BwdVersion::best, &saved); }),
             Contains("'saved'") && Contains("dtype"));
  // Another scale.
  cuda::DeviceBwdArgs other_scale = kda.a;
  other_scale.fwd.scale *= 2;
  CHECK_THAT(error_of([&] { cuda::backward_device(other_scale, BwdVersion::best, &saved); }),
             Contains("'saved'") && Contains("scale"));
  // Rungs whose prepare is not rung 4's intra kernel.
  for (BwdVersion ver : {BwdVersion::v1_simple, BwdVersion::v2_tensorcore, BwdVersion::v3_async, BwdVersion::v4_tc_tail}) {
    INFO(cuda::bwd_version_name(ver));
    CHECK_THAT(error_of([&] { kda.backward(ver, &saved); }), Contains("'saved'") && Contains(cuda::bwd_version_name(ver)));
  }
  // Moved from after filling: empty; the object moved to works.
  cuda::SavedForward moved_to = std::move(saved);
  CHECK(saved.empty());
  CHECK_THAT(error_of([&] { kda.backward(BwdVersion::best, &saved); }), Contains("'saved'") && Contains("empty"));
  check_same_grads(kda.backward(BwdVersion::best), kda.backward(BwdVersion::best, &moved_to));
  moved_to.release();
  CHECK(moved_to.empty());
  CHECK_THAT(error_of([&] { kda.backward(BwdVersion::best, &moved_to); }), Contains("'saved'") && Contains("empty"));
}

TEST_CASE("CUDA saved backward refuses other sequences or another q or v buffer or another B H K V with a linattn Error naming what differs") {
  SKIP_WITHOUT_GPU();
  using Catch::Matchers::Contains;
  // A packed batch: the same cu_seqlens pointer with other content is refused (the content is copied
  // at save time); restored, the saved backward gives the recompute gradients again.
  BwdCase p;
  p.c = fixed_case(1, 100, 2, 32, 32, GateMode::random, true, 131, {0, 30, 70, 100});
  OnDevice packed(make_dev_problem(Op::gated_delta_rule, p, DType::f32), DType::f32);
  cuda::SavedForward saved_packed;
  packed.forward(Version::best, &saved_packed);
  REQUIRE(packed.a.fwd.cu_seqlens == packed.cu.data());
  packed.cu[1] = 31;  // same pointer, same N, other content
  CHECK_THAT(error_of([&] { packed.backward(BwdVersion::best, &saved_packed); }),
             Contains("'saved'") && Contains("sequences"));
  packed.cu[1] = 30;
  check_same_grads(packed.backward(BwdVersion::best), packed.backward(BwdVersion::best, &saved_packed));

  BwdCase b;
  b.c = fixed_case(1, 70, 2, 32, 32, GateMode::random, true, 132);
  OnDevice kda(make_dev_problem(Op::kda, b, DType::f32), DType::f32);
  cuda::SavedForward saved;
  kda.forward(Version::best, &saved);
  // Another q or v buffer of the same size: the pointer that differs is named.
  Dev other;
  other.alloc(std::max(kda.q.bytes, kda.v.bytes));
  cuda::DeviceBwdArgs other_q = kda.a, other_v = kda.a;
  other_q.fwd.q = other.p, other_v.fwd.v = other.p;
  CHECK_THAT(error_of([&] { cuda::backward_device(other_q, BwdVersion::best, &saved); }),
             Contains("'saved'") && Contains("the device pointer q "));
  CHECK_THAT(error_of([&] { cuda::backward_device(other_v, BwdVersion::best, &saved); }),
             Contains("'saved'") && Contains("the device pointer v "));
  // Another B, H, K or V (the same buffers: refused before any launch).
  using Dim = std::int64_t cuda::DeviceArgs::*;
  for (const auto& [name, dim] : {std::pair<const char*, Dim>{"B", &cuda::DeviceArgs::B}, {"H", &cuda::DeviceArgs::H},
                                  {"K", &cuda::DeviceArgs::K}, {"V", &cuda::DeviceArgs::V}}) {
    cuda::DeviceBwdArgs x = kda.a;
    x.fwd.*dim += 1;
    INFO("another " << name);
    CHECK_THAT(error_of([&] { cuda::backward_device(x, BwdVersion::best, &saved); }), Contains("'saved'") && Contains("shape"));
  }
  // Pointers KDA does not read (GDN2's b and w) may differ: accepted, the same gradients.
  cuda::DeviceBwdArgs stale = kda.a;
  stale.fwd.b = stale.fwd.w = other.p;
  kda.nan_fill_grads();
  cuda::poison_device_workspaces();
  cuda::backward_device(stale, BwdVersion::best, &saved);
  CU(cudaDeviceSynchronize());
  const auto from_stale = kda.grads();  // before the recompute overwrites the buffers
  check_same_grads(kda.backward(BwdVersion::best), from_stale);
}

// ---------------------------------------------------------------------------------------------
// (d) Streams: the SavedForward's events order a forward and a backward on two streams.
// ---------------------------------------------------------------------------------------------

namespace {
/// About 0.1 s at the H200's clock: far longer than the host takes to queue the calls that follow.
constexpr long long kSpinCycles = 200'000'000;

/// Two problems of the same shape (so that a refill reuses the object's memory) with other values.
struct TwoProblems {
  BwdCase b1, b2;
  OnDevice d1, d2;
  static BwdCase with_seed(std::uint64_t seed) {
    BwdCase b;
    b.c = fixed_case(1, 130, 2, 64, 64, GateMode::random, true, seed);
    return b;
  }
  TwoProblems()
      : b1(with_seed(141)), b2(with_seed(142)), d1(make_dev_problem(Op::kda, b1, DType::f32), DType::f32),
        d2(make_dev_problem(Op::kda, b2, DType::f32), DType::f32) {}
};

struct Streams {
  cudaStream_t s1 = nullptr, s2 = nullptr;
  Streams() {
    if (cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) != cudaSuccess)
      throw std::runtime_error("cudaStreamCreateWithFlags failed");
  }
  ~Streams() {
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
  }
};
}  // namespace

TEST_CASE("CUDA saved backward on another stream waits for the saving forward without a synchronisation") {
  SKIP_WITHOUT_GPU();
  TwoProblems t;
  cuda::SavedForward saved;
  t.d2.forward(Version::best, &saved);  // the object holds the OTHER problem's intra outputs now
  const auto want = t.d1.backward(BwdVersion::best);  // recompute (also grows the backward's workspace)
  Streams st;
  t.d1.nan_fill_grads();
  CU(cudaDeviceSynchronize());
  // The refill on s1 runs after the spin; the backward on s2 must wait for it (else it reads d2's).
  spin_kernel<<<1, 1, 0, st.s1>>>(kSpinCycles);
  CU(cudaGetLastError());
  cuda::DeviceArgs f = t.d1.a.fwd;
  f.stream = st.s1;
  cuda::forward_device(f, Version::best, &saved);
  cuda::DeviceBwdArgs a = t.d1.a;
  a.fwd.stream = st.s2;
  cuda::backward_device(a, BwdVersion::best, &saved);
  CU(cudaDeviceSynchronize());
  check_same_grads(want, t.d1.grads());
}

TEST_CASE("CUDA refill of a SavedForward on another stream waits for the backward that still reads it") {
  SKIP_WITHOUT_GPU();
  TwoProblems t;
  cuda::SavedForward saved;
  t.d1.forward(Version::best, &saved);
  const auto want = t.d1.backward(BwdVersion::best);  // recompute (also grows the backward's workspace)
  Streams st;
  t.d1.nan_fill_grads();
  CU(cudaDeviceSynchronize());
  // The backward on s2 runs after the spin; the refill for d2 on s1 must wait for it (else it
  // overwrites the intra outputs the backward is about to read).
  spin_kernel<<<1, 1, 0, st.s2>>>(kSpinCycles);
  CU(cudaGetLastError());
  cuda::DeviceBwdArgs a = t.d1.a;
  a.fwd.stream = st.s2;
  cuda::backward_device(a, BwdVersion::best, &saved);
  cuda::DeviceArgs f = t.d2.a.fwd;
  f.stream = st.s1;
  const std::size_t bytes_before = saved.bytes();
  cuda::forward_device(f, Version::best, &saved);
  CHECK(saved.bytes() == bytes_before);  // reused in place: no reallocation (which would synchronise)
  CU(cudaDeviceSynchronize());
  check_same_grads(want, t.d1.grads());
}

// ---------------------------------------------------------------------------------------------
// (d) Saved states: the backward skips its states kernel, bit for bit.
// ---------------------------------------------------------------------------------------------

TEST_CASE("CUDA saving forward with states gives the forward output bit for bit and the saved backward without its states kernel gives the recompute gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  cuda::SavedForward reused;  // refilled by every rung of every case, with and without states in turn
  for (const BwdCase& b : fixed_cases())
    for (Op op : kOps)
      for (DType gdt : {DType::f32, DType::bf16}) check_saved_states_case(b, op, gdt, reused);
}

TEST_CASE("CUDA saving forward with states stores every state and v_new at value tiles of 16 and 32 and 64 columns") {
  // pick_bv gives 16 columns in every fixed case (small N H); LINATTN_V2_BV forces the forward's and
  // the backward's state kernels alike (v2_tensorcore.cu pick_bv), so the saving kernel's stores are
  // checked against kBwd's at every tile width, incl. a partial last tile (V = 200, 20) and V < BV. At 64
  // columns DeltaNet and GDN run rung 9's lean pair (v2_state_lean_save against v2_state_bwd_lean, since
  // session 15; v9_in_best), KDA and GDN2 the kSave / kBwd pair.
  SKIP_WITHOUT_GPU();
  struct Unset {
    ~Unset() { ::unsetenv("LINATTN_V2_BV"); }
  } unset;
  const std::vector<BwdCase> all = fixed_cases();
  cuda::SavedForward reused;
  for (const char* bv : {"16", "32", "64"}) {
    ::setenv("LINATTN_V2_BV", bv, 1);
    INFO("LINATTN_V2_BV=" << bv);
    for (std::size_t i : {std::size_t(2), std::size_t(5), std::size_t(6), std::size_t(7), std::size_t(8)})
      for (Op op : kOps)  // rung 28: its bf16 saving kernels (kSbf) at every width too (session 25's review)
        check_saved_states_case(all.at(i), op, DType::f32, reused,
                                {BwdVersion::best, BwdVersion::v16_b9one, BwdVersion::v28_sbf16});
  }
}

TEST_CASE("CUDA saving forward and every saved backward rung follow forward rung 9 where best runs it bit for bit") {
  // Where forward `best` runs rung 9 (v9_in_best: DeltaNet and GDN in bf16 with 64-column state tiles, session
  // 15), the saving forward runs rung 9's lean state kernel (o, ht as the plain forward's; with states, the lean
  // chain's S and v_new) and every levels backward rung recomputes the lean states: tests (a) and (d) for every
  // saved rung, once where pick_bv gives 64 columns by itself (N H V / 64 = 160 >= 132) and once with
  // LINATTN_V2_BV=64 forcing it on a fixed case (K = V = 128, ragged; the packed batch of short sequences).
  // LINATTN_LEAN_SAVED_QUICK=1 (for compute-sanitizer): the first case, GDN, float32 gates, backward best only.
  SKIP_WITHOUT_GPU();
  const bool quick = std::getenv("LINATTN_LEAN_SAVED_QUICK") != nullptr;
  const std::vector<BwdVersion> rungs = quick ? std::vector<BwdVersion>{BwdVersion::best} : saved_rungs();
  struct Unset {
    ~Unset() { ::unsetenv("LINATTN_V2_BV"); }
  } unset;
  ::unsetenv("LINATTN_V2_BV");
  BwdCase natural;
  natural.c = fixed_case(5, 70, 16, 64, 128, GateMode::random, true, 110);
  natural.custom_scale = true, natural.with_dht = true;
  const std::vector<BwdCase> all = fixed_cases();
  cuda::SavedForward reused;
  for (int forced = 0; forced < (quick ? 1 : 2); ++forced) {
    if (forced) ::setenv("LINATTN_V2_BV", "64", 1);
    INFO("LINATTN_V2_BV=" << (forced ? "64" : "unset"));
    const std::vector<BwdCase> cases = forced ? std::vector<BwdCase>{all.at(2), all.at(5)} : std::vector<BwdCase>{natural};
    for (const BwdCase& b : cases)
      for (Op op : {Op::delta_rule, Op::gated_delta_rule})
        for (DType gdt : {DType::f32, DType::bf16}) {
          if (quick && (op != Op::gated_delta_rule || gdt != DType::f32)) continue;
          check_saved_case(b, op, gdt, reused, rungs);
          check_saved_states_case(b, op, gdt, reused, rungs);
        }
  }
}

TEST_CASE("CUDA saved backward with states refuses another initial state and without states accepts it") {
  // With states the saved S starts from the forward's initial state (the backward's own states
  // kernel, skipped, would start from the backward's): another pointer, or none, must be refused.
  SKIP_WITHOUT_GPU();
  using Catch::Matchers::Contains;
  BwdCase b;
  b.c = fixed_case(1, 70, 2, 32, 32, GateMode::random, true, 133);
  OnDevice dev(make_dev_problem(Op::gated_delta_rule, b, DType::f32), DType::f32);
  REQUIRE(dev.a.fwd.initial_state != nullptr);
  Dev other;  // the same values at another address
  other.alloc(dev.h0.bytes);
  CU(cudaMemcpy(other.p, dev.h0.p, dev.h0.bytes, cudaMemcpyDeviceToDevice));
  cuda::DeviceBwdArgs moved = dev.a, none = dev.a;
  moved.fwd.initial_state = static_cast<const float*>(other.p);
  none.fwd.initial_state = nullptr;
  cuda::SavedForward with_states;
  dev.forward(Version::best, &with_states, true);
  REQUIRE(with_states.has_states());
  for (const cuda::DeviceBwdArgs* x : {&moved, &none})
    CHECK_THAT(error_of([&] { cuda::backward_device(*x, BwdVersion::best, &with_states); }),
               Contains("'saved'") && Contains("initial_state"));
  const auto want = dev.backward(BwdVersion::best);
  check_same_grads(want, dev.backward(BwdVersion::best, &with_states));  // the same pointer: accepted
  // Without states the backward's own states kernel reads its initial_state: another pointer to the
  // same values is accepted and gives the same gradients.
  cuda::SavedForward plain;
  dev.forward(Version::best, &plain);
  REQUIRE(!plain.has_states());
  dev.nan_fill_grads();
  cuda::poison_device_workspaces();
  cuda::backward_device(moved, BwdVersion::best, &plain);
  CU(cudaDeviceSynchronize());
  check_same_grads(want, dev.grads());
}

TEST_CASE("CUDA saving forward with states but no SavedForward is a linattn Error naming save") {
  // Refused before any device work: runs without a GPU too.
  cuda::DeviceArgs f;
  f.op = Op::kda, f.dtype = DType::bf16;
  f.B = 1, f.T = 4, f.H = 1, f.K = 16, f.V = 16;
  alignas(16) float x[4] = {};
  f.q = f.k = f.v = f.g = f.beta = x;
  f.o = x;
  f.scale = 0.25f;
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of([&] { cuda::forward_device(f, Version::best, nullptr, true); }),
             Contains("forward_device") && Contains("'save'") && Contains("with_states") && Contains("null"));
  cuda::SavedForward s;
  CHECK(!s.has_states());
  // The states layout keeps v_new, A and S (KParams::keep) besides the tc workspace, where the plain one
  // keeps A: so it exceeds the plain layout by v_new and S, up to the 256-byte roundings (chunk_cuda.hpp).
  for (const auto& [B, T, H, K, V] : {std::array<std::int64_t, 5>{1, 4, 1, 16, 16}, {2, 130, 3, 40, 24},
                                      {8, 4096, 16, 128, 128}}) {
    f.B = B, f.T = T, f.H = H, f.K = K, f.V = V;
    INFO("B " << B << " T " << T << " H " << H << " K " << K << " V " << V);
    const std::int64_t rows = B * T * H, chunks = B * ((T + 63) / 64);
    const std::int64_t keep = 4 * (rows * (V + 64) + chunks * H * K * V), keep256 = (keep + 255) / 256 * 256;
    const std::int64_t with = std::int64_t(cuda::SavedForward::bytes_needed(f, true));
    const std::int64_t without = std::int64_t(cuda::SavedForward::bytes_needed(f));
    // with = keep256 + tc, without = align256(tc) + 4 rows 64, so keep256 - 4 rows 64 - (with - without)
    // is align256(tc) - tc, in [0, 255].
    const std::int64_t slack = keep256 - 4 * rows * 64 - (with - without);
    CHECK(slack >= 0);
    CHECK(slack <= 255);
  }
  // The benchmark shape's figure in chunk_cuda.hpp (session 15, with lean_g's 2 MiB; 1,681,916,160 in sessions
  // 12-14, 6,916,407,552 bytes before the lean layout).
  f.B = 8, f.T = 4096, f.H = 16, f.K = 128, f.V = 128;
  CHECK(cuda::SavedForward::bytes_needed(f, true) == std::size_t(1'684'013'312));
}

TEST_CASE("CUDA saving forward with states in bf16 is read by rungs 28 to 33 only and states_bf16 needs with_states") {
  // An object whose states are bf16 (forward_device's states_bf16; rung 28, bwd_v28_sbf16.cu) is read by rungs 28 to 33
  // and best (rung 33 since session 32) and refused by every other saved rung with a linattn::Error naming 'saved' and rung 28; states_bf16 without with_states is refused before any
  // device work; outside rung 28's range (GDN, or V % 8 != 0) the states stay float32 and every rung reads them.
  using Catch::Matchers::Contains;
  {
    cuda::DeviceArgs f;
    f.op = Op::delta_rule, f.dtype = DType::bf16;
    f.B = 1, f.T = 4, f.H = 1, f.K = 16, f.V = 16;
    alignas(16) float x[4] = {};
    f.q = f.k = f.v = f.beta = x;
    f.o = x;
    f.scale = 0.25f;
    cuda::SavedForward s;
    CHECK_THAT(error_of([&] { cuda::forward_device(f, Version::best, &s, false, true); }),
               Contains("forward_device") && Contains("'states_bf16'") && Contains("with_states"));
    CHECK(s.empty());
  }
  SKIP_WITHOUT_GPU();
  // Two shapes: one value and one key slab (K = 64, V = 48), and three value slabs with two key slabs (K = 128, V = 136:
  // G1''s float32-S layout with nV > 1 under rung 32's staged stores; session 27's review).
  for (const Case& cs : {fixed_case(2, 150, 2, 64, 48, GateMode::random, true, 140),
                         fixed_case(1, 200, 2, 128, 136, GateMode::random, true, 141)})
  for (Op op : {Op::delta_rule, Op::gated_delta_rule}) {
    BwdCase b;
    b.c = cs;
    INFO(ref::op_name(op) << " " << b);
    const DevProblem d = make_dev_problem(op, b, DType::f32);
    OnDevice dev(d, DType::f32);
    cuda::SavedForward saved;
    dev.forward(Version::best, &saved, true, true);
    CHECK(saved.states_bf16() == (op == Op::delta_rule));
    CHECK_THAT(saved.describe(), Contains(op == Op::delta_rule ? "with states in bfloat16" : "with states"));
    const auto want = dev.backward(BwdVersion::v28_sbf16);
    check_same_grads(want, dev.backward(BwdVersion::v28_sbf16, &saved));
    cuda::SavedForward f32_states;  // without states_bf16: float32 states, which rung 28 reads through rung 27
    dev.forward(Version::best, &f32_states, true);
    CHECK(!f32_states.states_bf16());
    check_same_grads(want, dev.backward(BwdVersion::v28_sbf16, &f32_states));
    // One object refilled with states_bf16 off, on, off (session 25's review): the flag follows every fill, and every
    // rung that accepts the object reads it as it was last filled.
    for (const bool bf : {false, true, false}) {
      INFO("refill with states_bf16 = " << bf);
      dev.forward(Version::best, &f32_states, true, bf);
      CHECK(f32_states.states_bf16() == (bf && op == Op::delta_rule));
      check_same_grads(want, dev.backward(BwdVersion::v28_sbf16, &f32_states));
      if (!f32_states.states_bf16()) check_same_grads(want, dev.backward(BwdVersion::v27_dvplanes, &f32_states));
    }
    // Rung 29 (bwd_v29_b1hi.cu, `best` in session 26) reads either object and gives its own recomputed gradients
    // from both: with float32 states its G1' is rung 27's, which rounds S on chip to the bf16 values rung 28's G1' copies.
    const auto want29 = dev.backward(BwdVersion::v29_b1hi);
    check_same_grads(want29, dev.backward(BwdVersion::v29_b1hi, &saved));
    check_same_grads(want29, dev.backward(BwdVersion::v29_b1hi, &f32_states));
    // Rung 31 (bwd_v31_dkbf16.cu) likewise: float32 states through bwd_v31_g1_f32s (rung 27's G1' with kDkH).
    const auto want31 = dev.backward(BwdVersion::v31_dkbf16);
    check_same_grads(want31, dev.backward(BwdVersion::v31_dkbf16, &saved));
    check_same_grads(want31, dev.backward(BwdVersion::v31_dkbf16, &f32_states));
    // Rung 32 (bwd_v32_g1stage.cu, `best` in sessions 27-31) is rung 31 bit for bit, from either object.
    check_same_grads(want31, dev.backward(BwdVersion::v32_g1stage, &saved));
    check_same_grads(want31, dev.backward(BwdVersion::v32_g1stage, &f32_states));
    // Rung 33 (bwd_v33_g2stage.cu, `best` since session 32) is rung 32 bit for bit, from either object.
    check_same_grads(want31, dev.backward(BwdVersion::v33_g2stage, &saved));
    check_same_grads(want31, dev.backward(BwdVersion::v33_g2stage, &f32_states));
    check_same_grads(want31, dev.backward(BwdVersion::best, &saved));
    check_same_grads(want31, dev.backward(BwdVersion::best, &f32_states));
    for (BwdVersion ver : {BwdVersion::v27_dvplanes, BwdVersion::v18_lean, BwdVersion::v5_levels_front}) {
      INFO(cuda::bwd_version_name(ver));
      if (op == Op::delta_rule) {
        CHECK_THAT(error_of([&] { cuda::backward_device(dev.a, ver, &saved); }),
                   Contains("'saved'") && Contains("bwd_v28_sbf16") && Contains("states_bf16"));
      } else {  // GDN: float32 states, read by every rung
        check_same_grads(dev.backward(ver), dev.backward(ver, &saved));
      }
    }
  }
}
