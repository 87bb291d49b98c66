// optimized/cuda/bwd_v23_dsone.cu -- rung 23 of the CUDA backward ladder: rung 22 (bwd_v22_kq8.cu, i.e. rung 21 with
// G1''s octet k, q staging) with the dstates kernel holding one stage of its w_aux, Qg and Kd tiles instead of two, so
// that two of its blocks share an SM (issue 6; written and run in session 21: bit for bit with rung 22 but slower, so not
// `best`; optimized/cuda/RESULTS.md, "Rung 23").
//
// Why: the dstates kernel (bwd3_dstates, bwd_v3_async.cu: the reverse recurrence B1, B3 over a sequence's chunks, one
// block per (sequence, head, BV value columns)) took 0.56-0.61 ms for DeltaNet at B=8 T=4096 H=16 K=V=128 against fla's
// dhu 0.27. Its shared memory (two stages of three [64][136] bf16 tiles: 104 KB of 160 KB at BV = 32; 187 KB at
// BV = 64) fits one block per SM, so 8 warps per SM walk a serial chain of chunks: each chunk's products, barriers and
// stores wait on one another with nothing else to issue. With one stage of those tiles the block takes 107,520 bytes
// at BV = 32, and two blocks fit (16 warps per SM). Each chunk's loads then go in two cp.async groups:
//   issue_a(ci - 1): Kd into sKd once B1 of chunk ci has read it, P, do, exp(G_C) into their free stage;
//                    awaited before B1 of chunk ci - 1 (covered by B3 of chunk ci);
//   issue_b(ci - 1): w_aux, Qg once B3 of chunk ci has read them; awaited before B3 of chunk ci - 1 (covered by B1).
// One barrier more per chunk. The products, their operands and their order are unchanged, so every gradient equals
// rung 22's (and so rung 21's) bit for bit (proofs_tests/test_cuda_backward.cu, "CUDA v23 gradients equal v22
// gradients bit for bit").
//
// Value tile: 32 columns by default at K > 64 (two blocks per SM; 64 would need 136 KB, one block), rung 21's pick at
// K <= 64 (bwd_v3_async.cu's dstates_bv); LINATTN_BWD3_BV (32 or 64; 128 at K > 64, session 22) sets it for both rungs. Registers (ptxas -v,
// nvcc 13.0, sm_90a): 64-126 per thread for the KP = 128, BV = 32 instantiations, under the 128 that two blocks of 256
// threads allow; no launch bound forces it (a min-blocks bound changed the existing instantiations' allocation).
//
// What changes against rung 22: the dstates kernel only (bwd3_dstates<.., kOne = true>, bwd_v3_front's DsPick::one_stage); G1'
// is rung 22's, G2' rung 21's. KDA, GDN2 and every fallback run rung 21. Range: rung 18's (bwdc::in_rung18_range).
// Workspace: rung 3's.
//
// Measured (H200, session 21 call 2, bench/logs_session21/; B=8 T=4096 H=16 K=V=128): the dstates kernel took 0.568 ->
// 0.616-0.684 ms for DeltaNet and 0.671 -> 0.78-0.82 for GDN. Occupancy doubled (24 %), but at 32 value columns four
// blocks per head re-read the same w_aux, Qg, Kd and P tiles (DRAM 59 % -> 70 %); the wider tile matters more.
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v23_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v23_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung18_range(c)) return bwd_v21_launch(c);  // KDA, GDN2 and rung 18's fallbacks: rung 21 (i.e. 20)
  // rung 22's routing and G1' (its route named for G1''s staging, as rung 22's), rung 21's G2'; the front's dstates
  // kernel with one stage of w_aux, Qg, Kd
  bwdc::bwd_duv_split_launch(c, p.K % 8 == 0 ? "bwd_v23_kq8" : "bwd_v23", bwdc::bwd_v12_g1_dsh_kq8,
                             bwdc::bwd_v12_g1_dvh_kq8, bwdc::bwd_v12_g1_lean_kq8, bwdc::DsPick::one_stage);
}

}  // namespace linattn::cuda::detail
