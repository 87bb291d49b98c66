// optimized/cuda/v5_split.cu -- rung 5 of the CUDA ladder (run in session 5: correct, slower where it splits; not `best`): v4 with
// the sequential state pass split from the output, for calls whose fused state kernel cannot fill
// the GPU (few sequence-heads, long sequences: B=1 T=32768 H=16).
//
// What v4 left: its state kernel (v2_state, v2_tensorcore.cu) runs one block per (sequence, head,
// BV value columns) and walks the chunks of its sequence in order; inside that loop it also
// computes each chunk's output o = (q . exp(G)) S + P v_new (SPEC section 4, step 3). At B=1
// T=32768 H=16 K=V=128 that is 16 x 8 blocks (BV = 16) on 132 SMs, 512 steps each, 1.11 ms
// (RESULTS.md, "Where the time goes"): the o products, the q . exp(G) and P tiles they load and
// the o stores all sit on the sequential critical path.
//
// v5 (the split of fla's chunk_gated_delta_rule_fwd_h + chunk_fwd_o):
//   1. intra: v4's intra-chunk kernel (v4_intra_launch), unchanged: the tensor-core workspace
//      w_aux, q . exp(G) * scale, k . exp(G_C - G), P, u, exp(G_C) (tc_common.cuh, V2Ws).
//   2. state: v2_state in its backward mode (kBwd) plus kHt: per chunk v_new = u - w_aux S and
//      S <- Diag(exp(G_C)) S + (k . exp(G_C - G))^T v_new (SPEC section 4, step 3: the chunked
//      form of the paper's per-token recurrences, Eqs.14-24), storing the state
//      ENTERING every chunk (float32, [num_chunks, H, K, V]) and v_new (float32, [B T H, V]), and
//      the final state; no q . exp(G) or P tile is loaded and no o product is computed.
//   3. output (v5_output below): fully parallel over (chunk, head, 64 value columns):
//      o = (scale q . exp(G)) S_c + P v_new   (SPEC step 3: the inter-chunk read plus the
//      intra-chunk read), on tensor cores, with S_c split into bf16 hi + lo parts and v_new
//      rounded to bf16 exactly as v2_state does; each accumulator sees the same mma.sync sequence
//      as in v2_state (hi then lo per 16 channels, then P v_new over the lower-triangular blocks),
//      so v5's o and final state equal v4's bit for bit (test_cuda_forward.cu checks this).
// Workspace for the per-chunk states: float32. bf16 hi + lo takes the same 4 bytes per entry, so
// float32 costs nothing more, keeps the state kernel's kBwd instantiation (shared with the
// backward's rung 3) as it is, and gives v4's numbers exactly; bf16 hi alone would halve the
// traffic (fla stores its h in bf16) but round S to 8 bits in o. Size: num_chunks x H x K x V x 4
// bytes = 512 MiB at both bench shapes (512 chunks x 16 heads x 128 x 128), plus v_new
// B T H V x 4 = 256 MiB, on top of v4's workspace.
// When the split pays (v5_splits): the fused kernel's widest tile (BV = 64) gives fewer blocks than
// the 132 SMs (then v2's pick_bv narrows the tile and every block still walks every chunk); otherwise
// v5 runs v4 unchanged. LINATTN_V5_SPLIT=1 (0) forces (forbids) the split, for the benchmark and
// the tests. The expected effect is argued in RESULTS.md "Rung 5"; nothing here has been timed or
// run on a GPU, so Version::best stays v4 until the device run listed in RESULTS.md "Status".
#include <cstdlib>
#include <string>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {
namespace {

constexpr int kBVO = 64;  // value columns per output block

__host__ __device__ inline std::size_t align256(std::size_t x) { return (x + 255) / 256 * 256; }

/// Where the split's two arrays live in the workspace, after v4's.
struct SplitWs {
  float* S;   // [num_chunks, H, K, V]  state entering each chunk
  float* vn;  // [B * T * H, V]         v_new
};

__host__ __device__ inline std::size_t split_state_bytes(const KParams& p) {
  return std::size_t(p.num_chunks) * p.H * p.K * p.V * 4;
}

inline SplitWs split_ws(const KParams& p) {
  char* base = static_cast<char*>(p.ws) + align256(tc_workspace_bytes(p));
  SplitWs s;
  s.S = reinterpret_cast<float*>(base);
  s.vn = reinterpret_cast<float*>(base + align256(split_state_bytes(p)));
  return s;
}

template <int KP>
struct OutSmem {
  static constexpr int LDK = ldk(KP);
  static constexpr int LDV = kBVO + 8;
  static constexpr int sQ = 0;                        // bf16 [64][LDK]  scale q . exp(G)
  static constexpr int sP = sQ + 64 * LDK * 2;        // bf16 [64][72]   P
  static constexpr int sSh = sP + 64 * 72 * 2;        // bf16 [KP][LDV]  S_c, hi part
  static constexpr int sSl = sSh + KP * LDV * 2;      // bf16 [KP][LDV]  lo part
  static constexpr int sVn = sSl + KP * LDV * 2;      // bf16 [64][LDV]  v_new
  static constexpr int bytes = sVn + 64 * LDV * 2;
};

/// o = (scale q . exp(G)) S_c + P v_new (SPEC section 4, step 3) for one (chunk c, head h, value
/// columns 64 z..): blockIdx.x = (c H + h) nvt + z with nvt = ceil(V / 64), so that the value tiles
/// of one chunk-head run side by side and read its q . exp(G) and P tiles from L2 once. S_c is the
/// state entering the chunk (float32, from the state pass), v_new the chunk's new values
/// (float32); rows past a ragged chunk's end and columns past V are zero.
template <int KP>
__global__ void __launch_bounds__(kThreads) v5_output(KParams p, SplitWs sw) {
  using Sm = OutSmem<KP>;
  constexpr int LDK = Sm::LDK, LDV = Sm::LDV, ONT = kBVO / 16;
  extern __shared__ __align__(16) char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem + Sm::sQ);
  bf16* sP = reinterpret_cast<bf16*>(smem + Sm::sP);
  bf16* sSh = reinterpret_cast<bf16*>(smem + Sm::sSh);
  bf16* sSl = reinterpret_cast<bf16*>(smem + Sm::sSl);
  bf16* sVn = reinterpret_cast<bf16*>(smem + Sm::sVn);
  const int K = p.K, V = p.V, H = p.H, nvt = (V + kBVO - 1) / kBVO;
  const int z = int(blockIdx.x % unsigned(nvt)), ch = int(blockIdx.x / unsigned(nvt));
  const int c = ch / H, h = ch % H, v0 = z * kBVO;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  int tok0, Lc;
  chunk_of(p, c, tok0, Lc);
  const V2Ws ws = v2_ws(p, KP);
  const std::int64_t cw = std::int64_t(c) * H + h;

