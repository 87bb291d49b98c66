// optimized/cuda/v4_levels.cu -- rung 4 of the CUDA ladder: v3 with the per-channel-gate (KDA, GDN2)
// L and P of each chunk computed entirely on tensor cores, by a binary hierarchy of reference rows.
//
// What v3 left (H200, bf16, B=8 T=4096 H=16 K=V=128): its intra-chunk kernel takes 2.03 / 2.19 ms
// for KDA / GDN2 against 0.55 / 0.59 ms for DeltaNet / GDN, because the four 16 x 16 diagonal
// blocks of L and P are computed entry by entry: 4 x 136 pairs x K channels, one exp2 per pair and
// channel, each pair reading six shared-memory rows (most of them at a 512-byte stride: bank
// conflicts).
//
// v4 (SPEC section 4, step 1 and step 3's intra-chunk read: L_ij = sum_d e_id k_jd exp(G_id - G_jd),
// P_ij = scale sum_d q_id k_jd exp(G_id - G_jd); the paper's recurrences are Eqs.18-24) splits every
// pair i > j of the 64-token chunk by the highest bit s in which i and j differ (s = 32, 16, 8, 4,
// 2, 1): then j < m <= i for the reference row m = i with its bits below s cleared, and
//     exp(G_i - G_j) = exp(G_i - G_m) . exp(G_m - G_j),  both factors <= 1 (log-decays <= 0),
// so nothing overflows, even for log-decays of -1000. At level s every row r of the chunk is
// either a left row (bit s of r set: it meets columns j < m = r & ~(s - 1)) or a right row (bit s
// clear: m = (r & ~(2s - 1)) + s), never both, so ONE 64-row tile per level holds all factored
// operands: left rows e_r exp(G_r - G_m) (e = k, or b . k for GDN2) and q_r exp(G_r - G_m) in a
// second tile, right rows k_r exp(G_m - G_r). One 16 x 16 x K product per useful 16 x 16 output
// block then gives L and P for every pair of that level (entries of other levels are discarded):
// level 32: 4 blocks, 16: 2, 8, 4, 2, 1: the 4 diagonal 16 x 16 blocks each. P's diagonal (i = j)
// is q_i . k_i from the unscaled tiles. 64 exp2 per channel and level instead of one per pair.
// Levels go two at a time (tiles sE, sX and sKt, sAh/sAl), 3 rounds of build + products.
// Numerics: like v3's off-diagonal blocks, the factored operands are rounded to bf16 before the
// float32-accumulated products (v3 kept the diagonal blocks in float32 from the bf16 inputs).
// Scalar gates and every later phase (A = (I + L)^-1, w_aux, u, the state kernel) are v3's: the
// kernel is tc_common.cuh's tci::intra with this file's policy V4Levels.
//
// Measured (H200, bf16, float32 gates; RESULTS.md "Rung 4", run F1), B=8 T=4096 H=16 K=V=128:
// KDA / GDN2 2.101 / 2.144 ms (v3 2.472 / 2.643, fla 1.821 / 2.029); the intra kernel alone
// 1.643 / 1.683 ms (v3 2.03 / 2.19). B=1 T=32768: 2.766 / 2.808 ms (v3 3.133 / 3.310, fla 2.524 /
// 2.735). DeltaNet and GDN run v3's code: 1.014 / 1.047 ms and 1.679 / 1.713 ms. Accuracy against
// v1 (float32 arithmetic on the same bf16 inputs), o / state relative RMS: 3.8e-3 / 2.2e-3 to 2.3e-3
// for KDA and GDN2 (v3 3.4e-3 / 2.2e-3 to 2.3e-3, fla 3.9e-3 / 2.8e-3). Still slower than fla for KDA and GDN2: the
// per-channel intra kernel takes 1.64 ms against 0.59 ms for GDN's; a trial with a 110 KB layout
// (two blocks per SM for KDA) gave the same 1.67 ms (RESULTS.md).
// Version::best for bf16 inputs with 16 <= K <= 128 since run F1 (all tests passed, 900 assertions
// in 17 test cases; memcheck and racecheck clean; mutants 31-37 caught); session 5 call 1 ran every
// later test too (1601 assertions in 21 test cases), call 2 the 30-case properties.
//
// Revision 2 (session 5, after the static SASS analysis in RESULTS.md): the operand build gives each
// thread one row and channels c0..c0+3, c0+KP/2..+3 for BOTH levels of a round (k, q, b and G_r read
// once per round instead of once per level), reads gates as contiguous float4 spans (no 2-way bank
// conflict), picks tiles by `set ? a : b` (the pointer arrays had put them in local memory and made
// the stores generic), uses one MUFU.EX2 per factor (ex2.approx.ftz; exp2f issued four instructions)
// and leaves right rows of the q tile unwritten (never read into a kept entry). Static count for
// KDA at KP = 128: 182 SASS instructions per (row, 8 channels, 2 levels) against 177 per (row, 8
// channels, 1 level) before; stack 48 -> 0 bytes, registers 64 -> 99 (still one block per SM, by
// shared memory). Measured side by side with the code before (session 5 call 6, B=8 T=4096): KDA
// intra kernel 1.665 -> 1.447 ms, forward 2.131 -> 1.912 (fla 1.811); GDN2 2.168 -> 1.936 (fla 2.015).
//
// Revision 3 (session 5): phase 4's off-diagonal 16 x 16 blocks of A = (I + L)^-1 on tensor cores
// (tc_common.cuh, `tc_inverse`, for every operator of this rung; v3 keeps its float32 CUDA-core loop,
// PTX unchanged): per level, one warp per (block, 8 columns) does T = sum_M L_IM A_MJ and A_IJ =
// -A_II T as three bf16 products of hi + lo splits (about 2^-16 relative; A is split hi + lo for
// its uses anyway). Side by side with revision 2 (call 7; fla in the same run), B=8 T=4096 ms:
// DeltaNet 1.020 -> 0.919 (fla 1.009), GDN 1.053 -> 0.953 (0.898), KDA 1.900 -> 1.734 (1.815),
// GDN2 1.923 -> 1.745 (2.026); B=1 T=32768: 1.680 -> 1.577 (1.667), 1.710 -> 1.611 (1.466),
// 2.535 -> 2.367 (2.521), 2.554 -> 2.378 (2.726). Accuracy against fla unchanged. RESULTS.md,
// "Rung 4 revisions 2 and 3".
#include <string>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {
namespace {

struct V4Levels {
  static constexpr int kt_rows = 64;  // sKt holds the second level's operand tile
  static constexpr bool tc_inverse = true;  // phase 4's off-diagonal blocks of A on tensor cores

