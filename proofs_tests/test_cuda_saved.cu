// proofs_tests/test_cuda_saved.cu -- the training forward that keeps what the backward's prepare
// would recompute (optimized/cuda/chunk_cuda.hpp, SavedForward; issue 6) and the backward that reads
// it: forward_device(args, version, &saved) gives o and the final state of forward_device bit for
// bit, and backward_device(args, version, &saved) gives the gradients of backward_device(args,
// version) bit for bit for the rungs whose prepare is forward rung 4's intra kernel (5 to 8, best,
// and any later rung the ladder names), so the saved path inherits every property the backward
// tests prove of those rungs; a property checks it against the float64 reference backward too.
// Bad uses (another op, T, dtype, an empty or moved-from object, rungs 1-4) are linattn::Errors
// naming 'saved' (or 'version' / 'save' for the forward).
//
// Every call goes through the device API on buffers this file allocates; gradient, o and final-state
// buffers are filled with NaN bits first, and before every backward the process-wide workspaces are
// too (cuda::poison_device_workspaces), so a saved path that reads what no kernel of its call wrote
// -- e.g. the previous recompute backward's A -- fails instead of passing on stale equal values. A
// new SavedForward's buffer starts as NaN bits as well (forward_device), so A or a workspace tile the
// forward fails to write shows.
// Without a usable GPU every test that needs one says why (Catch2 WARN) and returns; the argument
// checks that need no device run everywhere.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "generators.hpp"
#include "optimized/cuda/chunk_cuda.hpp"

using namespace linattn;
using namespace linattn::testing;
using cuda::BwdVersion;
using cuda::DType;
using cuda::Version;

namespace {

bool gpu_ok(std::string& why) {
  static std::string reason;
  static const bool ok = cuda::device_available(&reason);
  why = reason;
  return ok;
}

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    std::string why_;                                                       \
    if (!gpu_ok(why_)) {                                                    \
      WARN("no CUDA device: " << why_ << " -- this CUDA test is skipped");  \
      return;                                                               \
    }                                                                       \
  } while (0)

#define CU(expr) REQUIRE((expr) == cudaSuccess)

const Op kOps[] = {Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2};
const char* dname(DType dt) { return dt == DType::f32 ? "f32" : "bf16"; }

/// The backward rungs whose prepare is forward rung 4's intra kernel: best, 5 to 8, and any later
/// rung the ladder names (bwd_version_name gives "?" past its end).
std::vector<BwdVersion> saved_rungs() {
  std::vector<BwdVersion> r = {BwdVersion::best};
  for (int v = static_cast<int>(BwdVersion::v5_levels_front); v < 32; ++v)
    if (std::string(cuda::bwd_version_name(static_cast<BwdVersion>(v))) != "?") r.push_back(static_cast<BwdVersion>(v));
  return r;
}

// ---------------------------------------------------------------------------------------------
// Problems (as test_cuda_backward.cu builds them: the reference sees exactly the device's inputs).
// ---------------------------------------------------------------------------------------------

struct BwdCase {
  Case c;
  bool with_dht = true, custom_scale = false;
};

std::ostream& operator<<(std::ostream& os, const BwdCase& b) {
  return os << b.c << " dht=" << b.with_dht << " scale=" << (b.custom_scale ? "0.7" : "default");
}

/// The problem in float32 as the device sees it (q, k, v, do rounded to bf16; the gates too with
/// bf16 gates), with do and dht.
struct DevProblem {
  Problem<float> p;
  Tensor<float> do_, dht;
};

DevProblem make_dev_problem(Op op, const BwdCase& b, DType gdt) {
  Problem<double> pd = make_problem<double>(op, b.c, /*unit_keys=*/true);
  if (b.custom_scale) pd.opt.scale = 0.7;
  DevProblem d;
  d.p = cast_problem<float>(pd);
  std::mt19937_64 rng(b.c.seed ^ 0x5851f42d4c957f2dULL);
  std::normal_distribution<double> nd(0.0, 1.0);
  d.do_ = Tensor<float>({b.c.B, b.c.T, b.c.H, b.c.V});
  for (float& x : d.do_) x = float(nd(rng));
  if (b.with_dht) {
    d.dht = Tensor<float>({pd.N, b.c.H, b.c.K, b.c.V});
    for (float& x : d.dht) x = float(nd(rng));
  }
  d.p.q = cuda::round_to_bf16(d.p.q), d.p.k = cuda::round_to_bf16(d.p.k);
  d.p.v = cuda::round_to_bf16(d.p.v), d.do_ = cuda::round_to_bf16(d.do_);
  if (gdt == DType::bf16) {
    Gates<float>& g = d.p.gates;
    g.g = cuda::round_to_bf16(g.g), g.beta = cuda::round_to_bf16(g.beta);
    g.b = cuda::round_to_bf16(g.b), g.w = cuda::round_to_bf16(g.w);
  }
  return d;
}

