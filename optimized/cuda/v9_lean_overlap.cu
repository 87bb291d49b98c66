// optimized/cuda/v9_lean_overlap.cu -- rung 9 of the CUDA forward ladder (session 13): rung 6's lean
// workspace on rung 7's intra kernel, for DeltaNet and GDN (bf16 inputs, 16 <= K <= 128).
//
// Measured (H200, session 13 calls 2-4, bench/logs_session13/; B=8 T=4096 H=16 K=V=128 bf16, ms): bit for
// bit with rung 6 (193 assertions), properties and outside range pass, mutants 270-271 caught. Intra kernel
// alone, rung 7 -> 9: DeltaNet 0.406 -> 0.392, GDN 0.449 -> 0.416 (call 2); state kernel 0.501 -> 0.487 and
// 0.509 -> 0.508. Whole forward, three processes with fla: DeltaNet 0.884-0.892 -> 0.853-0.864, GDN
// 0.917-0.923 -> 0.885-0.890 (fla 0.851 at its fastest); in call 2 alone DeltaNet's whole forward was
// 0.884 -> 0.894 although both its kernels were faster. At B=1 T=32768 the lean state kernel is slower at
// 16-column tiles (1.032 -> 1.077 for GDN): GDN 1.465-1.481 -> 1.477-1.493, DeltaNet 1.445-1.452 ->
// 1.430-1.443. `best` since session 15 where v9_in_best holds (64-column value tiles, e.g. B=8 T=4096
// H=16 V=128; rung 10 elsewhere): the saving forward and the backward's recompute run its lean state kernel
// there too, so a training step keeps the plain forward's bits. Session 15 call 3 (medians of 3 rounds, B=8):
// DeltaNet 0.845, GDN 0.870 (fla 1.016, and 0.852 at its fastest for GDN). RESULTS.md "Session 15: rung 9 in best".
// Session 16 (rung 7's intra kernel and the lean state kernel's loads with fewer instructions, same bits; call 5):
// DeltaNet 0.796, GDN 0.818 (fla 1.016 and 0.853; RESULTS.md "Session 16").
//
// Why. Rung 6 dropped the q~ = scale q exp(G) and k~ = k exp(G_C - G) tiles (2 x 16 KB of the intra
// kernel's 88 KB of writes per (chunk, head) at K = V = 128; the state kernel reads q and k from the
// inputs and applies the row factors itself) and gained nothing on the intra kernel (GDN 0.481 -> 0.486
// ms, session 8 call 1): at 2 blocks per SM that kernel was bound by its barriers, not its bytes. Its lean
// state kernel was 6% faster at B=8 (0.521 -> 0.490) and 4% slower at B=1 T=32768 (1.033 -> 1.074).
// Rung 7 then let 3 blocks reside per SM (0.483 -> 0.439): the barrier stalls are hidden better, so the
// bytes and the q~ loop's instructions may now count. Rung 9 measures that: rung 7's intra kernel with
// kLean (v7_overlap.cu: no q~ loop, no k~ store, G_i to lean_g) and rung 6's lean state kernel
// (tc_state_lean_launch, v2_tensorcore.cu's v2_state_body with kLean).
//
// Arithmetic (SPEC section 4, step 3; the chunked form of the paper's Eqs.14-17): rung 6's, value for
// value. The intra kernel's w_aux, P, u, exp(G_C) and G_i are rung 7's, which are v4's bit for bit, and
// rung 6's lean intra kernel writes v4's values too; the state kernel is rung 6's. So o and the final
// state equal rung 6's bit for bit (test_cuda_forward.cu), and the bounds are rung 6's.
// Range: rung 7's (bf16 inputs, 16 <= K <= 128, gate none or scalar). Every other call runs what rung 7
// runs there (v4 where v4 takes the call, else v1), so v9 takes every call.
#include <algorithm>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {

std::size_t v9_workspace_bytes(const KParams& p) {
  return std::max({tc_lean_workspace_bytes(p), v7_workspace_bytes(p)});
}

bool v9_in_best(const Call& c) { return v7_in_range(c) && tc_pick_bv(c.p) == 64; }

void v9_launch(Call c) {
  if (!v7_in_range(c)) return v7_launch(c);
  const int KP = tc_pick_kp(c.p.K);
  v7_intra_lean_launch(c, KP);  // honours LINATTN_TC_ONLY as rung 7's intra launch does
  tc_state_lean_launch(c, KP);
}

}  // namespace linattn::cuda::detail
