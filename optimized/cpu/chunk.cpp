// optimized/cpu/chunk.cpp -- the chunked forward pipeline of chunk.hpp, stage by stage.
//
// One general per-channel pipeline serves DeltaNet, GDN, KDA and GDN2 (SPEC section 4). The
// operators differ in exactly three places, each marked "OPERATOR-SPECIFIC" below:
//   row vector    e_i  = beta_i k_i (DeltaNet, GDN, KDA)  |  b_i (.) k_i (GDN2)
//   write target  u0_i = beta_i v_i (DeltaNet, GDN, KDA)  |  w_i (.) v_i (GDN2)
//   decay         scalar per token (GDN; DeltaNet = GDN with g = 0)  |  per key channel (KDA, GDN2)
// Per (sequence, head), per chunk of n <= C tokens, in the S layout (state K x V, o = S^T q):
//   0. gather q (scaled), k, v and the gates of the chunk into zero-padded C-row buffers
//   1. G_i = sum_{t <= i} g_t, the cumulative log-decay from the chunk start (reset per chunk);
//      the decays exp(G_i - G_j) below are formed without subtracting two G's (see Numerics)
//   2. e_i, u0_i (operator-specific)
//   3. L_ij = sum_d e_id k_jd exp(G_id - G_jd) (i > j) and the causal scores
//      P_ij = q_i . (k_j (.) exp(G_i - G_j)) (i >= j)
//   4. A = (I + L)^-1 by forward substitution (the UT transform)
//   5. w_aux = A (e (.) exp(G)),  u = A u0
//   6. v_new = u - w_aux S;  o = (q (.) exp(G)) S + P v_new;
//      S' = Diag(exp(G_n)) S + (k (.) exp(G_n - G))^T v_new
// Why this is the recurrence: the vector each token writes along k_i, v_new_i = u0_i -
// e_i^T Diag(exp G_i) S_prev(i), satisfies (I + L) v_new = u0 - (e (.) exp G) S (substitute the
// recurrence for S_prev(i) inside the chunk), so v_new = A u0 - A (e (.) exp G) S.
//
// Numerics (SPEC section 4): every exponent is <= 0; masks are selects applied before use;
// everything is in the input's precision (float: float32 state and gate sums). Beyond the SPEC's
// rule, no decay is computed as exp(G_i - G_j) from two cumulative sums: after a very negative g
// (say -1000) both sums are large and their difference keeps few digits (in float, -1000.7 -
// -1000.2 has ~4 correct digits; the float output error was 1e-4 with such gates). Each decay
// is instead the exponential of a direct sum of the g's in between, or a running product of
// alpha_t = exp(g_t) <= 1, accurate to a few ulp (float error now ~1e-7 for every gate mode).
//   scalar decay: exp(g_{j+1} + ... + g_i) for the C x C mask, exp(g_0 + ... + g_i) = exp(G_i),
//     exp(g_{i+1} + ... + g_last) = exp(G_last - G_i);
//   per-channel decay (KDA, GDN2): L and P are sums of C^2 K decayed products, computed in
//     sub-blocks of 16 rows: for i in block I and j in an earlier block J,
//     exp(G_i - G_j) = X_i M_IJ Y_j, X_i = alpha_{I0} ... alpha_i (block start to i),
//     M_IJ = exp(the g's of the blocks strictly between), Y_j = alpha_{j+1} ... alpha_{J_last},
//     three factors <= 1, so the block is a matrix product of decay-scaled operands; inside a
//     diagonal block the factor is the running product alpha_{j+1} ... alpha_i.
#include "optimized/cpu/chunk.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "optimized/cpu/dispatch.hpp"
#include "optimized/cpu/jobs.hpp"
#include "optimized/cpu/simd.hpp"
#include "optimized/cpu/small_gemm.hpp"

