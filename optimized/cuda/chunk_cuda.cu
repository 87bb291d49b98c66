// optimized/cuda/chunk_cuda.cu -- the host side of the CUDA kernels: argument checks, the chunk
// table of packed batches, the workspace, dispatch to a version of the ladder, and the host-Tensor
// convenience functions declared in chunk_cuda.hpp.
#include "optimized/cuda/chunk_cuda.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <utility>

#include "optimized/cuda/route.hpp"
#include "optimized/cuda/versions.cuh"

namespace linattn::cuda {

const char* version_name(Version v) {
  switch (v) {
    case Version::best: return "best";
    case Version::v1_simple: return "v1_simple";
    case Version::v2_tensorcore: return "v2_tensorcore";
    case Version::v3_async: return "v3_async";
    case Version::v4_levels: return "v4_levels";
    case Version::v5_split: return "v5_split";
    case Version::v6_lean: return "v6_lean";
    case Version::v7_overlap: return "v7_overlap";
    case Version::v8_wgmma: return "v8_wgmma";
    case Version::v9_lean_overlap: return "v9_lean_overlap";
    case Version::v10_pipeline: return "v10_pipeline";
  }
  return "?";
}

bool device_available(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    if (why)
      *why = err != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err)
                                : std::string("no CUDA device found");
    cudaGetLastError();  // clear the sticky-free error state
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    if (why) *why = "cudaGetDeviceProperties failed";
    return false;
  }
  if (prop.major != 9) {
    if (why)
      *why = std::string("the kernels are built for sm_90a (Hopper) but device 0 (") + prop.name +
             ") has compute capability " + std::to_string(prop.major) + "." +
             std::to_string(prop.minor);
    return false;
  }
  return true;
}

namespace {

using detail::KParams;

/// Grow-only device buffer shared by every call of the process.
struct Workspace {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  void* get(std::size_t need) {
    if (need <= bytes) return ptr;
    if (ptr) LINATTN_CUDA_CHECK(cudaFree(ptr));
    ptr = nullptr;
    bytes = 0;
    LINATTN_CUDA_CHECK(cudaMalloc(&ptr, need));
    bytes = need;
    return ptr;
  }
};
Workspace& workspace() {
  static Workspace ws;
  return ws;
}

std::size_t align256(std::size_t x) { return (x + 255) / 256 * 256; }

void require(bool ok, const std::string& arg, const std::string& expected, const std::string& got) {
  if (!ok) fail("linattn::cuda::forward_device", arg, expected, got);
}

/// A call's parameters and its chunk table, checked: what forward_device and backward_device share.
struct Plan {
  KParams p;
  std::vector<int> cu, tok0, seq, first;
  std::size_t table_bytes() const {
    return align256(sizeof(int) * (cu.size() + tok0.size() + seq.size() + first.size()));
  }
  /// Copy the chunk table to the start of `base` and point p at it; p.ws = what follows.
  void place(char* base, cudaStream_t stream) {
    if (!cu.empty()) {
      std::vector<int> table;
      table.reserve(cu.size() + tok0.size() + seq.size() + first.size());
      table.insert(table.end(), cu.begin(), cu.end());
      table.insert(table.end(), tok0.begin(), tok0.end());
      table.insert(table.end(), seq.begin(), seq.end());
      table.insert(table.end(), first.begin(), first.end());
      LINATTN_CUDA_CHECK(cudaMemcpyAsync(base, table.data(), sizeof(int) * table.size(),
                                         cudaMemcpyHostToDevice, stream));
      int* t = reinterpret_cast<int*>(base);
      p.cu = t;
      p.chunk_tok0 = t + cu.size();
      p.chunk_seq = t + cu.size() + tok0.size();
      p.seq_chunk0 = t + cu.size() + tok0.size() + seq.size();
    }
    p.ws = base + table_bytes();
  }
};

/// Refuse a device array that does not start on a 16-byte boundary (null: not given, accepted).
void require_aligned16(const std::string& fn, const void* ptr, const std::string& arg) {
  const std::uintptr_t off = reinterpret_cast<std::uintptr_t>(ptr) % 16;
  if (ptr && off != 0)
    fail(fn, arg, "a device pointer aligned to 16 bytes (rows are loaded and stored by 16-byte vectors)",
         "an address " + std::to_string(off) + " bytes past a 16-byte boundary");
}

Plan plan_call(const DeviceArgs& a, const std::string& fn) {
  auto require = [&](bool ok, const std::string& arg, const std::string& expected, const std::string& got) {
    if (!ok) fail(fn, arg, expected, got);
  };
  require(a.op != Op::linear_attn, "op", "delta_rule, gated_delta_rule, kda or gdn2", "linear_attn");
  require(a.B >= 0 && a.T >= 0, "q.shape", "non-negative B and T",
          "B = " + std::to_string(a.B) + ", T = " + std::to_string(a.T));
  // Every kernel launches one grid row per head (gridDim.y = H, at most 65,535): more would fail at launch.
  require(a.H >= 1 && a.H <= 65535, "q.shape[2] (H)", "1 <= H <= 65535 (the CUDA grid's y extent)", std::to_string(a.H));
  require(a.K >= 1 && a.K <= kMaxDim, "q.shape[3] (K)", "1 <= K <= 256", std::to_string(a.K));
  require(a.V >= 1 && a.V <= kMaxDim, "v.shape[3] (V)", "1 <= V <= 256", std::to_string(a.V));
  require(a.B * a.T < (std::int64_t(1) << 31) / 64, "q.shape", "B * T < 2^25 tokens",
          std::to_string(a.B * a.T));
  require(std::isfinite(a.scale), "scale", "a finite value", num_str(a.scale));
  const std::int64_t numel_qk = a.B * a.T * a.H * a.K;
  const bool gdn2 = a.op == Op::gdn2;
  const bool gated = a.op != Op::delta_rule;
  require(numel_qk == 0 || !gated || a.g, "g", "a device pointer for " + std::string(ref::op_name(a.op)), "null");
  require(numel_qk == 0 || gdn2 || a.beta, "beta", "a device pointer", "null");
  require(numel_qk == 0 || !gdn2 || (a.b && a.w), "b, w", "device pointers for gdn2", "null");
  // The kernels read and write rows of K or V elements (and states) by 16-byte vectors: an array that
  // does not start on a 16-byte boundary (a view at an odd offset) would fault on the device and lose
  // the CUDA context, so it is refused here. cudaMalloc and torch allocations start on 256 bytes.
  // Per-token arrays (beta, GDN's g) are read element by element and need only their own alignment.
  require_aligned16(fn, a.q, "q");
  require_aligned16(fn, a.k, "k");
  require_aligned16(fn, a.v, "v");
  require_aligned16(fn, a.o, "o");
  require_aligned16(fn, a.initial_state, "initial_state");
  require_aligned16(fn, a.final_state, "final_state");
  if (a.op == Op::kda || gdn2) require_aligned16(fn, a.g, "g");
  if (gdn2) require_aligned16(fn, a.b, "b"), require_aligned16(fn, a.w, "w");

  Plan pl;
  KParams& p = pl.p;
  p.op = static_cast<int>(a.op);
  p.gate = a.op == Op::delta_rule ? detail::kGateNone
                                  : (a.op == Op::gated_delta_rule ? detail::kGateScalar : detail::kGateChannel);
  p.gdn2 = gdn2;
  p.B = int(a.B), p.T = int(a.T), p.H = int(a.H), p.K = int(a.K), p.V = int(a.V);
  p.q = a.q, p.k = a.k, p.v = a.v, p.g = a.g, p.beta = a.beta, p.b = a.b, p.w = a.w, p.o = a.o;
  p.scale = a.scale;
  p.h0 = a.initial_state;
  p.ht = a.final_state;

  // Sequences and the chunk table.
  if (a.cu_seqlens) {
    require(a.B == 1, "q.shape[0] (B)", "1 when cu_seqlens is given (packed sequences)", std::to_string(a.B));
    require(a.num_seqs >= 1, "num_seqs", "at least 1 sequence", std::to_string(a.num_seqs));
    std::vector<index_t> offs(a.cu_seqlens, a.cu_seqlens + a.num_seqs + 1);
    check_offsets(fn, offs, a.B, a.T);
    p.N = int(a.num_seqs);
    pl.cu.assign(offs.begin(), offs.end());
    for (int n = 0; n < p.N; ++n) {
      pl.first.push_back(int(pl.tok0.size()));
      for (int t = pl.cu[n]; t < pl.cu[n + 1]; t += kChunk) pl.tok0.push_back(t), pl.seq.push_back(n);
    }
    p.num_chunks = int(pl.tok0.size());
  } else {
    p.N = int(a.B);
    p.chunks_per_seq = int((a.T + kChunk - 1) / kChunk);
    p.num_chunks = p.N * p.chunks_per_seq;
  }
  return pl;
}

/// The forward ladder, one row per rung (entry points in versions.cuh): whether it takes a call
/// (null: every call), the workspace it needs, its launch.
struct Rung {
  Version version;
  bool (*supports)(const detail::Call&, std::string*);
  std::size_t (*workspace_bytes)(const detail::KParams&);
  void (*launch)(detail::Call);
};
const Rung kLadder[] = {
    {Version::v1_simple, nullptr, detail::v1_workspace_bytes, detail::v1_launch},
    {Version::v2_tensorcore, detail::v2_supports, detail::v2_workspace_bytes, detail::v2_launch},
    {Version::v3_async, detail::v3_supports, detail::v3_workspace_bytes, detail::v3_launch},
    {Version::v4_levels, detail::v4_supports, detail::v4_workspace_bytes, detail::v4_launch},
    {Version::v5_split, detail::v5_supports, detail::v5_workspace_bytes, detail::v5_launch},
    {Version::v6_lean, nullptr, detail::v6_workspace_bytes, detail::v6_launch},
    {Version::v7_overlap, nullptr, detail::v7_workspace_bytes, detail::v7_launch},
    {Version::v8_wgmma, nullptr, detail::v8_workspace_bytes, detail::v8_launch},
    {Version::v9_lean_overlap, nullptr, detail::v9_workspace_bytes, detail::v9_launch},
    {Version::v10_pipeline, nullptr, detail::v10_workspace_bytes, detail::v10_launch},
};

}  // namespace

