// optimized/cuda/route.hpp -- which split route the last CUDA backward took on this thread: a hook for tests and
// benchmarks that must know whether a rung ran its own kernels or fell back to a lower rung (review20: without it,
// a rung that silently fell back would pass its own bit-for-bit test against the rung it fell back to).
#pragma once

namespace linattn::cuda {

/// The name that the last backward_device call on this thread passed to the split launcher (bwdc::bwd_split_launch,
/// bwd_v10_split.cu: "bwd_v10" ... "bwd_v22", "bwd_v22_kq8", "bwd_v23", "bwd_v23_kq8", "bwd_v24", "bwd_v24_kq8", "bwd_v25_g1a", "bwd_v26_wya", "bwd_v27_dvp", "bwd_v28_sbf", "bwd_v29_b1h", "bwd_v30_dsw", "bwd_v31_dkh", "bwd_v32_g1s" and "bwd_v33_g2s", the rung whose G1 / G2 kernels ran), or "" if that call ran no split
/// kernels (KDA, GDN2, rungs below 10, calls outside the split kernels' range, no chunks to launch).
const char* last_backward_split_route();

/// The block order and value columns per block of the last backward_device call's dstates kernel (bwd3_dstates,
/// bwd_v3_async.cu) on this thread: "value-first/BV" (grid (value tiles, sequences, heads): LINATTN_BWD3_VFIRST=1,
/// session 22's trial), "sequence-first/BV" (grid (sequences, heads, value tiles): the default), BV = 32, 64 or 128
/// (LINATTN_BWD3_BV=128, or rung 24's pick by dstates_wide_pick), or "" if that call launched no
/// dstates kernel (rungs 1-2, calls outside rung 3's range, no chunks). A hook for the tests of the knobs and of rung
/// 24: every order and width gives the same bits, so only this shows which one ran.
const char* last_dstates_grid();

/// Rung 24's value columns per block of the dstates kernel at key width 128 (bwd_v24_dswide.cu; defined at the end of
/// bwd_v3_async.cu with the measurements behind it): for nh = N H (sequence, head) pairs of V value columns on a
/// device of `sms` SMs, the width w of 128, 64 and 32 (ties to the wider) with the least
/// ceil(nh ceil(V / w) / sms) x cost(w), cost = 2.6, 1.52, 1: the waves of one-block-per-SM blocks times a block's
/// time relative to one of 32 columns. A pure host function, so that the tests can check it without a GPU.
int dstates_wide_pick(long nh, int V, int sms);

namespace detail {
/// Set by backward_device ("" at its start) and by the split launcher (its rung's name, once it launches).
void set_backward_split_route(const char* name);
/// Set by backward_device ("" at its start) and by the dstates launcher (launch_dstates, bwd_v3_async.cu).
void set_dstates_grid(const char* name);
}  // namespace detail

}  // namespace linattn::cuda
