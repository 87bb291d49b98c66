// optimized/cuda/bwd_v5_levels_front.cu -- rung 5 of the CUDA backward ladder (first run on the H200
// in session 6, calls 1-3: every test, sanitizers and mutants pass; 1.44-1.82x faster than rung 4;
// rung 6 is faster still and `best`): rung 4 (bwd_v4_tc_tail.cu) with (1) its prepare stage on the forward's rung 4
// intra-chunk kernel instead of rung 3's, (2) its chunk-gradient kernel's stagings loading in
// batches and (3) that kernel's per-channel float32 B9 unrolled. (1) and (2, 3) touch different
// kernels, so the per-kernel times (LINATTN_BWD_PROFILE=1: "bwd_v5 kernels (ms): prepare
// ... grads ...") show their effects separately; (2) helps every operator, (3) only KDA and GDN2.
//
// (1) Prepare (docs/derivation-backward.md, "Chunked backward": the forward's
// per-chunk quantities w, u, exp-scaled q and k, P, and A = (I + L)^-1 kept for B7) ran v3's intra
// kernel (v3_intra_launch_with_A); here it runs v4_levels.cu's (v4_intra_launch_with_A): the same
// kernel body (tc_common.cuh's tci::intra, same workspace layout) with rung 4's per-channel L and P
// by binary levels of reference rows (revision 2's operand build) and A's off-diagonal 16 x 16
// blocks on tensor cores (revision 3, `tc_inverse`). States, dstates and the chunk gradients are
// rung 4's, unchanged.
//
// Why: on the H200 (session 5, B=8 T=4096 H=16 K=V=128 bf16) rung 4's prepare took 1.06 ms for
// DeltaNet and 3.35 ms for KDA (call 4, "bwd_v4 kernels"), while the forward's rung 4 intra kernel
// alone took 0.465 / 1.276 ms (call 7, "intra kernel only") against v3's 0.56 / 2.03. Expected: a
// prepare near the forward intra time plus rung 3's extras kernel, about 0.5 ms less for DeltaNet and
// GDN and about 2 ms less for KDA and GDN2 -- an estimate from those kernel times, not measured.
//
// (2) bwd_grads_tc<Tg, V5Mid> (bwd_common.cuh, Mid::kBatchLoads; V5Mid is V4Mid with that flag): the
// A, slab (do, v_new, dv_new, u0, S, dS') and E stagings issue the global loads of 4 (slab) or 16
// (A, E) items per thread before storing any; so do V4Mid's B9 k, q slab staging (8 items;
// DeltaNet and GDN; V4Mid::run_impl<Tg, true>) and the tail's per-element pass B10 (a) (4 items,
// ~14 loads each) and its dv pass (8 items): the analysis' items 1 and (part of) 3. The static analysis of rung 4's grads kernel
// (bench/analysis_bwd_grads.md) found it latency-bound: its staging loops were not unrolled and
// each item waited one global round trip (358 serial round trips per warp for DeltaNet, 160 of them
// in the slab staging); it estimated -2.5 to -4.5 ms for every operator from batching them (not
// measured). Same values and the same order of every floating-point operation, so this part should
// change no bit of the gradients (by construction; not checked on a GPU yet); ptxas: V4Mid 176
// registers, V5Mid 254 (no spill; one block per SM either way). Rungs 2 and 4 keep their PTX (checked with
// bench/ptx_identity.py after each part: rung 2's 3 kernels and V4Mid's 2 identical).
//
// (3) Per-channel gates (KDA, GDN2) keep rung 2's float32 B9 (bwd_common.cuh), which the analysis
// found a 156-clock dependency chain per term (~9 ms of KDA's 25.8 ms grads kernel): with
// Mid::kUnrolledB9 the row loop has a copy for per-channel gates alone (the only B9 V4Mid leaves to
// it), so its j and i loops unroll by 4 and the exp chains of consecutive terms overlap; G_r is read once per
// row and the slab staging loads 4 items at a time. The analysis estimated -5 to -7 ms for this
// "cheap version" (not measured); the tensor-core version (the forward's binary levels) is not
// written. Same sums in the same order as rung 2's loop (so bit-identical by construction).
// ptxas after (2) and (3): 254 registers (of 255), no spill.
//
// Measured (session 6 call 1, H200, B=8 T=4096 H=16 K=V=128 bf16, `bench_backward.py --bwd-versions
// 4,5,6`, LINATTN_BWD_PROFILE kernel times; rung 4 -> rung 5, ms): prepare DN 1.040 -> 0.958, KDA
// 3.363 -> 2.618 (estimate: -0.5 / -2: the extras kernel stays); grads DN 13.78 -> 8.88, GDN 14.01
// -> 9.14 (estimate for (2): -2.5 to -4.5), KDA 25.78 -> 12.97, GDN2 27.00 -> 13.44 ((2) + (3));
// backward DN 16.38 -> 11.38, GDN 16.66 -> 11.69, KDA 30.65 -> 17.12, GDN2 32.10 -> 17.66.
// The "same operations, bit for bit" claim held for DeltaNet and GDN; for KDA and GDN2 dk and dg
// differ from rung 4's in the last bits (call 1; up to 1.2e-6 / 8.2e-6 relative RMS, call 2). Cause
// (bench/analysis_bwd_v5_bits.md, from the PTX and SASS): nvcc peels the (Lc - r) mod 4 remainder
// iterations of the unrolled dk^{L,P} loop, and in the peeled i = r + 1, r + 2, where it knows
// i > r, it contracts src = dP q~ + dL e as fma(dP, q~, dL * e); rung 2's loop and the unrolled body
// compute fma(dL, e, dP * q~). Only rows with (Lc - r) mod 4 in {2, 3} differ. The test holds KDA
// and GDN2 to 5e-5 (proofs_tests/test_cuda_backward.cu); __fmul_rn / __fmaf_rn in rung 4's order
// in this copy would make it bit-identical again (checked in PTX by helper fma6, not applied: it
// changes rung 5's PTX and needs a device run).
//
// Numerics of (1): A now carries the ~2^-16 relative error of the tensor-core products (as the forward's
// rung 4; it is split hi + lo for B7 anyway) and per-channel L, P are the forward rung 4's (bf16
// operands, like rung 3's off-diagonal blocks); rung 3's bounds (1e-2; 2e-2 for the gate gradients,
// proofs_tests/test_cuda_backward.cu) are expected to hold and the tests check them. Range and
// fallbacks: rung 3's (bf16 inputs, 16 <= K <= 128; other calls run rung 2 through bwd_v3_launch).
#include <cstdlib>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v5_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v5_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);  // outside the range: rung 2 (via rung 3)
  bwdc::Profile prof(c.stream, "bwd_v5");
  // Test hook: with LINATTN_BWD5_V3_FRONT set, prepare runs rung 3's intra kernel (rung 4's front),
  // so the gradients must equal rung 4's bit for bit: the grads-kernel changes claim the same
  // floating-point operations in the same order (proofs_tests/test_cuda_backward.cu checks it).
  const bool v3_front = std::getenv("LINATTN_BWD5_V3_FRONT") != nullptr;
  bwdc::bwd_v3_front(c, prof, /*levels_intra=*/!v3_front);
  if (p.num_chunks > 0) bwdc::bwd_v4_grads(c, prof, /*batch_loads=*/true);
}

}  // namespace linattn::cuda::detail