namespace linattn::cpu {
namespace {

using kern::Acc;
using kern::Tri;
using detail::Decay;
using detail::ld;
using detail::st;
using detail::l2_normalize_row;
using detail::HeadJob;
using detail::make_jobs;
using detail::make_outputs;
using ref::Op;
using simd::PAD;
using simd::vec;

/// Sub-block size for per-channel decays.
constexpr index_t SUB = 16;
/// Column panel of the state in stage 6: 256 bytes (64 floats, 32 doubles), K x PW in L1.
template <class T>
constexpr index_t PANEL = 256 / sizeof(T);

/// The chunked kernel treats DeltaNet as a scalar decay with g = 0.
Decay chunk_decay(Op op) {
  return detail::decay_of(op) == Decay::channel ? Decay::channel : Decay::scalar;
}

/// Scratch buffers of one thread (row-major, rows padded to Kp / Vp / Kp + Vp columns).
template <class T>
struct Workspace {
  index_t C = 0, Kp = 0, Vp = 0;
  std::vector<T> q, k, v, g, e, rhs, wu, L, P, Lk, A, o, vbar, S;  // every operator
  std::vector<T> qg, kg, kT, kdT, G, Gs, seg;                      // decay-scaled operands, sums
  std::vector<T> ex, qx, kx, alpha, bsum, bm, tmp;                 // per-channel sub-blocks
  void resize(index_t C_, index_t K, index_t V) {
    C = C_, Kp = simd::round_up(K, PAD), Vp = simd::round_up(V, PAD);
    auto sz = [](std::vector<T>& x, index_t n) { x.assign(static_cast<size_t>(n), T(0)); };
    for (auto* x : {&q, &k, &g, &e, &qg, &kg, &G, &Gs, &ex, &qx, &kx, &alpha}) sz(*x, C * Kp);
    for (auto* x : {&v, &o, &vbar}) sz(*x, C * Vp);
    sz(rhs, C * (Kp + Vp)), sz(wu, C * (Kp + Vp));
    for (auto* x : {&L, &P, &Lk, &A}) sz(*x, C * C);
    sz(kT, Kp * C), sz(kdT, Kp * C), sz(seg, C), sz(bm, Kp * SUB);
    sz(bsum, 3 * (C / SUB + 1) * Kp), sz(tmp, 4 * Kp + C);
    sz(S, Kp * Vp);
  }
};

// ------------------------------------------------------------------------------------------------
// The stages. Each works on the chunk held in the workspace: C rows, of which the first n are
// tokens c0 .. c0 + n - 1 of the job and the rest zero. Zero rows change nothing: their k, e, u0
// are 0 and their g is 0 (no decay), so they add nothing to L, v_new or S'; their o is not copied out.
// ------------------------------------------------------------------------------------------------

/// Stage 0: q (l2-normalised if asked, times scale), k, v and the log-decays g of the chunk.
template <class T, int W, Decay D>
LINATTN_INLINE void gather(const HeadJob<T>& j, Workspace<T>& ws, index_t c0, index_t n) {
  const index_t K = j.K, V = j.V, Kp = ws.Kp, Vp = ws.Vp;
  for (index_t i = 0; i < ws.C; ++i) {
    const bool in = i < n;
    const index_t t = c0 + i;
    T *qi = ws.q.data() + i * Kp, *ki = ws.k.data() + i * Kp;
    simd::copy_row<T, W>(in ? j.q + t * j.ld_k : nullptr, K, Kp, qi);
    simd::copy_row<T, W>(in ? j.k + t * j.ld_k : nullptr, K, Kp, ki);
    simd::copy_row<T, W>(in ? j.v + t * j.ld_v : nullptr, V, Vp, ws.v.data() + i * Vp);
    if (in && j.l2norm) l2_normalize_row(qi, K), l2_normalize_row(ki, K);
    for (index_t d = 0; d < Kp; ++d) qi[d] *= j.scale;
    if constexpr (D == Decay::channel)
      simd::copy_row<T, W>(in ? j.g + t * j.ld_g : nullptr, K, Kp, ws.g.data() + i * Kp);
    else
      ws.g[i] = (in && j.g) ? j.g[t * j.ld_g] : T(0);
  }
}

/// Stage 1: the cumulative log-decays G_i = g_0 + ... + g_i (reset at each chunk), and
/// Gs_i = g_{i+1} + ... + g_{C-1} (so G_last - G_i = Gs_i). Both are running sums of values <= 0,
/// accurate to a few ulp; the decays are exponentials of such sums, never of a difference
/// G_i - G_j of two large sums (that would cancel: G = -1000.2 - (-1000.1) keeps 4 digits in float).
/// Scalar decays (one value per row) only; the per-channel sums are built by block in stage 3.
template <class T>
LINATTN_INLINE void decay_sums_scalar(Workspace<T>& ws) {
  const index_t C = ws.C;
  T acc = 0;
  for (index_t i = 0; i < C; ++i) ws.G[i] = acc += ws.g[i];
  acc = 0;
  for (index_t i = C - 1; i >= 0; --i) ws.Gs[i] = acc, acc += ws.g[i];
}

/// Stage 2 (OPERATOR-SPECIFIC): the row vectors e_i and the write targets u0_i (into rhs[:, Kp:]).
template <class T>
LINATTN_INLINE void make_e_u0(const HeadJob<T>& j, Workspace<T>& ws, index_t c0, index_t n) {
  const index_t K = j.K, V = j.V, Kp = ws.Kp, Vp = ws.Vp, KV = Kp + Vp;
  for (index_t i = 0; i < ws.C; ++i) {
    const index_t t = c0 + i;
    T* ei = ws.e.data() + i * Kp;
    T* u0i = ws.rhs.data() + i * KV + Kp;
    const T *ki = ws.k.data() + i * Kp, *vi = ws.v.data() + i * Vp;
    if (i >= n) {
      std::fill(ei, ei + Kp, T(0)), std::fill(u0i, u0i + Vp, T(0));
    } else if (j.op == Op::gdn2) {  // GDN2: e = b (.) k, u0 = w (.) v
      const T *bt = j.b + t * j.ld_k, *wt = j.w + t * j.ld_v;
      for (index_t d = 0; d < K; ++d) ei[d] = bt[d] * ki[d];
      for (index_t c = 0; c < V; ++c) u0i[c] = wt[c] * vi[c];
      std::fill(ei + K, ei + Kp, T(0)), std::fill(u0i + V, u0i + Vp, T(0));
    } else {  // DeltaNet, GDN, KDA: e = beta k, u0 = beta v
      const T bt = j.beta[t * j.ld_beta];
      for (index_t d = 0; d < Kp; ++d) ei[d] = bt * ki[d];
      for (index_t c = 0; c < Vp; ++c) u0i[c] = bt * vi[c];
    }
  }
}

/// Stage 3, scalar decay (DeltaNet, GDN): with Gamma_ij = exp(g_{j+1} + ... + g_i) for j <= i,
///   L = tril_strict(e k^T) (.) Gamma,  P = tril(q k^T) (.) Gamma,  Lk = tril_strict(k k^T) (.) Gamma
/// (products first, on the lower tiles only; then the mask, a select, then the decay). Also the
/// decay-scaled operands of stages 5-6: rhs[:, :Kp] = e (.) exp(G), qg = q (.) exp(G),
/// kg = k (.) exp(G), kdT = (k (.) exp(G_last - G))^T; returns exp(G_last) in gl[0..Kp).
template <class T, int W>
LINATTN_INLINE void intra_scalar(Workspace<T>& ws, index_t K, bool trace, T* gl) {
  using Vt = vec<T, W>;
  const index_t C = ws.C, Kp = ws.Kp, KV = Kp + ws.Vp;
  T *L = ws.L.data(), *P = ws.P.data(), *Lk = ws.Lk.data(), *kT = ws.kT.data(), *seg = ws.seg.data();
  const T *k = ws.k.data(), *q = ws.q.data(), *e = ws.e.data(), *g = ws.g.data();
  simd::transpose<T, W>(k, Kp, C, Kp, kT, C);
  kern::gemm<T, W>(C, C, K, e, Kp, 1, kT, C, L, C, Acc::store, Tri::lower_c);
  kern::gemm<T, W>(C, C, K, q, Kp, 1, kT, C, P, C, Acc::store, Tri::lower_c);
  if (trace) kern::gemm<T, W>(C, C, K, k, Kp, 1, kT, C, Lk, C, Acc::store, Tri::lower_c);
  T* colidx = ws.tmp.data() + 4 * Kp;  // 0, 1, ..., C - 1 (the column index, as T)
  for (index_t c = 0; c < C; ++c) colidx[c] = T(c);
  for (index_t i = 0; i < C; ++i) {
    // seg[j] = g_{j+1} + ... + g_i for j <= i (a direct sum), 0 above the diagonal
    T acc = 0;
    for (index_t c = i; c >= 0; --c) seg[c] = acc, acc += g[c];
    for (index_t c = i + 1; c < C; ++c) seg[c] = 0;
    const Vt row = simd::splat<T, W>(T(i));
    for (index_t c = 0; c < C; c += W) {
      const Vt col = ld<T, W>(colidx + c);
      const auto below = col < row, on_or_below = col <= row;
      const Vt decay = simd::vexp<T, W>(ld<T, W>(seg + c));
      st<T, W>(L + i * C + c, below ? ld<T, W>(L + i * C + c) * decay : Vt{});
      st<T, W>(P + i * C + c, on_or_below ? ld<T, W>(P + i * C + c) * decay : Vt{});
      if (trace) st<T, W>(Lk + i * C + c, below ? ld<T, W>(Lk + i * C + c) * decay : Vt{});
    }
  }
  std::fill(gl, gl + Kp, std::exp(ws.G[C - 1]));
  T *eg = seg, *egl = colidx;  // exp(G_i), exp(G_last - G_i) = exp(Gs_i), per row i
  for (index_t i = 0; i < C; ++i) eg[i] = std::exp(ws.G[i]), egl[i] = std::exp(ws.Gs[i]);
  for (index_t i = 0; i < C; ++i) {
    const Vt f = simd::splat<T, W>(eg[i]);
    for (index_t d = 0; d < Kp; d += W) {
      st<T, W>(ws.rhs.data() + i * KV + d, ld<T, W>(e + i * Kp + d) * f);
      st<T, W>(ws.qg.data() + i * Kp + d, ld<T, W>(q + i * Kp + d) * f);
      st<T, W>(ws.kg.data() + i * Kp + d, ld<T, W>(k + i * Kp + d) * f);
    }
  }
  for (index_t d = 0; d < Kp; ++d)  // kdT = k^T with column j scaled by exp(G_last - G_j)
    for (index_t c = 0; c < C; c += W)
      st<T, W>(ws.kdT.data() + d * C + c, ld<T, W>(kT + d * C + c) * ld<T, W>(egl + c));
}

/// Stage 3, per-channel decay (KDA, GDN2): L_ij = sum_d e_id k_jd exp(g_{j+1,d} + ... + g_{i,d})
/// (and P with q, inclusive; Lk with k) in sub-blocks of SUB rows. With alpha_t = exp(g_t) <= 1
/// per channel, for i in block I and j in an earlier block J the decay factors into
///   X_i = alpha_{I0} ... alpha_i                (block I's start to i, a running product)
///   M_IJ = exp(sum of g over the blocks strictly between J and I)
///   Y_j = alpha_{j+1} ... alpha_{J_last}        (j to block J's end, a running product)
/// all <= 1, so that block is (e (.) X)_I Diag(M_IJ) ((k (.) Y)_J)^T, a matrix product. Inside a
/// diagonal block the factor is the exact product exp(G_i - G_j) = alpha_{j+1} ... alpha_i.
/// (No exponential of a difference of sums is ever formed: such differences cancel.)
/// Also the decay-scaled operands of stages 5-6 (as intra_scalar), from the same factors:
/// exp(G_i) = X_i exp(sum over blocks before I), exp(G_last - G_j) = Y_j exp(sum over blocks after J).
template <class T, int W>
LINATTN_INLINE void intra_channel(Workspace<T>& ws, index_t K, bool trace, T* gl) {
  using Vt = vec<T, W>;
  const index_t C = ws.C, Kp = ws.Kp, KV = Kp + ws.Vp, nb = C / SUB;
  T *L = ws.L.data(), *P = ws.P.data(), *Lk = ws.Lk.data(), *kT = ws.kT.data();
  T *ex = ws.ex.data(), *qx = ws.qx.data(), *kx = ws.kx.data(), *alpha = ws.alpha.data();
  T* ky = ws.kg.data();  // k (.) Y, row-major (kg is filled later)
  const T *k = ws.k.data(), *q = ws.q.data(), *e = ws.e.data(), *g = ws.g.data();
  // bsum rows: tot[I] = sum of g over block I; before[I] = sum over blocks < I; after[I] = > I
  T *tot = ws.bsum.data(), *before = tot + nb * Kp, *after = before + nb * Kp;
  T *dec = ws.tmp.data(), *mid = dec + Kp;
  for (index_t i = 0; i < C; ++i)
    for (index_t d = 0; d < Kp; d += W)
      st<T, W>(alpha + i * Kp + d, simd::vexp<T, W>(ld<T, W>(g + i * Kp + d)));
  for (index_t I = 0; I < nb; ++I) {
    const index_t i0 = I * SUB, last = i0 + SUB - 1;
    for (index_t d = 0; d < Kp; d += W) {
      Vt x = simd::splat<T, W>(T(1)), sum{};
      for (index_t i = i0; i <= last; ++i) {  // X_i, running forward
        x *= ld<T, W>(alpha + i * Kp + d);
        sum += ld<T, W>(g + i * Kp + d);
        st<T, W>(ex + i * Kp + d, ld<T, W>(e + i * Kp + d) * x);
        st<T, W>(qx + i * Kp + d, ld<T, W>(q + i * Kp + d) * x);
        st<T, W>(kx + i * Kp + d, ld<T, W>(k + i * Kp + d) * x);
      }
      st<T, W>(tot + I * Kp + d, sum);
      Vt y = simd::splat<T, W>(T(1));
      for (index_t i = last; i >= i0; --i) {  // Y_i, running backward
        st<T, W>(ky + i * Kp + d, ld<T, W>(k + i * Kp + d) * y);
        y *= ld<T, W>(alpha + i * Kp + d);
      }
    }
  }
  simd::transpose<T, W>(ky, Kp, C, Kp, kT, C);  // kT = (k (.) Y)^T
  for (index_t d = 0; d < Kp; d += W) {
    Vt acc{};
    for (index_t I = 0; I < nb; ++I) st<T, W>(before + I * Kp + d, acc), acc += ld<T, W>(tot + I * Kp + d);
    st<T, W>(gl + d, simd::vexp<T, W>(acc));  // exp(G_last)
    acc = Vt{};
    for (index_t I = nb - 1; I >= 0; --I) st<T, W>(after + I * Kp + d, acc), acc += ld<T, W>(tot + I * Kp + d);
  }
  // the decay-scaled operands of stages 5-6
  for (index_t I = 0; I < nb; ++I) {
    for (index_t d = 0; d < Kp; d += W) {
      st<T, W>(mid + d, simd::vexp<T, W>(ld<T, W>(before + I * Kp + d)));
      st<T, W>(after + I * Kp + d, simd::vexp<T, W>(ld<T, W>(after + I * Kp + d)));  // now a factor
    }
    for (index_t i = I * SUB; i < (I + 1) * SUB; ++i)
      for (index_t d = 0; d < Kp; d += W) {
        const Vt eb = ld<T, W>(mid + d);
        st<T, W>(ws.rhs.data() + i * KV + d, ld<T, W>(ex + i * Kp + d) * eb);
        st<T, W>(ws.qg.data() + i * Kp + d, ld<T, W>(qx + i * Kp + d) * eb);
        st<T, W>(ws.kg.data() + i * Kp + d, ld<T, W>(kx + i * Kp + d) * eb);
      }
  }
  for (index_t d = 0; d < Kp; ++d)  // kdT = (k (.) Y)^T, column j scaled by exp(sum after J)
    for (index_t c = 0; c < C; c += W)
      st<T, W>(ws.kdT.data() + d * C + c,
               ld<T, W>(kT + d * C + c) * simd::splat<T, W>(after[(c / SUB) * Kp + d]));
  for (index_t I = 0; I < nb; ++I) {
    const index_t i0 = I * SUB;
    // blocks J < I: a matrix product with Diag(M_IJ) folded into the right operand
    for (index_t J = 0; J < I; ++J) {
      const index_t j0 = J * SUB;
      for (index_t d = 0; d < Kp; d += W) {
        Vt acc{};
        for (index_t M = J + 1; M < I; ++M) acc += ld<T, W>(tot + M * Kp + d);
        st<T, W>(mid + d, simd::vexp<T, W>(acc));
      }
      T* bm = ws.bm.data();
      for (index_t d = 0; d < Kp; ++d)
        for (index_t c = 0; c < SUB; c += W)
          st<T, W>(bm + d * SUB + c, ld<T, W>(kT + d * C + j0 + c) * simd::splat<T, W>(mid[d]));
      kern::gemm<T, W>(SUB, SUB, K, ex + i0 * Kp, Kp, 1, bm, SUB, L + i0 * C + j0, C, Acc::store);
      kern::gemm<T, W>(SUB, SUB, K, qx + i0 * Kp, Kp, 1, bm, SUB, P + i0 * C + j0, C, Acc::store);
      if (trace)
        kern::gemm<T, W>(SUB, SUB, K, kx + i0 * Kp, Kp, 1, bm, SUB, Lk + i0 * C + j0, C, Acc::store);
    }
    // the diagonal block, exactly; zero to the right of it
    for (index_t i = i0; i < i0 + SUB; ++i) {
      std::fill(dec, dec + Kp, T(1));
      for (index_t c = i; c >= i0; --c) {
        if (c < i)
          for (index_t d = 0; d < Kp; d += W)
            st<T, W>(dec + d, ld<T, W>(dec + d) * ld<T, W>(alpha + (c + 1) * Kp + d));
        Vt sl{}, sp{}, sk{};
        for (index_t d = 0; d < Kp; d += W) {
          const Vt kd = ld<T, W>(k + c * Kp + d) * ld<T, W>(dec + d);
          sl += ld<T, W>(e + i * Kp + d) * kd;
          sp += ld<T, W>(q + i * Kp + d) * kd;
          if (trace) sk += ld<T, W>(k + i * Kp + d) * kd;
        }
        L[i * C + c] = c < i ? simd::hsum<T, W>(sl) : T(0);
        P[i * C + c] = simd::hsum<T, W>(sp);
        Lk[i * C + c] = c < i ? simd::hsum<T, W>(sk) : T(0);
      }
      for (index_t c = i + 1; c < C; ++c) L[i * C + c] = P[i * C + c] = Lk[i * C + c] = T(0);
    }
  }
}

/// Stage 4: A = (I + L)^-1 by forward substitution, row by row: A_i = unit_i - sum_{j<i} L_ij A_j
/// (A is unit lower triangular; row j of A is zero after column j). Row i is accumulated in
/// registers, C / W vectors (at most 64 / W), the sum over j running down the rows of A.
template <class T, int W>
LINATTN_INLINE void invert_unit_lower(Workspace<T>& ws) {
  using Vt = vec<T, W>;
  constexpr int MAXV = 64 / W;  // C <= 64
  const index_t C = ws.C;
  const int nv = static_cast<int>(C / W);
  const T* L = ws.L.data();
  T* A = ws.A.data();
  for (index_t i = 0; i < C; ++i) {
    T* Ai = A + i * C;
    for (index_t c = 0; c < C; ++c) Ai[c] = c == i ? T(1) : T(0);
    Vt acc[MAXV];
#pragma GCC unroll 16
    for (int b = 0; b < MAXV; ++b) acc[b] = b < nv ? ld<T, W>(Ai + b * W) : Vt{};
    for (index_t jj = 0; jj < i; ++jj) {
      const Vt l = simd::splat<T, W>(L[i * C + jj]);
      const T* Aj = A + jj * C;
#pragma GCC unroll 16
      for (int b = 0; b < MAXV; ++b)
        if (b * W <= jj) acc[b] -= l * ld<T, W>(Aj + b * W);  // A_j is zero after column j
    }
#pragma GCC unroll 16
    for (int b = 0; b < MAXV; ++b)
      if (b < nv) st<T, W>(Ai + b * W, acc[b]);
  }
}

/// chunk_intermediates: copy the chunk's stages out (the first n rows, K and V columns).
template <class T, Decay D>
void record_chunk(const HeadJob<T>& j, const Workspace<T>& ws, index_t c0, index_t n,
                  const std::vector<T>& wu, const std::vector<T>& S_in) {
  const index_t K = j.K, V = j.V, Kp = ws.Kp, Vp = ws.Vp, KV = Kp + Vp, C = ws.C;
  auto mat = [](const T* src, index_t ld, index_t rows, index_t cols) {
    Tensor<T> m({rows, cols});
    for (index_t a = 0; a < rows; ++a)
      for (index_t c = 0; c < cols; ++c) m(a, c) = src[a * ld + c];
    return m;
  };
  ChunkStages<T> st;
  st.seq = j.seq, st.head = j.head, st.t0 = j.t0 + c0, st.len = n;
  st.G = Tensor<T>({n, K});  // G_i = g_0 + ... + g_i (per channel; scalar decays repeated)
  for (index_t d = 0; d < K; ++d) {
    T acc = 0;
    for (index_t a = 0; a < n; ++a)
      st.G(a, d) = acc += D == Decay::channel ? ws.g[a * Kp + d] : ws.g[a];
  }
  st.e = mat(ws.e.data(), Kp, n, K);
  st.u0 = mat(ws.rhs.data() + Kp, KV, n, V);
  st.L = mat(ws.L.data(), C, n, n);
  st.A = mat(ws.A.data(), C, n, n);
  st.w_aux = mat(wu.data(), KV, n, K);
  st.u = mat(wu.data() + Kp, KV, n, V);
  st.S_in = mat(S_in.data(), Vp, K, V);
  st.v_new = mat(ws.wu.data() + Kp, KV, n, V);
  st.S_out = mat(ws.S.data(), Vp, K, V);
  j.record->push_back(std::move(st));
}

template <class T, int W, Decay D>
LINATTN_INLINE void run_head(const HeadJob<T>& j, Workspace<T>& ws) {
  const index_t C = j.C, K = j.K, V = j.V, Kp = ws.Kp, Vp = ws.Vp, KV = Kp + Vp;
  const bool trace = j.v_bar != nullptr;
  T *A = ws.A.data(), *P = ws.P.data(), *Lk = ws.Lk.data(), *S = ws.S.data();
  T *rhs = ws.rhs.data(), *wu = ws.wu.data(), *o = ws.o.data(), *vbar = ws.vbar.data();
  T* gl = ws.tmp.data() + 3 * Kp;  // exp(G_last), per key channel
  T* vnew = wu + Kp;               // v_new overwrites u in place (stage 6)
  constexpr index_t PW = PANEL<T>;

  // The state entering the first chunk: S = initial state (or 0), zero-padded to Kp x Vp.
  for (index_t i = 0; i < Kp; ++i)
    for (index_t c = 0; c < Vp; ++c)
      S[i * Vp + c] = (j.s0 && i < K && c < V) ? j.s0[i * V + c] : T(0);

  for (index_t c0 = 0; c0 < j.len; c0 += C) {
    const index_t n = std::min(C, j.len - c0);
    gather<T, W, D>(j, ws, c0, n);                                       // stage 0
    if constexpr (D == Decay::scalar) decay_sums_scalar(ws);            // stage 1
    make_e_u0(j, ws, c0, n);                                            // stage 2
    if constexpr (D == Decay::scalar) intra_scalar<T, W>(ws, K, trace, gl);  // stage 3 (+1)
    else intra_channel<T, W>(ws, K, trace, gl);
    invert_unit_lower<T, W>(ws);                                        // stage 4

    // Stage 5: [w_aux | u] = A [e (.) exp(G) | u0]
    kern::gemm<T, W>(C, KV, C, A, C, 1, rhs, KV, wu, KV, Acc::store, Tri::lower_a);
    std::vector<T> wu_copy, S_in;  // chunk_intermediates: u and S before stage 6 changes them
    if (j.record) wu_copy.assign(wu, wu + C * KV), S_in.assign(S, S + Kp * Vp);

    // Stage 6, one column panel of S at a time (the columns of S evolve independently, and a
    // K x PW panel stays in L1 through all four products):
    //   v_new = u - w_aux S;  o = (q (.) exp(G)) S + P v_new;  (trace: v_bar likewise with k, Lk)
    //   S' = Diag(exp(G_last)) S + (k (.) exp(G_last - G))^T v_new
    for (index_t c0p = 0; c0p < Vp; c0p += PW) {
      const index_t pw = std::min(PW, Vp - c0p);
      T *Sp = S + c0p, *vn = vnew + c0p, *op = o + c0p;
      kern::gemm<T, W>(C, pw, K, wu, KV, 1, Sp, Vp, vn, KV, Acc::sub);
      kern::gemm<T, W>(C, pw, K, ws.qg.data(), Kp, 1, Sp, Vp, op, Vp, Acc::store);
      kern::gemm<T, W>(C, pw, C, P, C, 1, vn, KV, op, Vp, Acc::add, Tri::lower_a);
      if (trace) {
        kern::gemm<T, W>(C, pw, K, ws.kg.data(), Kp, 1, Sp, Vp, vbar + c0p, Vp, Acc::store);
        kern::gemm<T, W>(C, pw, C, Lk, C, 1, vn, KV, vbar + c0p, Vp, Acc::add, Tri::lower_a);
      }
      for (index_t i = 0; i < K; ++i) {
        const vec<T, W> f = simd::splat<T, W>(gl[i]);
        for (index_t c = 0; c < pw; c += W) st<T, W>(Sp + i * Vp + c, ld<T, W>(Sp + i * Vp + c) * f);
      }
      kern::gemm<T, W>(Kp, pw, n, ws.kdT.data(), C, 1, vn, KV, Sp, Vp, Acc::add);  // Kp: whole tiles
    }

    // Outputs of the chunk
    for (index_t i = 0; i < n; ++i) {
      const index_t t = c0 + i;
      std::copy(o + i * Vp, o + i * Vp + V, j.o + t * j.ld_v);
      if (trace)
        for (index_t c = 0; c < V; ++c) {
          const T vb = vbar[i * Vp + c];
          j.v_bar[t * j.ld_v + c] = vb;
          j.r[t * j.ld_v + c] = ws.v[i * Vp + c] - vb;
          j.written[t * j.ld_v + c] = vnew[i * KV + c];
        }
    }
    if (j.record) record_chunk<T, D>(j, ws, c0, n, wu_copy, S_in);
  }
  if (j.s_final)
    for (index_t i = 0; i < K; ++i)
      for (index_t c = 0; c < V; ++c) j.s_final[i * V + c] = S[i * Vp + c];
}

LINATTN_CPU_DISPATCH(void, chunk_head, (const HeadJob<float>& j, Workspace<float>& ws), (j, ws),
                         if (chunk_decay(j.op) == Decay::channel)
                             run_head<float, VB / 4, Decay::channel>(j, ws);
                         else run_head<float, VB / 4, Decay::scalar>(j, ws);)
LINATTN_CPU_DISPATCH(void, chunk_head, (const HeadJob<double>& j, Workspace<double>& ws), (j, ws),
                         if (chunk_decay(j.op) == Decay::channel)
                             run_head<double, VB / 8, Decay::channel>(j, ws);
                         else run_head<double, VB / 8, Decay::scalar>(j, ws);)

// ------------------------------------------------------------------------------------------------
// The driver: validate, cut into (sequence, head) jobs, run them on OpenMP threads.
// ------------------------------------------------------------------------------------------------

template <class T>
ref::RecurrentOutput<T> run_chunked(const std::string& fn, Op op, const Tensor<T>& q,
                                    const Tensor<T>& k, const Tensor<T>& v,
                                    const ref::Gates<T>& gates, const ChunkOptions<T>& opt,
                                    std::vector<ChunkStages<T>>* record) {
  if (op == Op::linear_attn)
    fail(fn, "op", "one of delta_rule, gated_delta_rule, kda, gdn2", ref::op_name(op));
  const index_t N = ref::validate_recurrent(fn, op, q, k, v, gates, opt);
  if (opt.chunk_size != 16 && opt.chunk_size != 32 && opt.chunk_size != 64)
    fail(fn, "chunk_size", "one of 16, 32, 64", std::to_string(opt.chunk_size));
  if (opt.num_threads < 0)
    fail(fn, "num_threads", "0 (OpenMP's default) or a positive count",
         std::to_string(opt.num_threads));
  const index_t K = q.size(3), V = v.size(3);
  ref::RecurrentOutput<T> out = make_outputs(q, v, opt, N);
  std::vector<HeadJob<T>> jobs = make_jobs(op, q, k, v, gates, opt, N, out);
  for (auto& j : jobs) j.C = opt.chunk_size, j.record = record;
  // With a record: one thread, so the chunks are appended in order.
  detail::for_each_job<Workspace<T>>(
      jobs, record ? 1 : opt.num_threads,
      [&](Workspace<T>& ws) { ws.resize(opt.chunk_size, K, V); },
      [](const HeadJob<T>& j, Workspace<T>& ws) { chunk_head(j, ws); });
  ref::require_finite_results<T>(fn, op, false, {{"o", &out.o}, {"final_state", &out.final_state}});
  return out;
}

}  // namespace

template <class T>
ref::RecurrentOutput<T> chunk_forward(Op op, const Tensor<T>& q, const Tensor<T>& k,
                                      const Tensor<T>& v, const ref::Gates<T>& gates,
                                      const ChunkOptions<T>& opt) {
  return run_chunked<T>("chunk_forward", op, q, k, v, gates, opt, nullptr);
}

template <class T>
ref::RecurrentOutput<T> chunk_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                         const Tensor<T>& v, const Tensor<T>& beta,
                                         const ChunkOptions<T>& opt) {
  ref::Gates<T> gt;
  gt.beta = beta;
  return run_chunked<T>("chunk_delta_rule", Op::delta_rule, q, k, v, gt, opt, nullptr);
}