  // q . exp(G) and P of the chunk: asynchronous copies, waited for below.
  for (int idx = tid; idx < 64 * (KP / 8); idx += kThreads) {
    const int i = idx / (KP / 8), d8 = (idx % (KP / 8)) * 8;
    cp_async16(sQ + i * LDK + d8, ws.qg + (cw * 64 + i) * KP + d8);
  }
  cp_async_p_tile(sP, ws.P, cw, tid);
  cp_async_commit();

  // S_c -> bf16 hi + lo (as v2_state's store_state_bf16); v_new -> bf16 (as its sVn).
  const float* Sc = sw.S + cw * K * V;
  const bool vec4 = (V % 4) == 0;
#pragma unroll 4
  for (int idx = tid; idx < KP * (kBVO / 4); idx += kThreads) {
    const int r = idx / (kBVO / 4), cc = (idx % (kBVO / 4)) * 4, col = v0 + cc;
    float x[4] = {0.f, 0.f, 0.f, 0.f};
    if (r < K) {
      if (vec4) {
        if (col < V) {
          const float4 a = __ldg(reinterpret_cast<const float4*>(Sc + std::int64_t(r) * V + col));
          x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
        }
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (col + e < V) x[e] = __ldg(Sc + std::int64_t(r) * V + col + e);
      }
    }
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const unsigned hi = pack_bf16(x[e], x[e + 1]);
      const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(&hi);
      *reinterpret_cast<unsigned*>(sSh + r * LDV + cc + e) = hi;
      *reinterpret_cast<unsigned*>(sSl + r * LDV + cc + e) = pack_bf16(x[e] - __low2float(a), x[e + 1] - __high2float(a));
    }
  }
