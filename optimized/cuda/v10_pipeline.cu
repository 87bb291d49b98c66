// optimized/cuda/v10_pipeline.cu -- rung 10 of the CUDA forward ladder (session 13; `best` where rung 9 is not): for one
// long sequence, rung 7's two kernels pipelined over segments of the sequence, so that the intra-chunk
// kernel of segment s + 1 runs beside the state kernel of segment s instead of before it.
//
// Measured (H200, session 13 calls 3-4, bench/logs_session13/; B=1 T=32768 H=16 K=V=128 bf16, ms, three
// processes with fla): DeltaNet 1.446-1.452 (rung 7) -> 1.377-1.378 (fla 1.57-1.62), GDN 1.465-1.481 ->
// 1.369-1.377 (fla 1.454-1.461): GDN now faster than fla at this shape. Segment length (call 3, GDN /
// DeltaNet): 1024 tokens 1.530 / 1.534, 2048 1.432 / 1.430, 4096 1.373 / 1.378, 8192 1.374 / 1.382; the
// default is 4096. The ideal would be about 1.09 ms (the state kernel alone, 1.03, plus the first
// segment's intra kernel, 0.44 / 8): of the 0.44 ms of intra work, about 0.1 is hidden. The state kernel
// shares its SMs and L2 with the intra blocks beside it; how much each loses is not yet measured. Bit for
// bit with rung 7 (141 assertions over 7 pipelined cases), memcheck clean over 2 of them (call 4),
// mutants 261-263 caught; 260 (the griddepcontrol.wait removed) passes, see "Dependences" below.
// Session 17: where the value tiles pair up, each segment's state kernel is v2_state_mc (v2_tensorcore.cu): the
// value tiles of one head in a thread-block cluster, each chunk's W, Qg, Kd and P tiles loaded once and multicast
// to the cluster by tensor copies instead of once per tile by cp.async. Same bits. B=1 T=32768 (call 5, one process,
// LINATTN_V10_CLUSTER=1 as the control): state kernels 0.984 -> 0.908 ms, GDN 1.220 -> 1.157, DeltaNet 1.215 ->
// 1.140; bench_forward (call 6): DeltaNet 1.139 against fla's 1.332, GDN 1.156 against 1.281 (fla, same commit,
// measured 1.57 / 1.45 in sessions 13-15 and 1.33 / 1.28 in every call of session 17). Only at KP = 128 by
// default: at K = V = 64 (1x5000x16x64x64, clusters of 4; one round of call 5's bit check) DeltaNet took 0.169
// against 0.156 ms without clusters and GDN 0.173 against 0.160.
// Not pipelined (B=8, and anything else outside "Where"), rung 10 runs rung 7. Rung 9 is faster at B=8
// (GDN 0.885-0.890 against rung 7's 0.917-0.923) but gives rung 6's bits, so it stays out of rung 10;
// since session 15 `best` runs rung 9 itself where v9_in_best holds, with the saving forward and the
// backward's recompute on its lean state kernel (RESULTS.md "Session 15: rung 9 in best"). So `best` is
// rung 10 only where 64-column tiles would not fill the GPU.
//
// Why. At B=1 T=32768 H=16 K=V=128 the state kernel (the chunk-to-chunk recurrence, SPEC section 4 step 3)
// has 16 heads x 8 value tiles of 16 columns = 128 blocks, one per SM: it walks 512 chunks one after the
// other and takes 1.03 ms, while the intra kernel (steps 1-2, every chunk independent) takes 0.44 ms before
// it on the whole GPU (session 13 call 2). Each SM then holds one 149,504-byte state block and has room
// beside it for one 73,216-byte intra block (71,168 before session 14; 3 of them + 1 KB each fit in 228 KB), and
// the state kernel, bound by the latency of its chain, leaves most issue slots idle (session 6's ncu: 26-28%
// busy). So the intra work of later chunks can run during the recurrence over earlier ones.
//
// What. The sequence is cut into segments of LINATTN_V10_SEG tokens (a multiple of 64; default 4096), and
// one stream runs
//     intra(0), state(0), intra(1), state(1), ..., intra(S-1), state(S-1)
// where state(s) is v2_state's default kernel that first signals griddepcontrol.launch_dependents
// (v2_state_pdl) and intra(s + 1) is rung 7's intra kernel launched as a programmatic dependent of
// state(s) (cudaLaunchAttributeProgrammaticStreamSerialization): it may start as soon as every state(s)
// block has started, on the room beside them. Dependences, and what enforces each:
//   * state(s) reads intra(s)'s workspace: plain stream order (state(s) is not a dependent launch);
//   * state(s) starts from state(s - 1)'s final state: intra(s) is the kernel between them, and its block
//     (0, 0) ends with griddepcontrol.wait (kPdlWait), which returns once state(s - 1) has completed and
//     its writes are visible; so intra(s) completes after state(s - 1), and state(s) after intra(s).
//     Mutant 260 (the wait removed) still passes the bit test, also in case 736, where intra(s) ends long
//     before state(s - 1) does: the stream seems to order state(s) after state(s - 1) by itself. The CUDA
//     documentation we found does not say so, so the wait stays (it holds one block's slot);
//   * intra(s + 1) overwrites the workspace half that state(s - 1) read (two halves, alternating): it
//     starts after state(s) has started, so after intra(s) and state(s - 1) have completed.
// The state passes between segments through two float32 [H, K, V] buffers (alternating), written by
// state(s) as its final state and read by state(s + 1) as its initial state: float32 both ways, the
// values the unsegmented kernel keeps in registers between those chunks. Every chunk's arithmetic is
// rung 7's, so o and the final state equal rung 7's bit for bit (test_cuda_forward.cu).
//
// Where. One sequence (B = 1, no cu_seqlens), rung 7's range (bf16 inputs, 16 <= K <= 128, gate none or
// scalar), state tiles of 16 columns (pick_bv) in one wave (no more state blocks than SMs: one per SM,
// as the scheduler spreads them), one block of each kernel fits one SM together (shared memory and
// registers, from the kernels' attributes: fit_one_sm) and T > one segment. Elsewhere rung 10 runs rung 7.
// The cluster size (cluster_size): the largest of n, n / 2, ..., 2 that divides the value tiles, where the cluster
// kernel fits beside an intra block (fit_one_sm) and every cluster fits the GPU at once
// (cudaOccupancyMaxActiveClusters), else 1 (v2_state_pdl); n is LINATTN_V10_CLUSTER (1, 2, 4 or 8; 1 turns
// clusters off) or by default 8 at KP = 128 and 1 at KP = 64 (measured slower there, above). If the driver cannot
// encode the tensor maps, rung 10 says so once on stderr and runs v2_state_pdl.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {

