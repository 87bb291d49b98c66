// optimized/cuda/bwd_v7_rowbase.cu -- rung 7 of the CUDA backward ladder: rung 6 (bwd_v6_tc_b9.cu) with
// the chunk-gradient kernel's global addresses formed as per-block bases and 32-bit offsets (issue 6).
// Written in session 6; run on the H200 in session 7 (calls 1-3: every backward test, rung 6's
// gradients bit for bit, sanitizers, determinism, mutants 69-72): `best` since then, 1.10-1.15x faster
// than rung 6 (DeltaNet 9.67 ms against 11.15 at B=8 T=4096 H=16 K=V=128; RESULTS.md "Rung 7, measured").
//
// What changes: only addresses. The grads kernel is bwd_grads_tc<Tg, V7Mid> (bwd_v4_tc_tail.cu; V7Mid
// = V6Mid with Mid::kRowBase). Every [rows, W] array the kernel reads or writes by row (q, k, v, do, the
// gates b, w, beta; the workspace's A, v_new, dv_new, E, Qg, Kd, G, dQg, dKd, dw_aux, dE, de^L, dq^P,
// dk^{L,P}, du0; the outputs dq, dk, dv, db, dw, dg, dbeta) is addressed as
//   a[row(i) * W + d] = (a + (tok0 H + h) W)[i * (H W) + d]
// (bwd_common.cuh's RowBase): a 64-bit per-block base and a 32-bit offset per item instead of rungs
// 2-6's 64-bit int64(tok0 + i) * H + h, times W, plus d per item. Applied where ncu found the time:
// the batched stagings of bwd_grads_tc (A; the slab's do, v_new, dv_new, w, v; E), its stores of
// dQg, dKd, dw_aux, du0, dE, V4Mid's B9 k / q staging and de^L, dq^P, dk^{L,P} stores (run_impl<.., kRB>),
// b9_levels' k / q / gate / G staging and outputs (bwd_v6_tc_b9.cuh, kRowBase), the tail's B10 (a),
// dv pass, (b) and (c). The same values and the same floating-point operations in the same order,
// so the same gradients as rung 6, bit for bit (test_cuda_backward: "CUDA v7 chunked backward gives
// rung 6 gradients bit for bit"). Prepare, states and dstates are rung 6's (bwd_v3_front with the
// levels intra kernel).
//
// Why (measured, session 6 call 4, ncu on the H200; bench/logs_session6/call4/ncu): the grads kernel
// is about three quarters of rung 6's backward (8.7 of 11.2 ms for DeltaNet at B=8 T=4096 H=16
// K=V=128), runs one block of 8 warps per SM at IPC 1.0 with the issue slots 22-25% busy, and about
// 62% of its 1.97 G (DN) / 2.88 G (KDA) executed warp instructions are integer and address arithmetic
// (IMAD alone 27-30%, LDC of kernel parameters inside loops); the SASS of the hottest staging windows
// spends 10-15 instructions per loaded item on the 64-bit row index.
//
// How: RowBase::base(a, W) forms a + (tok0 H + h) W once and passes it through an empty asm (so nvcc
// cannot fold it back into a 64-bit index per item) with __builtin_assume(__isGlobal(b)) (so the
// loads and stores stay ld.global / st.global: without it they became generic LD / ST). An item's
// address is then one IMAD.WIDE.U32 of its 32-bit offset onto the base.
//
// Static counts (nvcc 13.0 sm_90a, nvdisasm 13.5; session 6, no GPU; RESULTS.md "Rung 7" has the
// commands): bwd_grads_tc<float, V7Mid> against <float, V6Mid>: 8,952 SASS instructions against
// 10,528 (-15%); integer / address class 4,574 against 6,131, IMAD 1,740 against 2,419, LDC 134
// against 297; every floating-point, memory and barrier opcode count equal (FFMA 418, HMMA 768,
// MUFU 52, LDG 376, STG 225, LDS 219, STS 449, BAR 17, ...). Loop bodies: bwd_grads_tc's slab
// staging (4 items) 439 against 787, tail (a) (4 items) 601 against 814, dv pass (8 items) 531
// against 739, V4Mid's B9 k / q staging (8 items) 124 against 373, b9_levels' staging (4 items)
// 147 against 227. Executed per warp at K = V = 128, Lc = 64 (bodies times trips, run-time branches
// counted whole; the same estimate of rung 6 is 20% / 53% above ncu's 30.1k / 43.9k): DeltaNet
// 36.1k -> 25.7k (-10.4k), KDA 67.0k -> 56.3k (-10.7k), about 83k fewer warp instructions per block.
// ptxas: 255 registers (V6Mid 254), no spill, no stack; rungs 2-6 keep their PTX (ptx_identity).
// After the lead's review (RowBase::base_opt: an operator's null arrays -- b, w, db, dw, dg, dbeta,
// G -- take q's pointer before the __isGlobal assumption, which would otherwise be made of a pointer
// formed from null): 8,984 instructions for Tg = float (+32), LDG 376, STG 225, 255 registers.
// Time: NOT measured. The kernel is latency-bound (issue slots 22-25% busy), so fewer instructions
// shorten the address chains in front of each batch of loads rather than the issue time; a guess
// of 0.5-1.5 ms of DeltaNet's 8.7 ms grads kernel, to be measured (bench_backward.py 6,7).
//
// Range: the offset i * (H W) + d < 64 H W + 63 fits in 32 bits when H * max(K, V, 64) < 2^25; calls
// outside that run rung 6 (bwd_v6_launch), and calls outside rung 3's range (float32 inputs, K < 16
// or K > 128) run rung 2 through bwd_v3_launch, as every rung from 3 on. Workspace: rung 3's.
// Requires log-decays <= 0, as rung 6 (the host API checks; the device API does not).
#include <algorithm>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v7_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v7_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);  // outside the range: rung 2 (via rung 3)
  // RowBase's 32-bit offsets (bwd_common.cuh, in_rowbase_range); else rung 6.
  if (!bwdc::in_rowbase_range(p)) return bwd_v6_launch(c);
  bwdc::Profile prof(c.stream, "bwd_v7");
  bwdc::bwd_v3_front(c, prof, /*levels_intra=*/true);  // rung 5's and 6's front
  if (p.num_chunks > 0) bwdc::bwd_v7_grads(c, prof);
}

}  // namespace linattn::cuda::detail