void forward_device(const DeviceArgs& a, Version version) {
  const std::string fn = "linattn::cuda::forward_device";
  Plan pl = plan_call(a, fn);
  KParams& p = pl.p;
  const std::int64_t numel_qk = a.B * a.T * a.H * a.K;
  require(numel_qk == 0 || (a.q && a.k && a.v && a.o), "q, k, v, o", "device pointers", "null");

  detail::Call call;
  call.dtype = static_cast<int>(a.dtype);
  call.gate_dtype = static_cast<int>(a.gate_dtype);
  call.stream = static_cast<cudaStream_t>(a.stream);

  std::string why;
  // best = rung 10 where rung 4 takes the call, else rung 1 (since session 13; rung 7 in sessions 11-12).
  // Rung 10 runs, for DeltaNet and GDN, rung 7's kernels, pipelined over segments for one long sequence
  // whose state kernel cannot fill the GPU; for KDA and GDN2 rung 4's kernels. Bit for bit with rung 4
  // everywhere, as the saving forward (RESULTS.md "Forward rung 10").
  // Since session 15, rung 9 where its lean state kernel takes 64-column tiles (v9_in_best: B=8 T=4096 H=16
  // V=128), which the saving forward and the backward's recompute follow.
  if (version == Version::best) {
    const detail::Call bc{p, call.dtype, call.gate_dtype, call.stream};
    version = !detail::v4_supports(bc, &why) ? Version::v1_simple
              : detail::v9_in_best(bc)       ? Version::v9_lean_overlap
                                             : Version::v10_pipeline;
  }
  const Rung* rung = nullptr;
  for (const Rung& r : kLadder)
    if (r.version == version) rung = &r;
  if (!rung) fail(fn, "version", "a version of the ladder", std::to_string(static_cast<int>(version)));
  call.p = p;
  if (rung->supports && !rung->supports(call, &why))
    fail(fn, "version", std::string("a call that ") + version_name(version) + " supports", why);
  const std::size_t ws_bytes = rung->workspace_bytes(p);

  char* base = static_cast<char*>(workspace().get(pl.table_bytes() + align256(ws_bytes) + 256));
  pl.place(base, call.stream);
  call.p = p;  // with the chunk table's device pointers, which place() sets
  if (p.N == 0) return;
  rung->launch(call);
}

// ------------------------------------------------------------------------------------------------
// Saved forward (issue 6; chunk_cuda.hpp, SavedForward): the training forward keeps rung 4's intra
// outputs and A (written by rung 7's intra kernel in its range: the same values); the backward rungs of
// saved_bwd_versions() read them instead of launching that kernel again. Two events order the streams (chunk_cuda.hpp, SavedForward, Streams).
// ------------------------------------------------------------------------------------------------

namespace {
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }
void destroy_events(void*& a, void*& b) noexcept {  // no throw: called by the destructor
  if (a) cudaEventDestroy(as_event(a));
  if (b) cudaEventDestroy(as_event(b));
  a = b = nullptr;
}
}  // namespace

SavedForward::~SavedForward() {
  release();
  destroy_events(fwd_done_, bwd_done_);
}

SavedForward::SavedForward(SavedForward&& o) noexcept { *this = std::move(o); }

SavedForward& SavedForward::operator=(SavedForward&& o) noexcept {
  if (this == &o) return *this;
  release();
  destroy_events(fwd_done_, bwd_done_);
  fwd_done_ = o.fwd_done_, bwd_done_ = o.bwd_done_;
  o.fwd_done_ = o.bwd_done_ = nullptr;
  buf_ = o.buf_, bytes_ = o.bytes_, a_offset_ = o.a_offset_, filled_ = o.filled_;
  states_ = o.states_, tc_offset_ = o.tc_offset_, s_bf16_ = o.s_bf16_;
  op_ = o.op_, dtype_ = o.dtype_, gate_dtype_ = o.gate_dtype_;
  B_ = o.B_, T_ = o.T_, H_ = o.H_, K_ = o.K_, V_ = o.V_, N_ = o.N_, scale_ = o.scale_;
  cu_seqlens_ = std::move(o.cu_seqlens_);
  q_ = o.q_, k_ = o.k_, v_ = o.v_, g_ = o.g_, beta_ = o.beta_, b_ = o.b_, w_ = o.w_, h0_ = o.h0_;
  intra_rung_ = o.intra_rung_, kp_ = o.kp_;
  o.buf_ = nullptr, o.bytes_ = 0, o.a_offset_ = 0, o.filled_ = false;
  o.states_ = false, o.tc_offset_ = 0, o.s_bf16_ = false;
  o.cu_seqlens_.clear();
  return *this;
}

void SavedForward::release() {
  if (buf_) {  // no throw: called by the destructor. Freed once the fill and the backwards reading it are done.
    if (fwd_done_) cudaEventSynchronize(as_event(fwd_done_));
    if (bwd_done_) cudaEventSynchronize(as_event(bwd_done_));
    cudaFree(buf_);
  }
  buf_ = nullptr, bytes_ = 0, a_offset_ = 0, filled_ = false;
  states_ = false, tc_offset_ = 0, s_bf16_ = false;
}

namespace {
const char* dtype_str(DType d) { return d == DType::f32 ? "float32" : "bfloat16"; }
/// The layout of a SavedForward's buffer. Without states: the tc workspace with lean_g
/// (tc_lean_workspace_bytes) at 0, then A (a_offset, a_bytes). With states: v_new, A and S in KParams::keep's
/// layout (bwd_saved_states_layout: vn at 0, A at a_offset, S at s_offset), then the tc workspace at
/// tc_offset.
struct SavedLayout {
  std::size_t a_offset = 0, a_bytes = 0, tc_offset = 0, s_offset = 0, vn_offset = 0, bytes = 0;
  std::size_t total() const { return bytes; }
};
SavedLayout saved_layout(const KParams& p, bool states = false) {
  SavedLayout l;
  l.a_bytes = sizeof(float) * std::size_t(p.B) * p.T * p.H * kChunk;
  if (!states) {
    l.a_offset = align256(detail::tc_lean_workspace_bytes(p));  // with lean_g (rung 7's kA kernel writes it)
    l.bytes = l.a_offset + l.a_bytes;
  } else {
    detail::bwd_saved_states_layout(p, l.tc_offset, l.a_offset, l.s_offset, l.vn_offset);
    l.bytes = l.tc_offset + detail::tc_lean_workspace_bytes(p);
  }
  return l;
}
/// A forward rung's name, or its number when it is none of the ladder's.
std::string version_str(Version v) {
  const std::string name = version_name(v);
  return name == "?" ? std::to_string(static_cast<int>(v)) : name;
}
std::string call_str(Op op, DType dt, DType gdt, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K,
                     std::int64_t V, std::int64_t N, float scale) {
  return std::string(ref::op_name(op)) + ", " + dtype_str(dt) + " inputs, " + dtype_str(gdt) + " gates, B = " +
         std::to_string(B) + ", T = " + std::to_string(T) + ", H = " + std::to_string(H) + ", K = " +
         std::to_string(K) + ", V = " + std::to_string(V) + ", N = " + std::to_string(N) + ", scale = " +
         num_str(scale);
}
}  // namespace