int device_attr(cudaDeviceAttr a) {  // tc_common.cuh
  int dev = 0, v = 0;
  LINATTN_CUDA_CHECK(cudaGetDevice(&dev));
  LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&v, a, dev));
  return v;
}

namespace {

int g_last_segments = 0;
int g_last_cluster = 0;

/// Tokens per segment: LINATTN_V10_SEG (a positive multiple of 64) or 4096. Any other value of the knob
/// is reported once on stderr (the process goes on with 4096).
int segment_tokens() {
  if (const char* s = std::getenv("LINATTN_V10_SEG")) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (end != s && *end == '\0' && v >= 64 && v % 64 == 0 && v <= (1L << 30)) return int(v);
    static std::once_flag warned;
    std::call_once(warned, [s] {
      std::fprintf(stderr, "linattn: LINATTN_V10_SEG='%s' is not a multiple of 64 from 64 to 2^30; rung 10 uses 4096-token segments\n", s);
    });
  }
  return 4096;
}

/// Whether one block of a state kernel (its dynamic shared memory bytes and registers per thread: v2_state_pdl
/// or v2_state_mc at KP, 16 columns) and one of rung 7's intra kernel fit one SM together: shared memory (each
/// block's bytes plus the runtime's reserve) and registers (per warp, in units of 8 per thread, as sm_90
/// allocates them), from the kernels' own attributes.
bool fit_one_sm(int KP, std::size_t state_smem, int state_regs) {
  const int sm_smem = device_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  const int reserve = device_attr(cudaDevAttrReservedSharedMemoryPerBlock);
  const int sm_regs = device_attr(cudaDevAttrMaxRegistersPerMultiprocessor);
  auto block_regs = [](int per_thread) { return (per_thread + 7) / 8 * 8 * kThreads; };
  const std::size_t smem = state_smem + v7_intra_smem_bytes(KP) + 2 * std::size_t(reserve);
  const int regs = block_regs(state_regs) + block_regs(v7_intra_pdl_regs(KP));
  return smem <= std::size_t(sm_smem) && regs <= sm_regs;
}

