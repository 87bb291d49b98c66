// optimized/cuda/bwd_v6_tc_b9.cu -- rung 6 of the CUDA backward ladder (`best` in session 6: first
// run on the H200 in calls 1-3, every test, sanitizers and mutants 66-68 pass; the fastest rung for
// all four operators until rung 7): rung 5 (bwd_v5_levels_front.cu: the levels prepare, batched loads) with B9 of the chunk
// gradients for per-channel gates (KDA, GDN2) on bf16 tensor cores by binary levels of reference rows
// (issue 6), instead of rung 2's float32 B9 loop (bwd_common.cuh, unrolled in rung 5).
//
// What changes: the grads kernel is bwd_grads_tc<Tg, V6Mid> (bwd_v4_tc_tail.cu; V6Mid = V5Mid whose
// run_impl, for per-channel gates, calls bwdc::b9_levels of bwd_v6_tc_b9.cuh after the tensor-core B7
// and returns true). DeltaNet and GDN run V4Mid's tensor-core B9 as in rung 5. Prepare, states and
// dstates are rung 5's (bwd_v3_front with the forward's rung 4 intra kernel); B10 / B11 unchanged.
// b9_levels, per 64-channel slab: stage k, q (bf16), e (float32), G (float64) once; then per level
// s = 32 .. 1 build F_s (float32: the factor of every row towards its reference row, exponent
// clamped to <= 0) and the operands X_s = [e F left | k F right], Y_s = [q~ F left | 0] (bf16 hi + lo);
// de^L, dq^P contract over j (A = dL, dP; B = X), dk^LP over i (A = dL^T, dP^T via ldmatrix .trans;
// B = X, Y; the forward's level table transposed); A is masked per level on the diagonal 16 x 16
// blocks; each level's float32 accumulator is scaled by the OUTPUT row's F in the epilogue; the
// diagonal terms dP_rr k_r, dP_rr q~_r are added in float32. Derivation, table and the breaks it
// guards against: bench/models/bwd_b9_levels_model.py (float64: equals the direct sums to 7.8e-16).
//
// Why: bench/analysis_bwd_grads.md found rung 4's KDA grads kernel (25.8 ms on the H200, B=8 T=4096
// H=16 K=V=128) latency-bound, with the float32 B9 a 9.2 ms dependency chain (2,080 expf, 12,448 FFMA,
// 13,424 LDS per warp) plus 3.2 ms of staging; by levels each warp does 528 mma m16n8k16 and
// 192 MUFU exp per warp (K = 128), ~580 epilogue FFMA, ~250 ldmatrix and ~3.8k build instructions
// (the model's design note). Estimate (NOT measured): the 9.2 ms chain becomes ~0.5 ms of independent
// work, KDA's and GDN2's grads kernel ~14-16 ms against rung 4's 25.8 (rung 5's unrolled float32 B9,
// itself not run yet, was estimated at -5 to -7 ms).
//
// Measured (session 6 call 1, H200, B=8 T=4096 H=16 K=V=128 bf16, `bench_backward.py --bwd-versions
// 4,5,6`): grads kernel KDA 25.78 (rung 4) / 12.97 (rung 5) / 11.49 ms (rung 6), GDN2 27.00 / 13.44 /
// 11.71 -- below the estimate's 14-16 ms, but mostly from rung 5's changes, which the estimate did not
// count; backward KDA 15.63 ms, GDN2 15.92 (rung 5: 17.12, 17.66); DeltaNet 11.15, GDN 11.49 (the same
// code as rung 5 there; 11.38, 11.69 in the same run).
//
// Shared memory: b9_levels uses 158,976 bytes of bwd_grads_tc's 165,120-byte overlay (one level per
// round: 10 bf16 tiles of 64 x 72 = dL, dP, X, Y hi + lo and the k, q slabs; F 64 x 68 and e 64 x 64
// float32; dP's diagonal; G 64 x 64 float64); the kernel keeps its 167,424 bytes, one block per SM.
// (The model's design note counted 122,880 bytes; the k, q, e slabs staged once per slab, not
// reloaded from global memory at each of the six levels, take the rest.)
// Barriers: 1 + 2 per level per slab (13 per slab). ptxas (sm_90a): bwd_grads_tc<Tg, V6Mid> 254
// registers, no spill, no stack (as V5Mid); rungs 2-5 keep their PTX (bench/ptx_identity.py: V4Mid's
// and V5Mid's kernels, rung 2's, rung 3's and v4_levels.cu's identical). Index logic checked without a
// GPU by bench/models/bwd_v6_b9_emulation.py (float64, against the model's direct sums: 7.8e-16).
//
// Numerics: dL, dP (float32 from B7 / B5) and X, Y (float32 products) split into bf16 hi + lo, three
// products per k-step, float32 accumulation; F, the G differences (float64 G, difference then
// float32), the epilogue and the diagonal terms stay float32. The model's emulation of exactly this
// gives 5.6e-6 relative RMS against the direct sums, far below rung 3's bf16-level bounds, which the
// tests keep (1e-2; 2e-2 for the gate gradients: proofs_tests/test_cuda_backward.cu). The clamp
// min(diff, 0) is a no-op for log-decays <= 0 (SPEC section 4) and keeps rows >= Lc (G staged 0)
// finite. It REQUIRES log-decays <= 0: the host API rejects g > 0 (ref::validate_recurrent), the
// device API (backward_device) does not check, and there rung 6 would clamp where rungs 1-5 compute. Not bit-identical to rung 5 for KDA / GDN2 (other sums); DeltaNet and GDN are the same
// operations as rung 5 (V4Mid's code with kBatch).
//
// Range and fallbacks: rung 3's (bf16 inputs, 16 <= K <= 128; other calls run rung 2 through
// bwd_v3_launch). Workspace: rung 3's.
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v6_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v6_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);  // outside the range: rung 2 (via rung 3)
  bwdc::Profile prof(c.stream, "bwd_v6");
  bwdc::bwd_v3_front(c, prof, /*levels_intra=*/true);  // rung 5's front
  if (p.num_chunks > 0) bwdc::bwd_v6_grads(c, prof);
}

}  // namespace linattn::cuda::detail