std::size_t SavedForward::bytes_needed(const DeviceArgs& a, bool with_states) {
  return saved_layout(plan_call(a, "linattn::cuda::SavedForward::bytes_needed").p, with_states).total();
}

std::string SavedForward::describe() const {
  if (!filled_) return "an empty SavedForward (moved from, released or never filled)";
  return "a SavedForward of (" + call_str(op_, dtype_, gate_dtype_, B_, T_, H_, K_, V_, N_, scale_) +
         ", intra rung " + std::to_string(intra_rung_) + ", KP = " + std::to_string(kp_) +
         (states_ ? (s_bf16_ ? ", with states in bfloat16" : ", with states") : "") + ")";
}

void forward_device(const DeviceArgs& a, Version version, SavedForward* save, bool with_states, bool states_bf16) {
  if (states_bf16 && !with_states)
    fail("linattn::cuda::forward_device", "states_bf16", "false unless with_states is set (it says how the states are kept)",
         "true with with_states false");
  if (!save) {
    if (with_states) fail("linattn::cuda::forward_device", "save", "a SavedForward when with_states is set", "null");
    return forward_device(a, version);
  }
  const std::string fn = "linattn::cuda::forward_device";
  Plan pl = plan_call(a, fn);
  KParams& p = pl.p;
  const std::int64_t numel_qk = a.B * a.T * a.H * a.K;
  require(numel_qk == 0 || (a.q && a.k && a.v && a.o), "q, k, v, o", "device pointers", "null");
  detail::Call call;
  call.p = p;
  call.dtype = static_cast<int>(a.dtype);
  call.gate_dtype = static_cast<int>(a.gate_dtype);
  call.stream = static_cast<cudaStream_t>(a.stream);
  // The saved workspace is rung 4's intra kernel's (what the rungs of saved_bwd_versions() prepare with).
  if (version != Version::best && version != Version::v4_levels)
    fail(fn, "version", "best or v4_levels when saving for the backward (the saved workspace is rung 4's intra kernel's)",
         version_str(version));
  std::string why;
  if (!detail::v4_supports(call, &why))
    fail(fn, "save", "a call that forward rung 4 (v4_levels) takes, whose intra-chunk outputs are saved",
         "forward rung 4's range: " + why);

  // From here on a failure leaves the object empty (chunk_cuda.hpp, SavedForward::empty).
  save->filled_ = false;
  if (!save->fwd_done_) {
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    LINATTN_CUDA_CHECK(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming));
    save->fwd_done_ = e0;
    LINATTN_CUDA_CHECK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
    save->bwd_done_ = e1;
  }
  // A refill writes only after the previous fill and every backward that read it (on any stream).
  LINATTN_CUDA_CHECK(cudaStreamWaitEvent(call.stream, as_event(save->fwd_done_), 0));
  LINATTN_CUDA_CHECK(cudaStreamWaitEvent(call.stream, as_event(save->bwd_done_), 0));

  // Memory: reused when large enough; a new allocation is filled with NaN bits, so that a part the
  // intra kernel fails to write cannot pass for a value. release() frees the old buffer once they are done.
  const SavedLayout lay = saved_layout(p, with_states);
  if (save->bytes_ < lay.total()) {
    save->release();
    const cudaError_t err = cudaMalloc(&save->buf_, lay.total());
    if (err != cudaSuccess) {
      save->buf_ = nullptr;
      cudaGetLastError();  // clear it: out of memory is not sticky
      throw std::runtime_error("linattn::cuda::forward_device: cudaMalloc of the SavedForward's " +
                               std::to_string(lay.total()) + " bytes failed: " + cudaGetErrorString(err));
    }
    save->bytes_ = lay.total();
    LINATTN_CUDA_CHECK(cudaMemsetAsync(save->buf_, 0xff, lay.total(), call.stream));
  }
  save->a_offset_ = lay.a_offset;
  // bf16 S (rung 28) where asked and where rung 28's G1' reads it; float32 elsewhere (states_bf16() tells)
  const bool s_bf16 = with_states && states_bf16 && detail::bwd_v28_keeps_s_bf16(call);
  save->states_ = with_states, save->tc_offset_ = lay.tc_offset, save->s_bf16_ = s_bf16;
  save->op_ = a.op, save->dtype_ = a.dtype, save->gate_dtype_ = a.gate_dtype;
  save->B_ = a.B, save->T_ = a.T, save->H_ = a.H, save->K_ = a.K, save->V_ = a.V, save->N_ = p.N;
  save->scale_ = a.scale;
  save->cu_seqlens_.assign(pl.cu.begin(), pl.cu.end());
  save->q_ = a.q, save->k_ = a.k, save->v_ = a.v, save->g_ = a.g, save->beta_ = a.beta, save->b_ = a.b, save->w_ = a.w;
  save->h0_ = a.initial_state;
  save->intra_rung_ = static_cast<int>(Version::v4_levels);
  save->kp_ = a.K <= 64 ? 64 : 128;  // tc_pick_kp

  char* base = static_cast<char*>(workspace().get(pl.table_bytes() + 256));  // the chunk table only
  pl.place(base, call.stream);
  call.p = p;
  char* sb = static_cast<char*>(save->buf_);
  call.p.ws = sb + lay.tc_offset;
  auto at = [&](std::size_t off) { return reinterpret_cast<float*>(sb + off); };
  // Rung 4's intra outputs and A: in rung 7's range (DeltaNet, GDN) from rung 7's intra kernel, which writes
  // the same values with 3 blocks per SM (session 14; test_cuda_saved's bit tests compare these saved
  // objects with the backward rungs that recompute them by rung 4's kernel), else from rung 4's.
  auto intra_with_A = [&](float* a_out) {
    if (detail::v7_in_range(call)) detail::v7_intra_launch_with_A(call, a_out);
    else detail::v4_intra_launch_with_A(call, a_out);
  };
  if (p.N > 0) {  // the intra kernel with A, then best's state kernel (o, ht: rung 4's, or rung 9's lean one),
                  // with states also storing S and v_new where the backward reads them
    if (p.num_chunks > 0) intra_with_A(at(lay.a_offset));
    const int KP = p.K <= 64 ? 64 : 128;  // tc_pick_kp
    // Where `best` runs rung 9 (v9_in_best: the call's, whatever `version`), its lean state kernel, so that o
    // and ht are the plain forward's and S, v_new the backward's lean recompute's (bwd_v3_front).
    const bool lean = detail::v9_in_best(call);
    float* const s_out = at(lay.s_offset);  // with states only
    if (with_states && lean) detail::tc_state_lean_save_launch(call, KP, s_out, at(lay.vn_offset), s_bf16);
    else if (with_states) detail::tc_state_save_launch(call, KP, s_out, at(lay.vn_offset), s_bf16);
    else if (lean) detail::tc_state_lean_launch(call, KP);
    else detail::tc_state_launch(call, KP);
  }
  LINATTN_CUDA_CHECK(cudaEventRecord(as_event(save->fwd_done_), call.stream));  // the backward waits for it
  save->filled_ = true;
}

