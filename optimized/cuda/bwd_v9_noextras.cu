// optimized/cuda/bwd_v9_noextras.cu -- rung 9 of the CUDA backward ladder: rung 8 (bwd_v8_wide.cu)
// without the prepare's extras kernel: the chunk-gradient kernel forms G, E, Qg and Kd itself (issue 6;
// bench/analysis_bwd_plan.md section 4, rung 9). Written in session 8.
// Measured (session 8 call 4, H200, B=8 T=4096 H=16 K=V=128 bf16): its tests pass (bit for bit with
// rung 8), but backward v8 / v9, ms: DeltaNet 6.914 / 6.915, GDN 7.193 / 7.680, KDA 10.747 / 11.351,
// GDN2 10.143 / 10.944. The extras kernel's 0.35-0.5 ms became 0.85-1.1 ms more in the grads kernel,
// which is latency-bound at one block per SM. Not `best`; kept as the measured counter-example.
//
// What changes. Rung 8's prepare is two kernels: the forward's rung 4 intra kernel (with A) and
// bwd3_extras(_wide) (bwd_v3_async.cu), which writes F1, G = the float64 cumulative log-decay of each
// chunk, and F2 scaled, E = (beta | b) k exp(G), Qg = scale q exp(G), Kd = k exp(G_last - G), in
// float32 [rows, K], for the grads kernel only. Rung 9 launches no extras kernel
// (bwd_v3_front(.., extras = false)); its grads kernel bwd_grads_tc<Tg, V9Mid> (bwd_v4_tc_tail.cu;
// V9Mid = V8Mid with Mid::kNoExtras, bwd_common.cuh):
//   - F1 at the start of each block: the chunk's g staged in float64 over the (still free) tiles,
//     then one thread per channel adds acc += g_i in row order from 0 (bwd3_extras' scan: the same
//     adds) and writes G to ws.G; KDA / GDN2 64 x K, GDN 64 values, DeltaNet nothing (G = 0). ws.G
//     stays: a 64 x K float64 G (64 KB at K = 128) does not fit beside the kernel's 167,424 bytes of
//     shared memory under the 227 KB limit, and G is read in every phase (E's staging in the
//     products, B9 by levels, the tail), so the block writes it to global memory and reads it back
//     as rung 8 does (block-private: written and read by the same block, ordered by __syncthreads);
//   - E where the products stage it (by quads, as rung 8; item by item where rung 8 is), E, Qg, Kd
//     in the tail's (a) and Kd in its (b) are formed from k, q, beta | b and G with bwd3_extras'
//     expressions in its order (form_E, form_Qg, form_Kd: (e k) expf(float(G_i)), (scale q)
//     expf(float(G_i)), k expf(float(G_last - G_i)) with G in float64): no sum, so no contraction
//     can differ; expf is the same library call on the same float.
// The same values in every float32 operation, so rung 8's gradients bit for bit (test_cuda_backward:
// "CUDA v9 chunked backward gives rung 8 gradients bit for bit"). States and dstates are rung 8's
// (they read the forward's bf16 workspace, not E, Qg, Kd, G). The workspace keeps rung 3's layout
// (E, Qg, Kd are allocated and no longer written).
//
// Why (measured on the H200, session 8 call 1, bench/logs_session8/call1/; B=8 T=4096 H=16 K=V=128
// bf16, ms): rung 8's prepare (intra + extras) 0.795 / 0.889 / 1.846 / 1.882 for DeltaNet / GDN /
// KDA / GDN2, of which the intra kernel alone is ~0.49 (DN) / ~1.31 (KDA): the extras kernel costs
// ~0.3 ms (DN) to ~0.55 ms (KDA, GDN2), and the grads kernel (4.93 / 5.11 / 7.77 / 7.08) reads E,
// Qg, Kd back (12 bytes per element of [T, H, K]).
//
// Why G goes through ws.G and not shared memory: 64 x K float64 is 64 KB at K = 128, and the kernel's
// 167,424 dynamic + 1,024 static bytes + 65,536 = 233,984 > 232,448 (227 KB); G is read in every
// phase, so no overlay holds it.
// (b)'s sum over dKd_i Kd_i reads Kd as (a) formed it, from shared memory beside dG (sKd9).
//
// Static counts (nvcc 13.0 sm_90a, nvdisasm 13.5, no GPU; RESULTS.md "Rung 9" has the commands):
// PTX of every rung 1-8 kernel unchanged (40 of 40). bwd_grads_tc<float, V9Mid> 239 registers (bf16
// gates 240; V8Mid 238 / 237), no spill, no stack; 13,808 SASS instructions against 11,864 (the new
// paths keep rung 8's item-by-item fallbacks; the scan unrolled by 8): FFMA 486 -> 662, FMUL 225 ->
// 373, MUFU 63 -> 109, DADD 46 -> 135, LDG 434 -> 449, STG 409 -> 494 (G), LDS 232 -> 372. Estimated
// executed warp instructions per block at K = V = 128: grads + ~4.8k (DeltaNet) / + ~8.6k (KDA) while
// the extras kernel's ~7.5k / ~14k go. Global traffic per block (extras + grads, L2-level, float32
// gates): DeltaNet 1377 -> 1105 KB (-20%), GDN -20%, KDA 1633 -> 1425 KB (-13%), GDN2 -13%.
// Time: expected backward -0.2 to -0.5 ms; measured (session 8 call 4, logs_session8/rung9_run.sh) 0 for
// DeltaNet and +0.5 to +0.8 ms for GDN, KDA, GDN2 (header above): the estimate was wrong, because the
// grads kernel is latency-bound at one block per SM and hides none of the work added to it.
//
// Range: rung 8's. Calls outside rung 3's range (float32 inputs, K < 16 or K > 128) run rung 2
// through bwd_v3_launch; calls with H * max(K, V, 64) >= 2^25 (32-bit offsets) run rung 6.
// Workspace: rung 3's. Requires log-decays <= 0, as rung 6 (the host API checks; the device API not).
#include <algorithm>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v9_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v9_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);  // outside the range: rung 2 (via rung 3)
  // RowBase's 32-bit offsets, as rungs 7 and 8; else rung 6.
  if (!bwdc::in_rowbase_range(p)) return bwd_v6_launch(c);
  bwdc::Profile prof(c.stream, "bwd_v9");
  // rung 8's front without its extras kernel: prepare is the levels intra kernel alone
  bwdc::bwd_v3_front(c, prof, /*levels_intra=*/true, /*wide_extras=*/true, /*extras=*/false);
  if (p.num_chunks > 0) bwdc::bwd_v9_grads(c, prof);
}

}  // namespace linattn::cuda::detail