#pragma unroll 4
  for (int idx = tid; idx < 64 * (kBVO / 4); idx += kThreads) {
    const int i = idx / (kBVO / 4), cc = (idx % (kBVO / 4)) * 4, col = v0 + cc;
    float x[4] = {0.f, 0.f, 0.f, 0.f};
    if (i < Lc) {
      const float* src = sw.vn + (std::int64_t(tok0 + i) * H + h) * V;
      if (vec4) {
        if (col < V) {
          const float4 a = __ldg(reinterpret_cast<const float4*>(src + col));
          x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
        }
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (col + e < V) x[e] = __ldg(src + col + e);
      }
    }
    *reinterpret_cast<unsigned*>(sVn + i * LDV + cc) = pack_bf16(x[0], x[1]);
    *reinterpret_cast<unsigned*>(sVn + i * LDV + cc + 2) = pack_bf16(x[2], x[3]);
  }
  cp_async_wait<0>();
  __syncthreads();  // every tile in shared memory

  // Warp: rows 16 wm.., n-tiles wn0 .. wn0 + ONT of 8 columns (v2_state's layout at BV = 64).
  const int wm = warp & 3, wn0 = (warp >> 2) * ONT;
  float os[ONT][4] = {};
#pragma unroll
  for (int k0 = 0; k0 < KP; k0 += 16) {
    unsigned aq[4];
    load_a(aq, sQ, LDK, 16 * wm, k0);
    mma_acc_two_b(os, aq, sSh, aq, sSl, LDV, k0, 8 * wn0);  // (q . exp(G)) (S_c hi + lo)
  }
#pragma unroll
  for (int k0 = 0; k0 < 64; k0 += 16) {
    if (k0 > 16 * wm) break;  // P is lower triangular
    unsigned a[4];
    load_a(a, sP, 72, 16 * wm, k0);
    mma_acc_b(os, a, sVn, LDV, k0, 8 * wn0);
  }
  bf16* o = static_cast<bf16*>(p.o);
#pragma unroll
  for (int nt = 0; nt < ONT; ++nt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int i = 16 * wm + g8 + 8 * hh, col = v0 + 8 * (wn0 + nt) + 2 * t4;
      if (i >= Lc) continue;
      bf16* dst = o + (std::int64_t(tok0 + i) * H + h) * V + col;
      if (col + 1 < V && (V % 2) == 0) {
        *reinterpret_cast<unsigned*>(dst) = pack_bf16(os[nt][2 * hh], os[nt][2 * hh + 1]);
      } else {
        if (col < V) dst[0] = __float2bfloat16(os[nt][2 * hh]);
        if (col + 1 < V) dst[1] = __float2bfloat16(os[nt][2 * hh + 1]);
      }
    }
}

template <int KP>
void launch_output(const Call& c, const SplitWs& sw) {
  const int bytes = OutSmem<KP>::bytes;
  auto kern = v5_output<KP>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const unsigned blocks = unsigned(c.p.num_chunks) * unsigned(c.p.H) * unsigned((c.p.V + kBVO - 1) / kBVO);
  kern<<<blocks, kThreads, bytes, c.stream>>>(c.p, sw);
  LINATTN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool v5_splits(const KParams& p) {
  // The output kernel's one-dimensional grid must stay below 2^31 blocks.
  if (std::uint64_t(p.num_chunks) * std::uint64_t(p.H) * std::uint64_t((p.V + kBVO - 1) / kBVO) >= (1ull << 31))
    return false;
  if (const char* env = std::getenv("LINATTN_V5_SPLIT"); env && *env) return std::atoi(env) != 0;
  // The fused state kernel's grid at its widest tile (BV = 64) against the H200's 132 SMs.
  const long blocks64 = long(p.N) * p.H * ((p.V + 63) / 64);
  return blocks64 < 132;
}

bool v5_supports(const Call& c, std::string* why) { return v4_supports(c, why); }

std::size_t v5_workspace_bytes(const KParams& p) {
  if (!v5_splits(p)) return v4_workspace_bytes(p);
  return align256(tc_workspace_bytes(p)) + align256(split_state_bytes(p)) +
         std::size_t(p.B) * p.T * p.H * p.V * 4;
}

void v5_launch(Call c) {
  if (!v5_splits(c.p)) return v4_launch(c);
  const int KP = tc_pick_kp(c.p.K);
  const SplitWs sw = split_ws(c.p);
  if (c.p.num_chunks > 0) v4_intra_launch(c, KP);
  tc_state_split_launch(c, KP, sw.S, sw.vn);
  if (c.p.num_chunks == 0 || skip_kernel("output")) return;
  if (KP == 64) return launch_output<64>(c, sw);
  launch_output<128>(c, sw);
}

}  // namespace linattn::cuda::detail