/// What pipelines() needs of the current device, queried once per device and process (attributes of the
/// device and of the compiled kernels do not change while the process lives): its SM count and, for KP
/// 64 and 128, fit_one_sm.
struct DeviceFacts {
  int sms = 0;
  bool fits[2] = {false, false};     // KP = 64, 128
  bool mc_fits[2] = {false, false};  // the same for the cluster state kernel v2_state_mc
  int mc_clusters[2][9] = {};        // cudaOccupancyMaxActiveClusters at KP = 64, 128, indexed by cluster size 2, 4, 8
};
DeviceFacts device_facts() {
  static std::mutex m;
  static std::map<int, DeviceFacts> known;
  int dev = 0;
  LINATTN_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(m);
  auto it = known.find(dev);
  if (it == known.end()) {
    DeviceFacts f;
    f.sms = device_attr(cudaDevAttrMultiProcessorCount);
    for (int i = 0; i < 2; ++i) {
      const int KP = i ? 128 : 64;
      f.fits[i] = fit_one_sm(KP, tc_state_smem_bytes(KP, 16), tc_state_pdl_regs(KP));
      f.mc_fits[i] = fit_one_sm(KP, tc_state_mc_smem_bytes(KP), tc_state_mc_regs(KP));
      for (int cl = 2; cl <= 8; cl *= 2) f.mc_clusters[i][cl] = tc_state_mc_max_clusters(KP, cl);
    }
    it = known.emplace(dev, f).first;
  }
  return it->second;
}

/// Whether the call pipelines (the file comment's conditions), and its segment length.
bool pipelines(const Call& c, int& seg) {
  const KParams& p = c.p;
  seg = segment_tokens();
  if (!v7_in_range(c) || p.cu != nullptr || p.N != 1 || p.B != 1 || p.T <= seg) return false;
  if (tc_pick_bv(p) != 16) return false;
  // One wave of state blocks, one per SM: then every SM keeps room for an intra block beside its state
  // block, and intra(s + 1) can start as soon as state(s) has (its blocks all signal at their start).
  const DeviceFacts dev = device_facts();
  const long state_blocks = long(p.N) * p.H * ((p.V + 15) / 16);
  if (state_blocks > dev.sms) return false;
  return dev.fits[tc_pick_kp(p.K) == 128];
}

/// p cut to its first `len` tokens (one sequence): T and the chunk counts, which size a segment's workspace.
KParams with_length(const KParams& p, int len) {
  KParams s = p;
  s.T = len;
  s.chunks_per_seq = (len + 63) / 64;
  s.num_chunks = s.chunks_per_seq;
  return s;
}

/// The cluster size of the state kernel (session 17; 1: v2_state_pdl, no cluster): at most n, with n =
/// LINATTN_V10_CLUSTER (1, 2, 4 or 8; 1 turns the cluster kernel off) or by default 8 at KP = 128 and 1 at
/// KP = 64 (the file comment); the largest of n, n / 2, ..., 2 that divides the value tiles, where the cluster
/// kernel fits beside an intra block and all clusters fit the GPU at once (cudaOccupancyMaxActiveClusters), else 1.
int cluster_size(const KParams& p, int KP) {
  const DeviceFacts dev = device_facts();
  const int i = KP == 128, nvt = (p.V + 15) / 16;
  int want = KP == 128 ? 8 : 1;
  if (const char* s = std::getenv("LINATTN_V10_CLUSTER")) {
    want = std::atoi(s);
    if (want != 1 && want != 2 && want != 4 && want != 8) {
      static std::once_flag warned;
      std::call_once(warned, [s] {
        std::fprintf(stderr, "linattn: LINATTN_V10_CLUSTER='%s' is not 1, 2, 4 or 8; rung 10 picks the cluster size\n", s);
      });
      want = KP == 128 ? 8 : 1;
    }
  }
  if (!dev.mc_fits[i]) return 1;
  for (int cl = want; cl > 1; cl /= 2)
    if (nvt % cl == 0 && long(dev.mc_clusters[i][cl]) * cl >= long(p.N) * p.H * nvt) return cl;
  return 1;
}

