// optimized/cuda/bwd_v18_lean.cu -- rung 18 of the CUDA backward ladder: rung 17 (bwd_v17_hybrid.cu) for
// DeltaNet and GDN without the extras kernel's E, Qg and Kd arrays (issue 6; written in session 11, `best`
// since then).
//
// Measured (H200, session 11 calls 5-6, bench/logs_session11/; B=8 T=4096 H=16 K=V=128 bf16, one process
// with rung 17): its bit test against rung 17 passes (1,848 assertions: DeltaNet and GDN on rung 13's bit
// cases and rung 15's tiny extreme-gate cases, every operator on the pair cases), both properties, the
// outside-range test, and the saved tests over every saved rung (43,704 and 52,704 assertions); memcheck 0
// errors, racecheck 0 hazards; mutants 240-244 all caught. Backward rung 17 -> 18: DeltaNet 4.467 -> 4.163,
// GDN 5.372 -> 4.878 ms; with the saving forward with states DeltaNet 4.663 -> 4.291, GDN 5.526 -> 4.999.
// Per kernel (DeltaNet): prepare 0.784 -> 0.491 (the intra kernel alone; 0.003 with saved states), G1'
// 1.339 -> 1.254, G2' 1.247 -> 1.306; GDN: prepare 0.878 -> 0.546, G1' 1.855 -> 1.668, G2' 1.533 -> 1.553
// (call 5, one process). KDA and GDN2 unchanged (rung 17 itself).
//
// Why (session 11, bench/logs_session11/): with the saving forward with states, DeltaNet's "prepare" is
// the extras kernel alone, 0.326 ms of a 3.5 ms backward. It writes E = (beta k) exp(G), Qg = (scale q)
// exp(G) and Kd = k exp(G_last - G) in float32 ([rows, K] each: 3 x 268 MB at B=8 T=4096 H=16 K=128),
// and G in float64; G1' and G2' read them back. For DeltaNet (G = 0) G1' reads none of them and G2' reads
// only E = beta k; for GDN G1' reads Qg, Kd and G2' reads E, all products of q, k, beta and G that the
// kernels already load or can load in bf16 (half the bytes).
//
// What changes against rung 17 (DeltaNet, GDN only; KDA and GDN2 run rung 17 as it is):
//   prepare  bwd_v3_front(.., g_only): DeltaNet no extras kernel at all; GDN bwd18_gcum (bwd_v3_async.cu),
//            F1 alone: G_i = g_0 + ... + g_i in float64 in row order, the extras kernel's sum, into ws.G.
//   G1'      bwd12_g1<true, true, true> (kLean): GDN's Qg = (scale q) exp(G_i), Kd = k exp(G_last - G_i)
//            formed in the tail from the q, k and G it reads already.
//   G2'      bwd11_wy<Tg, true, kLoDu0, true> (kLean): the E slab of B6 staged from k (8-byte loads),
//            beta and G (stage_e); GDN's E in B10 formed from the k slab in shared memory.
// Every formed value is the extras kernel's expression on the same operands (float32 products in the
// same order, expf of the same float of the same float64 G), so rung 18's gradients are rung 17's bit
// for bit (proofs_tests/test_cuda_backward.cu, "CUDA v18 gradients equal v17 gradients bit for bit").
// Estimate written before the run: DeltaNet's prepare -0.33 ms (saved states) and G2' reading 2 x 16 KB of
// bf16 k per block instead of 2 x 32 KB of float32 E; GDN's extras kernel replaced by a 4 MB one. The
// prepare gain came as estimated; G2' got 0.02-0.06 ms slower, not faster; G1' 0.09-0.19 ms faster.
//
// Session 14 (bench/logs_session14/, RESULTS.md "Session 14: G2' staging" and "... the saving forward on rung
// 7's intra kernel"), both bit for bit with rung 17 still:
//   G2'      the reason it was slower: stage_e's k loads issued after the dw_aux slab's shared stores (and v's
//            after dv_new's in the V slabs), one more dependent global round trip per slab. stage_dwa_e and
//            the fused V-slab staging issue every load of a slab first: G2' DeltaNet 1.26 (rung 17) -> 1.18
//            (K slabs only, call 3) and 1.13-1.14 (both, call 6); GDN 1.55 -> 1.44 (call 3).
//   prepare  in rung 7's range the intra kernel is rung 7's kA instantiation (v7_overlap.cu), which writes
//            rung 4's workspace and A with 3 blocks per SM instead of 2 (0.509 ms in call 3, 0.470 in call
//            6: within the spread of one kernel across processes, so not yet a measured gain).
//
// Range: rung 17's. Workspace: rung 3's (E, Qg, Kd keep their place, unwritten).
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v18_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v18_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  // KDA, GDN2, calls outside rung 3's or RowBase's range and G1''s grid limit: rung 17 as it is.
  if (!bwdc::in_rung18_range(c)) return bwd_v17_launch(c);
  bwdc::bwd_split_launch(c, "bwd_v18", bwdc::bwd_v12_g1_lean, bwdc::bwd_v11_g2_lean, /*g_only=*/true);
}

}  // namespace linattn::cuda::detail