/// The float64 reference backward on the inputs the device sees.
ref::RecurrentGrads<double> reference_backward(const DevProblem& d) {
  const Problem<double> p = cast_problem<double>(d.p);
  const Tensor<double> do_ = cast<double>(d.do_), dht = cast<double>(d.dht);
  switch (p.op) {
    case Op::delta_rule:
      return ref::naive_recurrent_delta_rule_backward(p.q, p.k, p.v, p.gates.beta, do_, dht, p.opt);
    case Op::gated_delta_rule:
      return ref::naive_recurrent_gated_delta_rule_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, do_, dht,
                                                            p.opt);
    case Op::kda:
      return ref::naive_recurrent_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, do_, dht, p.opt);
    case Op::gdn2:
      return ref::naive_recurrent_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b, p.gates.w, do_, dht, p.opt);
    default: break;
  }
  return {};
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
                                                                           cuda::SavedForward* save = nullptr) {
    o.nan_fill(), ht.nan_fill();
    if (save) cuda::forward_device(a.fwd, ver, save);
    else cuda::forward_device(a.fwd, ver);
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("forward failed");
    return {o.raw(), ht.raw()};
  }

  /// The gradients of backward_device(version[, saved]), every buffer and workspace NaN-filled before.
  ref::RecurrentGrads<float> backward(BwdVersion ver, const cuda::SavedForward* saved = nullptr) {
    for (Dev* x : {&dq, &dk, &dv, &dg, &dbeta, &db, &dw, &dh0})
      if (x->p) x->nan_fill();
    cuda::poison_device_workspaces();
    if (saved) cuda::backward_device(a, ver, saved);
    else cuda::backward_device(a, ver);
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("backward failed");
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

/// y's gradients equal x's bit for bit (the same set defined). The caller's INFO names the case.
void check_same_grads(const ref::RecurrentGrads<float>& x, const ref::RecurrentGrads<float>& y) {
  for (const auto& [name, a, c] : pairs(x, y)) {
    INFO(name);
    REQUIRE(a->defined() == c->defined());
    if (a->defined()) CHECK(std::memcmp(a->data(), c->data(), sizeof(float) * a->numel()) == 0);
  }
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
/// power of two, an initial state or not, a packed batch of many short sequences (with empty ones).
std::vector<Case> fixed_cases() {
  std::vector<index_t> cu = {0};
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> len(0, 9);
  for (int s = 0; s < 40; ++s) cu.push_back(cu.back() + len(rng));
  cu.push_back(cu.back() + 70);  // one sequence longer than a chunk
  cu.push_back(cu.back());       // and an empty one at the end
  return {
      fixed_case(2, 1, 2, 64, 64, GateMode::random, true, 101),            // T = 1
      fixed_case(1, 65, 2, 64, 48, GateMode::random, false, 102),          // ragged, K != V
      fixed_case(2, 130, 2, 128, 128, GateMode::mixed, true, 103),         // K = V = 128, ragged
      fixed_case(1, 100, 3, 40, 72, GateMode::random, true, 104),          // K = 40 (not a power of two)
      fixed_case(1, 63, 1, 100, 36, GateMode::extreme, false, 105),        // K = 100, g down to -1000
      fixed_case(1, cu.back(), 2, 64, 64, GateMode::random, true, 106, cu),  // packed batch
  };
}

/// Test (a) for one case, operator and gate dtype: o and the final state of the saving forward
/// equal forward_device's bit for bit, and for every saved rung the saved backward's gradients
/// equal the recompute backward's bit for bit; a reused SavedForward (filled before by another
/// call) gives them too; best's are within the bounds of the reference.
void check_saved_case(const Case& c, Op op, DType gdt, cuda::SavedForward& reused) {
  BwdCase b;
  b.c = c, b.custom_scale = c.seed % 2 == 0;
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
  dev.forward(Version::v4_levels, &reused);
  for (BwdVersion ver : saved_rungs()) {
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

/// The text of the linattn::Error f throws, or "no error".
template <class F>
std::string err_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// (a) Bit for bit: the saving forward's o, the saved backward's gradients.
// ---------------------------------------------------------------------------------------------

TEST_CASE("CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit") {
  SKIP_WITHOUT_GPU();
  cuda::SavedForward reused;  // refilled by every case: its memory reused or grown
  for (const Case& c : fixed_cases())
    for (Op op : kOps)
      for (DType gdt : {DType::f32, DType::bf16}) check_saved_case(c, op, gdt, reused);
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
  float x = 0;
  a.fwd.q = a.fwd.k = a.fwd.v = a.fwd.g = a.fwd.beta = &x;
  a.fwd.scale = 0.25f;
  a.do_ = a.dq = a.dk = a.dv = a.dg = a.dbeta = &x;
  a.dh0 = &x;
  using Catch::Matchers::Contains;
  cuda::SavedForward never_filled;
  CHECK(never_filled.empty());
  CHECK_THAT(err_of([&] { cuda::backward_device(a, BwdVersion::best, &never_filled); }),
             Contains("backward_device") && Contains("'saved'") && Contains("empty SavedForward"));
  cuda::SavedForward moved_to(std::move(never_filled));
  CHECK_THAT(err_of([&] { cuda::backward_device(a, BwdVersion::v8_wide, &moved_to); }),
             Contains("'saved'") && Contains("empty SavedForward"));
}

TEST_CASE("CUDA saving forward refuses a rung or a call whose intra kernel is not forward rung 4 with a linattn Error") {
  // Refused before any device work: runs without a GPU too.
  cuda::DeviceArgs f;
  f.op = Op::delta_rule, f.dtype = DType::bf16;
  f.B = 1, f.T = 4, f.H = 1, f.K = 16, f.V = 16;
  float x = 0;
  f.q = f.k = f.v = f.beta = &x;
  f.o = &x;
  f.scale = 0.25f;
  cuda::SavedForward s;
  using Catch::Matchers::Contains;
  CHECK_THAT(err_of([&] { cuda::forward_device(f, Version::v1_simple, &s); }),
             Contains("forward_device") && Contains("'version'") && Contains("v1_simple"));
  CHECK_THAT(err_of([&] { cuda::forward_device(f, Version::v6_lean, &s); }), Contains("'version'") && Contains("v6_lean"));
  f.dtype = DType::f32;  // best would run v1 for float32 inputs
  CHECK_THAT(err_of([&] { cuda::forward_device(f, Version::best, &s); }), Contains("'save'") && Contains("bfloat16"));
  f.dtype = DType::bf16, f.K = 8;  // K < 16: v1 too
  CHECK_THAT(err_of([&] { cuda::forward_device(f, Version::v4_levels, &s); }), Contains("'save'") && Contains("K = 8"));
  CHECK(s.empty());
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
  CHECK_THAT(err_of([&] { gdn2.backward(BwdVersion::best, &saved); }),
             Contains("backward_device") && Contains("'saved'") && Contains("op (kda against gdn2)"));
  // Another T (the same buffers, a shorter call).
  cuda::DeviceBwdArgs shorter = kda.a;
  shorter.fwd.T = 65;
  CHECK_THAT(err_of([&] { cuda::backward_device(shorter, BwdVersion::best, &saved); }),
             Contains("'saved'") && Contains("shape"));
  // Another gate dtype.
  cuda::DeviceBwdArgs other_dtype = kda.a;
  other_dtype.fwd.gate_dtype = DType::bf16;
  CHECK_THAT(err_of([&] { cuda::backward_device(other_dtype, BwdVersion::best, &saved); }),
             Contains("'saved'") && Contains("dtype"));
  // Another scale.
  cuda::DeviceBwdArgs other_scale = kda.a;
  other_scale.fwd.scale *= 2;
  CHECK_THAT(err_of([&] { cuda::backward_device(other_scale, BwdVersion::best, &saved); }),
             Contains("'saved'") && Contains("scale"));
  // Rungs whose prepare is not rung 4's intra kernel.
  for (BwdVersion ver : {BwdVersion::v1_simple, BwdVersion::v2_tensorcore, BwdVersion::v3_async, BwdVersion::v4_tc_tail}) {
    INFO(cuda::bwd_version_name(ver));
    CHECK_THAT(err_of([&] { kda.backward(ver, &saved); }), Contains("'saved'") && Contains(cuda::bwd_version_name(ver)));
  }
  // Moved from after filling: empty; the object moved to works.
  cuda::SavedForward moved_to = std::move(saved);
  CHECK(saved.empty());
  CHECK_THAT(err_of([&] { kda.backward(BwdVersion::best, &saved); }), Contains("'saved'") && Contains("empty"));
  check_same_grads(kda.backward(BwdVersion::best), kda.backward(BwdVersion::best, &moved_to));
  moved_to.release();
  CHECK(moved_to.empty());
  CHECK_THAT(err_of([&] { kda.backward(BwdVersion::best, &moved_to); }), Contains("'saved'") && Contains("empty"));
}