/// The KParams of segment [t0, t0 + len) of the one sequence: inputs and o offset by t0 tokens.
KParams segment(const KParams& p, int t0, int len, int gate_bytes) {
  KParams s = with_length(p, len);
  const std::int64_t tok = std::int64_t(t0) * p.H;  // rows of [T, H, .]
  auto at = [](const void* base, std::int64_t bytes) {
    return base ? static_cast<const void*>(static_cast<const char*>(base) + bytes) : nullptr;
  };
  s.q = at(p.q, tok * p.K * 2);  // bf16 (rung 7's range)
  s.k = at(p.k, tok * p.K * 2);
  s.v = at(p.v, tok * p.V * 2);
  s.o = static_cast<char*>(p.o) + tok * p.V * 2;
  s.g = at(p.g, tok * gate_bytes);  // scalar gate [T, H] (null for DeltaNet)
  s.beta = at(p.beta, tok * gate_bytes);
  return s;
}

std::size_t round256(std::size_t x) { return (x + 255) / 256 * 256; }
std::size_t state_bytes(const KParams& p) { return round256(sizeof(float) * std::size_t(p.H) * p.K * p.V); }
/// One of the two workspace halves: a whole segment's tc workspace.
std::size_t half_bytes(const KParams& p, int seg) { return round256(tc_workspace_bytes(with_length(p, seg))); }

}  // namespace

int v10_last_segments() { return g_last_segments; }
int v10_last_cluster() { return g_last_cluster; }

std::size_t v10_workspace_bytes(const KParams& p) {
  std::size_t pipe = 0;
  const int seg = segment_tokens();
  if (p.cu == nullptr && p.N == 1 && p.T > seg) pipe = 2 * half_bytes(p, seg) + 2 * state_bytes(p);
  return std::max(pipe, v7_workspace_bytes(p));
}

void v10_launch(Call c) {
  g_last_segments = 0;
  g_last_cluster = 0;
  int seg = 0;
  if (!pipelines(c, seg)) return v7_launch(c);
  const KParams& p = c.p;
  const int KP = tc_pick_kp(p.K), S = (p.T + seg - 1) / seg, gate_bytes = c.gate_dtype == 0 ? 4 : 2;
  int cl = cluster_size(p, KP);
  const std::size_t half = half_bytes(p, seg);
  char* base = static_cast<char*>(p.ws);
  float* buf[2] = {reinterpret_cast<float*>(base + 2 * half), reinterpret_cast<float*>(base + 2 * half + state_bytes(p))};
  for (int s = 0; s < S; ++s) {
    const int t0 = s * seg;
    Call cs = c;
    cs.p = segment(p, t0, std::min(seg, p.T - t0), gate_bytes);
    cs.p.ws = base + (s % 2) * half;
    cs.p.h0 = s == 0 ? p.h0 : buf[(s - 1) % 2];
    cs.p.ht = s == S - 1 ? p.ht : buf[s % 2];
    if (s == 0) v7_intra_launch(cs, KP);
    else v7_intra_pdl_launch(cs, KP);  // a programmatic dependent of state(s - 1)
    if (cl > 1 && !tc_state_mc_launch(cs, KP, cl)) {  // the driver refused the tensor maps
      static std::once_flag warned;
      std::call_once(warned, [] {
        std::fprintf(stderr, "linattn: rung 10 could not encode its tensor maps; it runs the state kernel without clusters\n");
      });
      cl = 1;
    }
    if (cl == 1) tc_state_pdl_launch(cs, KP);
  }
  g_last_segments = S;
  g_last_cluster = cl;
}

}  // namespace linattn::cuda::detail