template <class T>
ref::RecurrentOutput<T> chunk_gated_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                               const Tensor<T>& v, const Tensor<T>& g,
                                               const Tensor<T>& beta, const ChunkOptions<T>& opt) {
  ref::Gates<T> gt;
  gt.g = g, gt.beta = beta;
  return run_chunked<T>("chunk_gated_delta_rule", Op::gated_delta_rule, q, k, v, gt, opt, nullptr);
}

template <class T>
ref::RecurrentOutput<T> chunk_kda(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                  const Tensor<T>& g, const Tensor<T>& beta,
                                  const ChunkOptions<T>& opt) {
  ref::Gates<T> gt;
  gt.g = g, gt.beta = beta;
  return run_chunked<T>("chunk_kda", Op::kda, q, k, v, gt, opt, nullptr);
}

template <class T>
ref::RecurrentOutput<T> chunk_gdn2(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                   const Tensor<T>& g, const Tensor<T>& b, const Tensor<T>& w,
                                   const ChunkOptions<T>& opt) {
  ref::Gates<T> gt;
  gt.g = g, gt.b = b, gt.w = w;
  return run_chunked<T>("chunk_gdn2", Op::gdn2, q, k, v, gt, opt, nullptr);
}

template <class T>
std::vector<ChunkStages<T>> chunk_intermediates(Op op, const Tensor<T>& q, const Tensor<T>& k,
                                                const Tensor<T>& v, const ref::Gates<T>& gates,
                                                const ChunkOptions<T>& opt) {
  std::vector<ChunkStages<T>> rec;
  run_chunked<T>("chunk_intermediates", op, q, k, v, gates, opt, &rec);
  return rec;
}