namespace {

std::uint16_t to_bf16_bits(float x) {
  const float r = round_to_bf16(x);
  std::uint32_t u;
  std::memcpy(&u, &r, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

/// A device copy of a host tensor in the requested element type.
struct DevBuf {
  void* p = nullptr;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { if (p) cudaFree(p); }
  void alloc(std::size_t bytes) { LINATTN_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1)); }
  void upload(const Tensor<float>& t, DType dt) {
    if (!t.defined()) return;
    const std::size_t n = std::size_t(t.numel());
    if (dt == DType::f32) {
      alloc(4 * n);
      LINATTN_CUDA_CHECK(cudaMemcpy(p, t.data(), 4 * n, cudaMemcpyHostToDevice));
    } else {
      std::vector<std::uint16_t> h(n);
      for (std::size_t i = 0; i < n; ++i) h[i] = to_bf16_bits(t.data()[i]);
      alloc(2 * n);
      LINATTN_CUDA_CHECK(cudaMemcpy(p, h.data(), 2 * n, cudaMemcpyHostToDevice));
    }
  }
};

Tensor<float> download(const void* p, std::vector<index_t> shape, DType dt) {
  Tensor<float> t(std::move(shape));
  const std::size_t n = std::size_t(t.numel());
  if (dt == DType::f32) {
    LINATTN_CUDA_CHECK(cudaMemcpy(t.data(), p, 4 * n, cudaMemcpyDeviceToHost));
  } else {
    std::vector<std::uint16_t> h(n);
    LINATTN_CUDA_CHECK(cudaMemcpy(h.data(), p, 2 * n, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t u = std::uint32_t(h[i]) << 16;
      std::memcpy(t.data() + i, &u, 4);
    }
  }
  return t;
}

/// A call whose inputs are all finite (validated first) must return finite results: the project's rule, which the
/// CPU kernels keep with the same ref::require_finite_results. On the device a value that is not finite has two
/// possible causes, and the error names both: an overflow (the delta rule's state grows when beta ||k||^2 > 2), or an
/// element no kernel wrote (the host functions fill every result with NaN before the launch).
void require_finite_device_results(const std::string& fn, Op op, bool backward,
                                   std::initializer_list<std::pair<const char*, const Tensor<float>*>> what) {
  ref::require_finite_results<float>(
      fn, op, backward, what,
      " (or a kernel left it unwritten: the host functions fill every result with NaN before the launch)");
}

Tensor<float> l2norm_rows(const Tensor<float>& x) {
  Tensor<float> y = x.clone();
  const index_t D = x.size(3), rows = x.numel() / (D ? D : 1);
  for (index_t r = 0; r < rows; ++r) {
    float* a = y.data() + r * D;
    double ss = 0;
    for (index_t d = 0; d < D; ++d) ss += double(a[d]) * a[d];
    const double inv = 1.0 / std::sqrt(ss + 1e-6);  // as ref::l2_normalize: eps inside the root
    for (index_t d = 0; d < D; ++d) a[d] = float(a[d] * inv);
  }
  return y;
}

}  // namespace

ref::RecurrentOutput<float> chunk_forward(Op op, const Tensor<float>& q, const Tensor<float>& k,
                                          const Tensor<float>& v, const ref::Gates<float>& gates,
                                          const ref::RecurrentOptions<float>& opt, DType dtype,
                                          DType gate_dtype, Version version) {
  const std::string fn = std::string("linattn::cuda::chunk_") + ref::op_name(op);
  if (op == Op::linear_attn) fail(fn, "op", "delta_rule, gated_delta_rule, kda or gdn2", "linear_attn");
  const index_t N = ref::validate_recurrent(fn, op, q, k, v, gates, opt);
  const index_t B = q.size(0), Tn = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  if (K > kMaxDim) fail(fn, "q.shape[3] (K)", "K <= 256", std::to_string(K));
  if (V > kMaxDim) fail(fn, "v.shape[3] (V)", "V <= 256", std::to_string(V));
  if (opt.return_trace) fail(fn, "return_trace", "false (the CUDA kernels return no trace)", "true");

  const Tensor<float> qq = opt.use_qk_l2norm ? l2norm_rows(q) : q;
  const Tensor<float> kk = opt.use_qk_l2norm ? l2norm_rows(k) : k;
  DevBuf dq, dk, dv, dg, dbeta, db, dw, dh0, dout, dht;
  dq.upload(qq, dtype), dk.upload(kk, dtype), dv.upload(v, dtype);
  dg.upload(gates.g, gate_dtype), dbeta.upload(gates.beta, gate_dtype);
  db.upload(gates.b, gate_dtype), dw.upload(gates.w, gate_dtype);
  dh0.upload(opt.initial_state, DType::f32);
  const std::size_t esz = dtype == DType::f32 ? 4 : 2;
  const std::size_t n_o = std::size_t(B * Tn * H * V), n_s = std::size_t(N * H * K * V);
  dout.alloc(esz * n_o);
  LINATTN_CUDA_CHECK(cudaMemset(dout.p, 0xff, esz * n_o));  // all-ones bits: NaN in f32 and bf16
  if (opt.output_final_state) {
    dht.alloc(4 * n_s);
    LINATTN_CUDA_CHECK(cudaMemset(dht.p, 0xff, 4 * n_s));
  }

  DeviceArgs a;
  a.op = op, a.dtype = dtype, a.gate_dtype = gate_dtype;
  a.B = B, a.T = Tn, a.H = H, a.K = K, a.V = V;
  a.q = dq.p, a.k = dk.p, a.v = dv.p, a.g = dg.p, a.beta = dbeta.p, a.b = db.p, a.w = dw.p;
  a.o = dout.p;
  a.scale = opt.scale ? *opt.scale : 1.0f / std::sqrt(float(K));
  a.initial_state = static_cast<const float*>(dh0.p);
  a.final_state = static_cast<float*>(dht.p);
  if (!opt.cu_seqlens.empty()) {
    a.cu_seqlens = opt.cu_seqlens.data();
    a.num_seqs = N;
  }
  forward_device(a, version);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  LINATTN_CUDA_CHECK(cudaDeviceSynchronize());

  ref::RecurrentOutput<float> out;
  out.o = download(dout.p, {B, Tn, H, V}, dtype);
  if (opt.output_final_state) out.final_state = download(dht.p, {N, H, K, V}, DType::f32);
  require_finite_device_results(fn, op, false, {{"o", &out.o}, {"final_state", &out.final_state}});
  return out;
}

ref::RecurrentOutput<float> chunk_delta_rule(const Tensor<float>& q, const Tensor<float>& k,
                                             const Tensor<float>& v, const Tensor<float>& beta,
                                             const ref::RecurrentOptions<float>& opt, DType dtype,
                                             Version version) {
  ref::Gates<float> gt;
  gt.beta = beta;
  return chunk_forward(Op::delta_rule, q, k, v, gt, opt, dtype, DType::f32, version);
}

ref::RecurrentOutput<float> chunk_gated_delta_rule(const Tensor<float>& q, const Tensor<float>& k,
                                                   const Tensor<float>& v, const Tensor<float>& g,
                                                   const Tensor<float>& beta,
                                                   const ref::RecurrentOptions<float>& opt,
                                                   DType dtype, Version version) {
  ref::Gates<float> gt;
  gt.g = g;
  gt.beta = beta;
  return chunk_forward(Op::gated_delta_rule, q, k, v, gt, opt, dtype, DType::f32, version);
}

ref::RecurrentOutput<float> chunk_kda(const Tensor<float>& q, const Tensor<float>& k,
                                      const Tensor<float>& v, const Tensor<float>& g,
                                      const Tensor<float>& beta,
                                      const ref::RecurrentOptions<float>& opt, DType dtype,
                                      Version version) {
  ref::Gates<float> gt;
  gt.g = g;
  gt.beta = beta;
  return chunk_forward(Op::kda, q, k, v, gt, opt, dtype, DType::f32, version);
}

ref::RecurrentOutput<float> chunk_gdn2(const Tensor<float>& q, const Tensor<float>& k,
                                       const Tensor<float>& v, const Tensor<float>& g,
                                       const Tensor<float>& b, const Tensor<float>& w,
                                       const ref::RecurrentOptions<float>& opt, DType dtype,
                                       Version version) {
  ref::Gates<float> gt;
  gt.g = g;
  gt.b = b;
  gt.w = w;
  return chunk_forward(Op::gdn2, q, k, v, gt, opt, dtype, DType::f32, version);
}

// ------------------------------------------------------------------------------------------------
// Backward
// ------------------------------------------------------------------------------------------------

const char* bwd_version_name(BwdVersion v) {
  switch (v) {
    case BwdVersion::best: return "best";
    case BwdVersion::v1_simple: return "bwd_v1_simple";
    case BwdVersion::v2_tensorcore: return "bwd_v2_tensorcore";
    case BwdVersion::v3_async: return "bwd_v3_async";
    case BwdVersion::v4_tc_tail: return "bwd_v4_tc_tail";
    case BwdVersion::v5_levels_front: return "bwd_v5_levels_front";
    case BwdVersion::v6_tc_b9: return "bwd_v6_tc_b9";
    case BwdVersion::v7_rowbase: return "bwd_v7_rowbase";
    case BwdVersion::v8_wide: return "bwd_v8_wide";
    case BwdVersion::v9_noextras: return "bwd_v9_noextras";
    case BwdVersion::v10_split: return "bwd_v10_split";
    case BwdVersion::v11_wyfast: return "bwd_v11_wyfast";
    case BwdVersion::v12_g1slab: return "bwd_v12_g1slab";
    case BwdVersion::v13_g1g2: return "bwd_v13_g1g2";
    case BwdVersion::v14_pchan: return "bwd_v14_pchan";
    case BwdVersion::v15_hionly: return "bwd_v15_hionly";
    case BwdVersion::v16_b9one: return "bwd_v16_b9one";
    case BwdVersion::v17_hybrid: return "bwd_v17_hybrid";
    case BwdVersion::v18_lean: return "bwd_v18_lean";
    case BwdVersion::v19_dsbf16: return "bwd_v19_dsbf16";
    case BwdVersion::v20_dvbf16: return "bwd_v20_dvbf16";
    case BwdVersion::v21_duvsmem: return "bwd_v21_duvsmem";
    case BwdVersion::v22_kq8: return "bwd_v22_kq8";
    case BwdVersion::v23_dsone: return "bwd_v23_dsone";
    case BwdVersion::v24_dswide: return "bwd_v24_dswide";
    case BwdVersion::v25_g1async: return "bwd_v25_g1async";
    case BwdVersion::v26_wyasync: return "bwd_v26_wyasync";
    case BwdVersion::v27_dvplanes: return "bwd_v27_dvplanes";
    case BwdVersion::v28_sbf16: return "bwd_v28_sbf16";
    case BwdVersion::v29_b1hi: return "bwd_v29_b1hi";
    case BwdVersion::v30_dsw2: return "bwd_v30_dsw2";
    case BwdVersion::v31_dkbf16: return "bwd_v31_dkbf16";
    case BwdVersion::v32_g1stage: return "bwd_v32_g1stage";
    case BwdVersion::v33_g2stage: return "bwd_v33_g2stage";
  }
  return "?";
}

namespace {
Workspace& workspace_bwd() {  // apart from the forward's, so that alternating calls do not reallocate
  static Workspace ws;
  return ws;
}

/// The backward ladder, one row per rung (entry points in versions.cuh): workspace and launch.
struct BwdRung {
  BwdVersion version;
  std::size_t (*workspace_bytes)(const detail::KParams&);
  void (*launch)(const detail::BwdCall&);
};
const BwdRung kBwdLadder[] = {
    {BwdVersion::v1_simple, detail::bwd_v1_workspace_bytes, detail::bwd_v1_launch},
    {BwdVersion::v2_tensorcore, detail::bwd_v2_workspace_bytes, detail::bwd_v2_launch},
    {BwdVersion::v3_async, detail::bwd_v3_workspace_bytes, detail::bwd_v3_launch},
    {BwdVersion::v4_tc_tail, detail::bwd_v4_workspace_bytes, detail::bwd_v4_launch},
    {BwdVersion::v5_levels_front, detail::bwd_v5_workspace_bytes, detail::bwd_v5_launch},
    {BwdVersion::v6_tc_b9, detail::bwd_v6_workspace_bytes, detail::bwd_v6_launch},
    {BwdVersion::v7_rowbase, detail::bwd_v7_workspace_bytes, detail::bwd_v7_launch},
    {BwdVersion::v8_wide, detail::bwd_v8_workspace_bytes, detail::bwd_v8_launch},
    {BwdVersion::v9_noextras, detail::bwd_v9_workspace_bytes, detail::bwd_v9_launch},
    {BwdVersion::v10_split, detail::bwd_v10_workspace_bytes, detail::bwd_v10_launch},
    {BwdVersion::v11_wyfast, detail::bwd_v11_workspace_bytes, detail::bwd_v11_launch},
    {BwdVersion::v12_g1slab, detail::bwd_v12_workspace_bytes, detail::bwd_v12_launch},
    {BwdVersion::v13_g1g2, detail::bwd_v13_workspace_bytes, detail::bwd_v13_launch},
    {BwdVersion::v14_pchan, detail::bwd_v14_workspace_bytes, detail::bwd_v14_launch},
    {BwdVersion::v15_hionly, detail::bwd_v15_workspace_bytes, detail::bwd_v15_launch},
    {BwdVersion::v16_b9one, detail::bwd_v16_workspace_bytes, detail::bwd_v16_launch},
    {BwdVersion::v17_hybrid, detail::bwd_v17_workspace_bytes, detail::bwd_v17_launch},
    {BwdVersion::v18_lean, detail::bwd_v18_workspace_bytes, detail::bwd_v18_launch},
    {BwdVersion::v19_dsbf16, detail::bwd_v19_workspace_bytes, detail::bwd_v19_launch},
    {BwdVersion::v20_dvbf16, detail::bwd_v20_workspace_bytes, detail::bwd_v20_launch},
    {BwdVersion::v21_duvsmem, detail::bwd_v21_workspace_bytes, detail::bwd_v21_launch},
    {BwdVersion::v22_kq8, detail::bwd_v22_workspace_bytes, detail::bwd_v22_launch},
    {BwdVersion::v23_dsone, detail::bwd_v23_workspace_bytes, detail::bwd_v23_launch},
    {BwdVersion::v24_dswide, detail::bwd_v24_workspace_bytes, detail::bwd_v24_launch},
    {BwdVersion::v25_g1async, detail::bwd_v25_workspace_bytes, detail::bwd_v25_launch},
    {BwdVersion::v26_wyasync, detail::bwd_v26_workspace_bytes, detail::bwd_v26_launch},
    {BwdVersion::v27_dvplanes, detail::bwd_v27_workspace_bytes, detail::bwd_v27_launch},
    {BwdVersion::v28_sbf16, detail::bwd_v28_workspace_bytes, detail::bwd_v28_launch},
    {BwdVersion::v29_b1hi, detail::bwd_v29_workspace_bytes, detail::bwd_v29_launch},
    {BwdVersion::v30_dsw2, detail::bwd_v30_workspace_bytes, detail::bwd_v30_launch},
    {BwdVersion::v31_dkbf16, detail::bwd_v31_workspace_bytes, detail::bwd_v31_launch},
    {BwdVersion::v32_g1stage, detail::bwd_v32_workspace_bytes, detail::bwd_v32_launch},
    {BwdVersion::v33_g2stage, detail::bwd_v33_workspace_bytes, detail::bwd_v33_launch},
};
}  // namespace

void backward_device(const DeviceBwdArgs& a, BwdVersion version) { backward_device(a, version, nullptr); }

const std::vector<BwdVersion>& saved_bwd_versions() {
  // The rungs whose prepare is bwd_v3_front with levels_intra: forward rung 4's intra kernel, or (rung 18,
  // DeltaNet and GDN, since session 14) rung 7's kA instantiation, which writes the same outputs. A new rung
  // belongs here only if its prepare writes those outputs too, lean_g included, and, where v9_in_best, recomputes
  // rung 9's lean states (tc_state_bwd_lean_launch), as bwd_v3_front does since session 15.
  static const std::vector<BwdVersion> v = {BwdVersion::best,       BwdVersion::v5_levels_front, BwdVersion::v6_tc_b9,
                                            BwdVersion::v7_rowbase, BwdVersion::v8_wide,         BwdVersion::v9_noextras,
                                            BwdVersion::v10_split, BwdVersion::v11_wyfast,  BwdVersion::v12_g1slab,
                                            BwdVersion::v13_g1g2, BwdVersion::v14_pchan, BwdVersion::v15_hionly,
                                            BwdVersion::v16_b9one, BwdVersion::v17_hybrid, BwdVersion::v18_lean,
                                            BwdVersion::v19_dsbf16, BwdVersion::v20_dvbf16, BwdVersion::v21_duvsmem,
                                            BwdVersion::v22_kq8, BwdVersion::v23_dsone, BwdVersion::v24_dswide,
                                            BwdVersion::v25_g1async, BwdVersion::v26_wyasync,
                                            BwdVersion::v27_dvplanes, BwdVersion::v28_sbf16,
                                            BwdVersion::v29_b1hi, BwdVersion::v30_dsw2, BwdVersion::v31_dkbf16,
                                            BwdVersion::v32_g1stage, BwdVersion::v33_g2stage};
  return v;
}

bool bwd_reads_bf16_states(BwdVersion v) {
  return v == BwdVersion::best || v == BwdVersion::v28_sbf16 || v == BwdVersion::v29_b1hi ||
         v == BwdVersion::v30_dsw2 || v == BwdVersion::v31_dkbf16 || v == BwdVersion::v32_g1stage ||
         v == BwdVersion::v33_g2stage;
}

namespace {
/// Refuses (linattn::Error naming 'saved') a backward rung that is not one of saved_bwd_versions()
/// (or rung 5 with LINATTN_BWD5_V3_FRONT set), then a saved forward that is empty or that differs
/// from this call (`differs`: what differs, empty if nothing) (chunk_cuda.hpp, SavedForward).
void check_saved(const std::string& fn, const DeviceArgs& f, std::int64_t N, BwdVersion version,
                 const SavedForward& s, const std::string& differs) {
  bool listed = false;
  std::string rungs;
  for (BwdVersion r : saved_bwd_versions()) {
    listed = listed || r == version;
    rungs += (rungs.empty() ? "" : ", ") + (r == BwdVersion::best ? std::string("best") : std::to_string(static_cast<int>(r)));
  }
  const bool v3_front_hook = version == BwdVersion::v5_levels_front && std::getenv("LINATTN_BWD5_V3_FRONT");
  if (!listed || v3_front_hook)
    fail(fn, "saved", "a backward rung whose prepare writes forward rung 4's intra outputs (" + rungs + ")",
         std::string("a saved forward given to ") + bwd_version_name(version) +
             (v3_front_hook ? " with LINATTN_BWD5_V3_FRONT set (rung 3's intra kernel)" : ""));
  const std::string want = "a SavedForward filled by forward_device for this call (" +
                           call_str(f.op, f.dtype, f.gate_dtype, f.B, f.T, f.H, f.K, f.V, N, f.scale) + ")";
  if (s.empty()) fail(fn, "saved", want, s.describe());
  if (!differs.empty()) fail(fn, "saved", want, s.describe() + ", which differs in " + differs);
}
}  // namespace

namespace {
thread_local const char* g_split_route = "";  // route.hpp
thread_local const char* g_dstates_grid = "";  // route.hpp
}  // namespace
const char* last_backward_split_route() { return g_split_route; }
void detail::set_backward_split_route(const char* name) { g_split_route = name ? name : ""; }
const char* last_dstates_grid() { return g_dstates_grid; }
void detail::set_dstates_grid(const char* name) { g_dstates_grid = name ? name : ""; }

void backward_device(const DeviceBwdArgs& a, BwdVersion version, const SavedForward* saved) {
  const std::string fn = "linattn::cuda::backward_device";
  detail::set_backward_split_route("");
  detail::set_dstates_grid("");
  Plan pl = plan_call(a.fwd, fn);
  KParams& p = pl.p;
  const DeviceArgs& f = a.fwd;
  auto require_b = [&](bool ok, const std::string& arg, const std::string& expected, const std::string& got) {
    if (!ok) fail(fn, arg, expected, got);
  };
  const bool any = f.B * f.T * f.H > 0;
  require_b(!any || (f.q && f.k && f.v && a.do_), "q, k, v, do_", "device pointers", "null");
  require_b(!any || (a.dq && a.dk && a.dv), "dq, dk, dv", "device pointers", "null");
  require_b(!any || f.op == Op::delta_rule || a.dg, "dg", "a device pointer for " + std::string(ref::op_name(f.op)), "null");
  require_b(!any || f.op == Op::gdn2 || a.dbeta, "dbeta", "a device pointer", "null");
  require_b(!any || f.op != Op::gdn2 || (a.db && a.dw), "db, dw", "device pointers for gdn2", "null");
  require_b(p.N == 0 || a.dh0, "dh0", "a device pointer ([N, H, K, V] float32)", "null");
  for (const auto& [ptr, arg] : {std::pair<const void*, const char*>{a.do_, "do_"}, {a.dht, "dht"}, {a.dq, "dq"},
                                 {a.dk, "dk"}, {a.dv, "dv"}, {a.db, "db"}, {a.dw, "dw"}, {a.dh0, "dh0"}})
    require_aligned16(fn, ptr, arg);
  if (f.op == Op::kda || f.op == Op::gdn2) require_aligned16(fn, a.dg, "dg");
  // best = rung 17 (RESULTS.md "Rung 17", session 10 call 3 on the H200: rung 13's split kernels for
  // DeltaNet and GDN and rung 8's kernel for KDA and GDN2, each with one bf16 MMA per product except
  // dP's v_new and du0's dv_new, which keep their lo operands; every gradient within rung 3's bounds;
  // backward DeltaNet 4.90 -> 4.46, GDN 5.91 -> 5.33, KDA 10.68 -> 9.20, GDN2 10.08 -> 8.82 ms against
  // rung 13). Calls outside rung 3's range run rung 2 (or rung 6 outside the 32-bit offsets), and float32
  // inputs inside rung 2 take rung 1's kernels.
  // Since session 11: best = rung 18, rung 17 for DeltaNet and GDN without the extras kernel's arrays, bit for
  // bit with rung 17 (session 11 call 5: backward DeltaNet 4.47 -> 4.16, GDN 5.37 -> 4.88 ms; KDA and GDN2
  // run rung 17 itself; RESULTS.md "Rung 18").
  // Since session 18: best = rung 19, rung 18 for DeltaNet with dS' handed from the dstates kernel to G1' in bf16,
  // bit for bit with rung 18 (GDN, KDA, GDN2 run rung 18; dw_aux in bf16 too only with LINATTN_BWD19_DWA_BF16=1;
  // RESULTS.md "Rung 19").
  // Since session 19: best = rung 20, rung 19 with GDN's dv_new handed to G1' in bf16 too (DeltaNet: rung 19 unless
  // LINATTN_BWD20_DN=1), bit for bit with rung 19 (RESULTS.md "Rung 20").
  // Since session 20: best = rung 21, rung 20 (DeltaNet: its rung 19 path) with G2' forming dbeta's du0 v terms on
  // chip, every gradient but dbeta bit for bit with rung 20 (session 20 call 2: DeltaNet backward 3.770 -> 3.601 ms,
  // GDN 4.536 -> 4.447; RESULTS.md "Rung 21").
  // Since session 21: best = rung 22, rung 21 with G1''s k, q slabs staged by 16-byte octets, bit for bit with rung 21
  // (RESULTS.md "Rung 22").
  // Since session 24 call 3: best = rung 26 (RESULTS.md "Rung 26"). Since session 25 call 2: best = rung 28, rung 27 with
  // DeltaNet's states kept as bf16 (with bf16 saved states, forward_device's states_bf16: 2.89-2.92 ms against rung
  // 27's 3.02-3.05 and fla's 2.83; RESULTS.md "Rung 28"); a saved forward with float32 states runs rung 27's kernels.
  // Since session 26: best = rung 29, rung 28 with the dstates kernel's B1 on dS''s bf16 hi part (as fla's dhu; not bit
  // for bit with rung 28, held to the same bounds): dstates 0.04-0.06 ms faster in every profiled pair, DeltaNet with
  // bf16 saved states 2.77-2.98 ms (median 2.85 of 11 runs) against fla's 2.834-2.838 (RESULTS.md "Rung 29").
  // Since session 27: best = rung 32, rung 29 with bf16 dk_part and G2' on dv_new's hi plane (rung 31, not bit for bit,
  // held to the same bounds) and G1''s bf16 outputs stored as whole rows: G1' 0.60-0.62 ms against rung 29's
  // 0.67-0.71, G2' 0.70-0.72 against 0.72-0.77 in the same processes (RESULTS.md "Rung 32").
  // Since session 32: best = rung 33, rung 32 with G2''s dv and dk stored as whole rows too, bit for bit with rung 32:
  // DeltaNet with bf16 saved states 2.640-2.652 ms against rung 32's 2.667-2.677 in one process (session 30 call 1;
  // G2' 0.642-0.657 against 0.666-0.715; RESULTS.md "Rung 33"); session 32 ran every `best` test with it.
  if (version == BwdVersion::best) version = BwdVersion::v33_g2stage;
  const BwdRung* rung = nullptr;
  for (const BwdRung& r : kBwdLadder)
    if (r.version == version) rung = &r;
  if (!rung) {
    std::string rungs = "best (0)";
    for (const BwdRung& r : kBwdLadder) rungs += ", " + std::to_string(static_cast<int>(r.version));
    fail(fn, "version", "a version of the backward ladder (" + rungs + ")", std::to_string(static_cast<int>(version)));
  }

  detail::BwdCall call;
  call.dtype = static_cast<int>(f.dtype);
  call.gate_dtype = static_cast<int>(f.gate_dtype);
  call.stream = static_cast<cudaStream_t>(f.stream);
  call.do_ = a.do_, call.dht = a.dht, call.dh0 = a.dh0;
  call.dq = a.dq, call.dk = a.dk, call.dv = a.dv;
  call.dg = a.dg, call.dbeta = a.dbeta, call.db = a.db, call.dw = a.dw;
  if (saved) {  // a training forward's intra outputs (SavedForward): checked, then read in place of that kernel
    const SavedForward& s = *saved;
    std::string diff;
    auto differs = [&](bool same, const std::string& what) { if (!same && diff.empty()) diff = what; };
    if (!s.empty()) {
      differs(s.op_ == f.op, "op (" + std::string(ref::op_name(s.op_)) + " against " + ref::op_name(f.op) + ")");
      differs(s.dtype_ == f.dtype && s.gate_dtype_ == f.gate_dtype, "dtype or gate dtype");
      auto shape = [](std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V) {
        return std::to_string(B) + ", " + std::to_string(T) + ", " + std::to_string(H) + ", " + std::to_string(K) + ", " +
               std::to_string(V);
      };
      differs(s.B_ == f.B && s.T_ == f.T && s.H_ == f.H && s.K_ == f.K && s.V_ == f.V,
              "shape (B, T, H, K, V = " + shape(s.B_, s.T_, s.H_, s.K_, s.V_) + " against " +
                  shape(f.B, f.T, f.H, f.K, f.V) + ")");
      differs(std::memcmp(&s.scale_, &f.scale, sizeof(float)) == 0, "scale");
      differs(s.N_ == p.N && s.cu_seqlens_ == std::vector<std::int64_t>(pl.cu.begin(), pl.cu.end()),
              "sequences (N or cu_seqlens)");
      // Only the pointers the operator reads: a stale g of a DeltaNet call, say, is never read.
      const bool gated = f.op != Op::delta_rule, gdn2 = f.op == Op::gdn2;
      for (const auto& [same, name] : {std::pair<bool, const char*>{s.q_ == f.q, "q"}, {s.k_ == f.k, "k"},
                                       {s.v_ == f.v, "v"}, {!gated || s.g_ == f.g, "g"},
                                       {gdn2 || s.beta_ == f.beta, "beta"}, {!gdn2 || s.b_ == f.b, "b"},
                                       {!gdn2 || s.w_ == f.w, "w"}})
        differs(same, std::string("the device pointer ") + name + " (another forward's input)");
      // With states the saved S (the state entering every chunk) starts from the forward's initial
      // state, which the backward's own states kernel would read: another (or no) initial_state differs.
      differs(!s.states_ || s.h0_ == f.initial_state,
              "the device pointer initial_state (the saved states start from the forward's)");
      differs(s.intra_rung_ == static_cast<int>(Version::v4_levels) && s.kp_ == (f.K <= 64 ? 64 : 128),
              "intra rung or KP");
    }
    check_saved(fn, f, p.N, version, s, diff);
    // bf16 states (forward_device's states_bf16): only rungs 28 to 33 (rung 28's G1' and its successors) read S as bf16
    if (s.s_bf16_ && s.states_ && !bwd_reads_bf16_states(version))
      fail(fn, "saved", std::string("a SavedForward whose states are float32 for ") + bwd_version_name(version) +
                            " (bf16 states are read by rungs 28 to 33, bwd_v28_sbf16, bwd_v29_b1hi, bwd_v30_dsw2, "
                            "bwd_v31_dkbf16, bwd_v32_g1stage and bwd_v33_g2stage, and best, only)",
           s.describe() + " (filled with states_bf16)");
    if (!s.states_) {
      call.saved_ws = s.buf_;
      call.saved_A = reinterpret_cast<const float*>(static_cast<const char*>(s.buf_) + s.a_offset_);
    } else {  // with states: the saved tc region, and saved_A null (bwd_v3_front: A, S, v_new are in place)
      call.saved_ws = static_cast<char*>(s.buf_) + s.tc_offset_;
      call.saved_A = nullptr;
      call.saved_states = true;
      call.s_bf16 = s.s_bf16_;
    }
  }
  const bool saved_states = saved && saved->states_;
  // With a saved forward the rung's own tc region (about 742 MB at B=8 T=4096 H=16 K=V=128) is not
  // used: every rung of saved_bwd_versions() reads the saved one (bwd_v3_front), so it is not reserved;
  // rung 16 puts its hand-over there (bwd_v16_b9one.cu), so its saved workspace is its own figure.
  // With states the same workspace, with bwd_ws's v_new, A and S read from the saved object (KParams::keep).
  const std::size_t ws_bytes = !saved ? rung->workspace_bytes(p)
                               : rung->version == BwdVersion::v16_b9one ? detail::bwd_v16_saved_workspace_bytes(p)
                                                                        : detail::bwd_saved_workspace_bytes(p);
  char* base = static_cast<char*>(workspace_bwd().get(pl.table_bytes() + align256(ws_bytes) + 256));
  pl.place(base, call.stream);
  call.p = p;
  if (saved_states) call.p.keep = static_cast<float*>(saved->buf_);
  if (p.N == 0) return;
  if (saved) {  // after the saving forward, and after the previous backward that read it (any stream)
    LINATTN_CUDA_CHECK(cudaStreamWaitEvent(call.stream, as_event(saved->fwd_done_), 0));
    LINATTN_CUDA_CHECK(cudaStreamWaitEvent(call.stream, as_event(saved->bwd_done_), 0));
  }
  rung->launch(call);
  if (saved) LINATTN_CUDA_CHECK(cudaEventRecord(as_event(saved->bwd_done_), call.stream));  // a refill waits for it
}

void poison_device_workspaces() {
  for (Workspace* ws : {&workspace(), &workspace_bwd()})
    if (ws->ptr) LINATTN_CUDA_CHECK(cudaMemset(ws->ptr, 0xff, ws->bytes));
  LINATTN_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {

/// dL/dx of y = x / sqrt(|x|^2 + 1e-6) given dL/dy, row by row (as ref::l2_normalize_backward),
/// in float64: dx = inv (dy - y (y . dy)).
Tensor<float> l2norm_backward_rows(const Tensor<float>& x, const Tensor<float>& dy) {
  Tensor<float> dx(x.shape());
  const index_t D = x.size(3), rows = x.numel() / (D ? D : 1);
  for (index_t r = 0; r < rows; ++r) {
    const float *a = x.data() + r * D, *g = dy.data() + r * D;
    double ss = 0, ydy = 0;
    for (index_t d = 0; d < D; ++d) ss += double(a[d]) * a[d];
    const double inv = 1.0 / std::sqrt(ss + 1e-6);
    for (index_t d = 0; d < D; ++d) ydy += a[d] * inv * g[d];
    for (index_t d = 0; d < D; ++d) dx.data()[r * D + d] = float(inv * (g[d] - a[d] * inv * ydy));
  }
  return dx;
}

}  // namespace

ref::RecurrentGrads<float> chunk_backward(Op op, const Tensor<float>& q, const Tensor<float>& k,
                                          const Tensor<float>& v, const ref::Gates<float>& gates,
                                          const Tensor<float>& do_, const Tensor<float>& dht,
                                          const ref::RecurrentOptions<float>& opt, DType dtype,
                                          DType gate_dtype, BwdVersion version) {
  const std::string fn = std::string("linattn::cuda::chunk_") + ref::op_name(op) + "_backward";
  if (op == Op::linear_attn) fail(fn, "op", "delta_rule, gated_delta_rule, kda or gdn2", "linear_attn");
  const index_t N = ref::validate_recurrent(fn, op, q, k, v, gates, opt);
  const index_t B = q.size(0), Tn = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  if (K > kMaxDim) fail(fn, "q.shape[3] (K)", "K <= 256", std::to_string(K));
  if (V > kMaxDim) fail(fn, "v.shape[3] (V)", "V <= 256", std::to_string(V));
  if (opt.return_trace) fail(fn, "return_trace", "false (the CUDA kernels return no trace)", "true");
  check_shape(fn, "do", do_, {B, Tn, H, V});
  check_finite(fn, "do", do_);
  if (dht.defined()) {
    check_shape(fn, "dht", dht, {N, H, K, V});
    check_finite(fn, "dht", dht);
  }

  const Tensor<float> qq = opt.use_qk_l2norm ? l2norm_rows(q) : q;
  const Tensor<float> kk = opt.use_qk_l2norm ? l2norm_rows(k) : k;
  DevBuf bq, bk, bv, bg, bbeta, bb, bw, bh0, bdo, bdht;
  bq.upload(qq, dtype), bk.upload(kk, dtype), bv.upload(v, dtype), bdo.upload(do_, dtype);
  bg.upload(gates.g, gate_dtype), bbeta.upload(gates.beta, gate_dtype);
  bb.upload(gates.b, gate_dtype), bw.upload(gates.w, gate_dtype);
  bh0.upload(opt.initial_state, DType::f32);
  bdht.upload(dht, DType::f32);

  // Gradient buffers, filled with NaN (all-ones bits) so that an element no kernel writes shows.
  const std::size_t esz = dtype == DType::f32 ? 4 : 2, gsz = gate_dtype == DType::f32 ? 4 : 2;
  const std::size_t nqk = std::size_t(B * Tn * H * K), nv = std::size_t(B * Tn * H * V);
  const std::size_t ntok = std::size_t(B * Tn * H), ns = std::size_t(N * H * K * V);
  const bool gdn2 = op == Op::gdn2;
  const std::size_t ng = op == Op::delta_rule ? 0 : (op == Op::gated_delta_rule ? ntok : nqk);
  DevBuf gq, gk, gv, gg, gbeta, gb, gw, gh0;
  auto nan_alloc = [](DevBuf& b, std::size_t bytes) {
    b.alloc(bytes);
    LINATTN_CUDA_CHECK(cudaMemset(b.p, 0xff, bytes ? bytes : 1));
  };
  nan_alloc(gq, esz * nqk), nan_alloc(gk, esz * nqk), nan_alloc(gv, esz * nv);
  if (ng) nan_alloc(gg, gsz * ng);
  if (gdn2) nan_alloc(gb, gsz * nqk), nan_alloc(gw, gsz * nv);
  else nan_alloc(gbeta, gsz * ntok);
  nan_alloc(gh0, 4 * ns);

  DeviceBwdArgs a;
  DeviceArgs& f = a.fwd;
  f.op = op, f.dtype = dtype, f.gate_dtype = gate_dtype;
  f.B = B, f.T = Tn, f.H = H, f.K = K, f.V = V;
  f.q = bq.p, f.k = bk.p, f.v = bv.p, f.g = bg.p, f.beta = bbeta.p, f.b = bb.p, f.w = bw.p;
  f.scale = opt.scale ? *opt.scale : 1.0f / std::sqrt(float(K));
  f.initial_state = static_cast<const float*>(bh0.p);
  if (!opt.cu_seqlens.empty()) {
    f.cu_seqlens = opt.cu_seqlens.data();
    f.num_seqs = N;
  }
  a.do_ = bdo.p, a.dht = static_cast<const float*>(bdht.p);
  a.dq = gq.p, a.dk = gk.p, a.dv = gv.p, a.dg = gg.p, a.dbeta = gbeta.p, a.db = gb.p, a.dw = gw.p;
  a.dh0 = static_cast<float*>(gh0.p);
  backward_device(a, version);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  LINATTN_CUDA_CHECK(cudaDeviceSynchronize());

  ref::RecurrentGrads<float> gr;
  gr.dq = download(gq.p, {B, Tn, H, K}, dtype);
  gr.dk = download(gk.p, {B, Tn, H, K}, dtype);
  gr.dv = download(gv.p, {B, Tn, H, V}, dtype);
  if (op == Op::gated_delta_rule) gr.dg = download(gg.p, {B, Tn, H}, gate_dtype);
  if (op == Op::kda || gdn2) gr.dg = download(gg.p, {B, Tn, H, K}, gate_dtype);
  if (gdn2) {
    gr.db = download(gb.p, {B, Tn, H, K}, gate_dtype);
    gr.dw = download(gw.p, {B, Tn, H, V}, gate_dtype);
  } else {
    gr.dbeta = download(gbeta.p, {B, Tn, H}, gate_dtype);
  }
  gr.dh0 = download(gh0.p, {N, H, K, V}, DType::f32);
  if (opt.use_qk_l2norm) {  // the kernels saw q / |q| and k / |k|: the chain rule through them
    gr.dq = l2norm_backward_rows(q, gr.dq);
    gr.dk = l2norm_backward_rows(k, gr.dk);
  }
  require_finite_device_results(fn, op, /*backward=*/true,
                                {{"dq", &gr.dq}, {"dk", &gr.dk}, {"dv", &gr.dv}, {"dg", &gr.dg}, {"dbeta", &gr.dbeta},
                                 {"db", &gr.db}, {"dw", &gr.dw}, {"dh0", &gr.dh0}});
  return gr;
}

ref::RecurrentGrads<float> chunk_delta_rule_backward(const Tensor<float>& q, const Tensor<float>& k,
                                                     const Tensor<float>& v, const Tensor<float>& beta,
                                                     const Tensor<float>& do_, const Tensor<float>& dht,
                                                     const ref::RecurrentOptions<float>& opt,
                                                     DType dtype, BwdVersion version) {
  ref::Gates<float> gt;
  gt.beta = beta;
  return chunk_backward(Op::delta_rule, q, k, v, gt, do_, dht, opt, dtype, DType::f32, version);
}

ref::RecurrentGrads<float> chunk_gated_delta_rule_backward(
    const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, const Tensor<float>& g,
    const Tensor<float>& beta, const Tensor<float>& do_, const Tensor<float>& dht,
    const ref::RecurrentOptions<float>& opt, DType dtype, BwdVersion version) {
  ref::Gates<float> gt;
  gt.g = g, gt.beta = beta;
  return chunk_backward(Op::gated_delta_rule, q, k, v, gt, do_, dht, opt, dtype, DType::f32, version);
}

ref::RecurrentGrads<float> chunk_kda_backward(const Tensor<float>& q, const Tensor<float>& k,
                                              const Tensor<float>& v, const Tensor<float>& g,
                                              const Tensor<float>& beta, const Tensor<float>& do_,
                                              const Tensor<float>& dht,
                                              const ref::RecurrentOptions<float>& opt, DType dtype,
                                              BwdVersion version) {
  ref::Gates<float> gt;
  gt.g = g, gt.beta = beta;
  return chunk_backward(Op::kda, q, k, v, gt, do_, dht, opt, dtype, DType::f32, version);
}

ref::RecurrentGrads<float> chunk_gdn2_backward(const Tensor<float>& q, const Tensor<float>& k,
                                               const Tensor<float>& v, const Tensor<float>& g,
                                               const Tensor<float>& b, const Tensor<float>& w,
                                               const Tensor<float>& do_, const Tensor<float>& dht,
                                               const ref::RecurrentOptions<float>& opt, DType dtype,
                                               BwdVersion version) {
  ref::Gates<float> gt;
  gt.g = g, gt.b = b, gt.w = w;
  return chunk_backward(Op::gdn2, q, k, v, gt, do_, dht, opt, dtype, DType::f32, version);
}

}  // namespace linattn::cuda