  /// L and P of one chunk for per-channel gates (KDA, GDN2), Eq. above; sL, sP zero on entry.
  template <int KP, bool GDN2>
  __device__ static void lp(const tci::Tiles& t, float scale, const KParams& p) {
    using namespace tci;
    (void)p;  // the mutants (bench/make_mutants.py) read p.mutant
    constexpr int LDK = ldk(KP), G8 = KP / 8;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
    // Operand tiles of the two levels of a round: set 0 in sE (k side) and sX (q side), set 1 in
    // sKt and sAh. Chosen by `set ? ... : ...` (not an array indexed by set: that put the pointers
    // in local memory and turned the tile stores into generic ones; RESULTS.md, static analysis).
    // The second q tile runs from sAh on through sAl: they are adjacent and together hold it.
    using S = Smem<KP, true, GDN2, kt_rows>;
    static_assert(S::sAl == S::sAh + 64 * 72 * 2 && 2 * 64 * 72 * 2 >= 64 * LDK * 2,
                  "sAh and sAl must be adjacent and hold a 64 x LDK bf16 tile");
#pragma unroll 1
    for (int round = 0; round < 3; ++round) {
      // Build the operand tiles of levels s0 = 32 >> 2 round (set 0) and s0 / 2 (set 1). A thread
      // owns one row r and channels c0..c0+3 and c1 = c0 + KP/2..c1+3 for both levels, so k, q, b
      // and G_r are read once per round; consecutive lanes take consecutive 4-channel groups, so a
      // warp's gate reads are contiguous (4 wavefronts per 512 bytes, no bank conflict).
      const int s0 = 32 >> (2 * round);
      for (int idx = tid; idx < 64 * G8; idx += kThreads) {
        const int r = idx / G8, c0 = (idx % G8) * 4, c1 = c0 + KP / 2;
        float kv[8], gr[8], qv[8] = {}, ek[8] = {};
        ld4x2_bf16(t.sK + r * LDK, c0, c1, kv);
        ld4x2_f32(t.sG + r * KP, c0, c1, gr);
        const bool any_left = (r & (s0 | (s0 >> 1))) != 0;
        if (any_left) {
          ld4x2_bf16(t.sQ + r * LDK, c0, c1, qv);
          if (GDN2) {
            ld4x2_f32(t.sB + r * KP, c0, c1, ek);
#pragma unroll
            for (int e = 0; e < 8; ++e) ek[e] *= kv[e];
          }
        }
#pragma unroll
        for (int set = 0; set < 2; ++set) {
          const int s = s0 >> set;
          const bool left = (r & s) != 0;
          const int m = left ? (r & ~(s - 1)) : ((r & ~(2 * s - 1)) + s);
          float gm[8], fk[8], fq[8];
          ld4x2_f32(t.sG + m * KP, c0, c1, gm);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            // left rows: e_r exp(G_r - G_m), q_r exp(G_r - G_m); right rows: k_r exp(G_m - G_r)
            const float f = ex2_ftz(left ? gr[e] - gm[e] : gm[e] - gr[e]);
            fk[e] = (left && GDN2 ? ek[e] : kv[e]) * f;
            fq[e] = qv[e] * f;
          }
          st4x2_bf16(set ? t.sKt + r * LDK : t.sE + r * LDK, c0, c1, fk);
          // Right rows of the q tile stay unwritten: row i of a product depends on row i of its
          // left operand only, and the products keep only left rows' entries (i & s).
          if (left) st4x2_bf16(set ? t.sAh + r * LDK : t.sX + r * LDK, c0, c1, fq);
        }
      }
      __syncthreads();
      // Products: tasks (level, 16-row block mi, 16 columns from n0). Round 0: level 32 (rows 32-63
      // x columns 0-31, 4 tasks), level 16 (rows 16-31 x 0-15 and 48-63 x 32-47); rounds 1, 2:
      // the two levels on the four diagonal blocks; round 2 also P's diagonal (unscaled q, k).
      const int ntask = round == 0 ? 6 : (round == 1 ? 8 : 12);
      for (int task = warp; task < ntask; task += 8) {
        int set, mi, n0;
        if (round == 0) {
          set = task < 4 ? 0 : 1;
          mi = task < 4 ? 2 + (task >> 1) : (task == 4 ? 1 : 3);
          n0 = task < 4 ? 16 * (task & 1) : (task == 4 ? 0 : 32);
        } else {
          set = task >> 2, mi = task & 3, n0 = 16 * mi;
        }
        const bool diag = set == 2;
        const int s = diag ? 0 : (32 >> (2 * round)) >> set;
        const bf16* Ak = diag ? t.sK : (set ? t.sKt : t.sE);
        const bf16* Aq = diag ? t.sQ : (set ? t.sAh : t.sX);
        const bf16* Bk = Ak;
        float accL[2][4] = {}, accP[2][4] = {};
#pragma unroll
        for (int k0 = 0; k0 < KP; k0 += 16) {
          unsigned ak[4], aq[4], b[4];
          load_a(aq, Aq, LDK, 16 * mi, k0);
          load_b_nk(b, Bk, LDK, n0, k0);
          mma_bf16(accP[0], aq, b[0], b[1]);
          mma_bf16(accP[1], aq, b[2], b[3]);
          if (!diag) {
            load_a(ak, Ak, LDK, 16 * mi, k0);
            mma_bf16(accL[0], ak, b[0], b[1]);
            mma_bf16(accL[1], ak, b[2], b[3]);
          }
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = 16 * mi + g8 + (e >> 1) * 8, j = n0 + 8 * nt + 2 * t4 + (e & 1), x = i ^ j;
            if (diag) {
              if (x == 0) t.sP[i * 72 + j] = __float2bfloat16(scale * accP[nt][e]);
            } else if (x >= s && x < 2 * s && (i & s)) {  // (i, j) belongs to level s
              t.sL[i * 65 + j] = GDN2 ? accL[nt][e] : t.sBeta[i] * accL[nt][e];
              t.sP[i * 72 + j] = __float2bfloat16(scale * accP[nt][e]);
            }
          }
      }
      if (round < 2) __syncthreads();  // the next round overwrites the operand tiles
    }
  }
};

template <int KP>
void launch_kp(const Call& c) {
  if (!skip_kernel("intra")) tci::launch<V4Levels, KP>(c);
  tc_state_launch(c, KP);
}

}  // namespace

bool v4_supports(const Call& c, std::string* why) { return v2_supports(c, why); }
std::size_t v4_workspace_bytes(const KParams& p) { return tc_workspace_bytes(p); }
void v4_launch(Call c) {
  if (tc_pick_kp(c.p.K) == 64) return launch_kp<64>(c);
  return launch_kp<128>(c);
}
void v4_intra_launch_with_A(const Call& c, float* a_out) {
  if (tc_pick_kp(c.p.K) == 64) return tci::launch<V4Levels, 64>(c, a_out);
  return tci::launch<V4Levels, 128>(c, a_out);
}
void v4_intra_launch(const Call& c, int KP) {
  if (skip_kernel("intra")) return;
  if (KP == 64) return tci::launch<V4Levels, 64>(c);
  tci::launch<V4Levels, 128>(c);
}

}  // namespace linattn::cuda::detail