#define LINATTN_INSTANTIATE(T)                                                                    \
  template ref::RecurrentOutput<T> chunk_forward<T>(Op, const Tensor<T>&, const Tensor<T>&,       \
                                                    const Tensor<T>&, const ref::Gates<T>&,       \
                                                    const ChunkOptions<T>&);                      \
  template ref::RecurrentOutput<T> chunk_delta_rule<T>(const Tensor<T>&, const Tensor<T>&,        \
                                                       const Tensor<T>&, const Tensor<T>&,        \
                                                       const ChunkOptions<T>&);                   \
  template ref::RecurrentOutput<T> chunk_gated_delta_rule<T>(                                     \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,   \
      const ChunkOptions<T>&);                                                                    \
  template ref::RecurrentOutput<T> chunk_kda<T>(const Tensor<T>&, const Tensor<T>&,               \
                                                const Tensor<T>&, const Tensor<T>&,               \
                                                const Tensor<T>&, const ChunkOptions<T>&);        \
  template ref::RecurrentOutput<T> chunk_gdn2<T>(const Tensor<T>&, const Tensor<T>&,              \
                                                 const Tensor<T>&, const Tensor<T>&,              \
                                                 const Tensor<T>&, const Tensor<T>&,              \
                                                 const ChunkOptions<T>&);                         \
  template std::vector<ChunkStages<T>> chunk_intermediates<T>(                                    \
      Op, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const ref::Gates<T>&,             \
      const ChunkOptions<T>&);
LINATTN_INSTANTIATE(float)
LINATTN_INSTANTIATE(double)
#undef LINATTN_INSTANTIATE

}  // namespace linattn::cpu
