// optimized/cpu/chunk_backward.cpp -- the chunked backward of chunk_backward.hpp, stage by stage.
//
// Per (sequence, head), in the S layout (state K x V, o = S^T q) and the notation of SPEC
// section 4 and optimized/cpu/chunk.cpp. Per chunk of n <= C tokens, rows i, j = tokens:
//   forward (recomputed from the entering state S):
//     F1  G_i = g_0 + ... + g_i (per key channel; scalar decays repeated over the K channels)
//     F2  e_i = beta_i k_i | b_i (.) k_i,   u0_i = beta_i v_i | w_i (.) v_i        (OPERATOR-SPECIFIC)
//         E = e (.) exp(G),  Qg = q (.) exp(G),  Kd = k (.) exp(G_last - G),  gamma = exp(G_last)
//     F3  L_ij = sum_d e_id k_jd Gam_ijd (i > j),  P_ij = sum_d q_id k_jd Gam_ijd (i >= j),
//         Gam_ijd = exp(G_id - G_jd) = alpha_{j+1,d} ... alpha_{i,d},  alpha = exp(g)
//     F4  A = (I + L)^-1
//     F5  [w_aux | u] = A [E | u0]
//     F6  v_new = u - w_aux S
//     F7  o = Qg S + P v_new,   S' = Diag(gamma) S + Kd^T v_new
//   backward (dS' = dL/dS' arrives from the next chunk, or from dht for the last one):
//     B1  dv_new = P^T do + Kd dS'                        (o and S' through v_new)
//     B2  dKd = v_new dS'^T,   dgamma_d = sum_c S_dc dS'_dc
//     B3  dS = Diag(gamma) dS' + Qg^T do - w_aux^T dv_new (to the previous chunk)
//     B4  dQg = do S^T,   dw_aux = -dv_new S^T,   du = dv_new
//     B5  dP = tril_incl(do v_new^T)
//     B6  dA = [dw_aux | du] [E | u0]^T                   (F5)
//     B7  dL = -A^T dA A^T, strictly lower                (F4)
//     B8  [dE | du0] = A^T [dw_aux | du]                  (F5)
//     B9  de_i = sum_{j<i} dL_ij k_j (.) Gam_ij,  dq_i = sum_{j<=i} dP_ij k_j (.) Gam_ij,
//         dk_j = sum_{i>j} dL_ij e_i (.) Gam_ij + sum_{i>=j} dP_ij q_i (.) Gam_ij   (F3)
//     B10 through F2 to q, k, v, beta | b, w; through every exp(.) to G:
//         dG_i = dE_i E_i + dQg_i Qg_i - dKd_i Kd_i + e_i de^L_i + q_i dq^P_i - k_i dk^{L,P}_i,
//         dG_last += sum_i dKd_i Kd_i + dgamma gamma      (products elementwise, per channel)
//     B11 dg_t = sum_{i >= t} dG_i (the gradient of a cumulative sum is a reverse cumulative sum);
//         GDN: dg_t = sum_d of that; the L2 normalisation and `scale` of q, k by the chain rule.
// After the first chunk, dh0 = dS.
//
// Trace cotangents (optional; CLER / CLER-H differentiate through the trace, SPEC section 3). The
// forward's trace is written = v_new (F6) and v_bar = Kg S + Lk v_new with Kg = k (.) exp(G) and
// Lk_ij = sum_d k_id k_jd Gam_ijd (i > j) (chunk.cpp stage 6). Given dwritten and dv_bar:
//     T1  dv_new += dwritten                               (after B1, before dv_new is used)
//     T2  dv_new += Lk^T dv_bar
//     T3  dS += Kg^T dv_bar                                (in B3)
//     T4  dKg = dv_bar S^T:  dk += dKg (.) exp(G),  dG += dKg (.) Kg        (as dQg in B4, B10)
//     T5  dLk = strict_tril(dv_bar v_new^T): through the pair sums of Lk as dP through P (B9),
//         with k in both roles: dk_i += sum_{c<i} dLk_ic k_c (.) Gam_ic (row role, dkQ),
//         dk_c += sum_{i>c} dLk_ic k_i (.) Gam_ic (column role, into dkLP); dG_i += k_i (.) dkQ_i.
// Absent cotangents skip T1-T5 (the results are then those of the call without them).
//
// Numerics (SPEC section 4): every decay is exp of a sum of g <= 0 (G_i, G_last - G_i) or a product
// of alphas <= 1 (Gam), never a positive exponent; masks are selects applied before use; all in
// the input's precision. Gam is accumulated as the product alpha_{j+1} ... alpha_i, as in the
// forward's diagonal blocks (an exact-in-structure product, no cancellation of large sums).
#include "optimized/cpu/chunk_backward.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "optimized/cpu/dispatch.hpp"
#include "optimized/cpu/jobs.hpp"
#include "optimized/cpu/simd.hpp"
#include "optimized/cpu/small_gemm.hpp"

namespace linattn::cpu {
namespace {

using detail::Decay;
using detail::ld;
using detail::st;
using detail::l2_normalize_row;
using kern::Acc;
using kern::Tri;
using ref::Op;
using simd::PAD;
using simd::vec;

/// One (sequence, head) of a backward call: input rows, gradient rows and their strides.
template <class T>
struct BwdJob {
  Op op = Op::delta_rule;
  Decay decay = Decay::none;
  index_t len = 0, K = 0, V = 0, C = 64;
  const T *q = nullptr, *k = nullptr, *v = nullptr, *do_ = nullptr;  // rows ld_k, ld_k, ld_v, ld_v
  const T* g = nullptr;                                               // rows ld_g; null: DeltaNet
  const T* beta = nullptr;                                            // rows ld_beta
  const T *b = nullptr, *w = nullptr;                                 // GDN2: rows ld_k, ld_v
  index_t ld_k = 0, ld_v = 0, ld_g = 0, ld_beta = 0;
  T scale = 1;
  bool l2norm = false;
  const T *s0 = nullptr, *dht = nullptr;                              // K x V, or null (zeros)
  T *dq = nullptr, *dk = nullptr, *dv = nullptr, *dg = nullptr;       // like q, k, v, g
  T *dbeta = nullptr, *db = nullptr, *dw = nullptr;                   // like beta, b, w
  T* dh0 = nullptr;                                                   // K x V
  // trace cotangents dL/dwritten, dL/dv_bar (rows ld_v), or null (zero: their stages are skipped)
  const T *dwritten = nullptr, *dvbar = nullptr;
};

/// Scratch buffers of one thread (row-major; rows padded to Kp, Vp, KV = Kp + Vp or C columns).
template <class T>
struct Workspace {
  index_t C = 0, Kp = 0, Vp = 0, KV = 0;
  // chunk inputs: q (normalised if asked, times scale), k (normalised if asked), v, alpha = exp(g),
  // the per-channel log-decays lg, the gates (beta per row; b, w rows)
  std::vector<T> q, k, v, lg, alpha, beta, b, w;
  // forward quantities (F1-F7)
  std::vector<T> eG, eGs, gl, e, rhs, Qg, Kd, L, P, A, wu, dec;
  // backward quantities (B1-B11)
  std::vector<T> S, dS, ST, dST, dO, dWU, dRHS, dQg, dKd, dgamma, dP, dA, dL, T1, AT, rhsT, vnT;
  std::vector<T> deL, dqP, dkLP, dG, dq_row, dk_row;
  // trace cotangents (T1-T5 below): dwritten, dv_bar rows; Lk and its gradient; Kg = k (.) exp(G),
  // dKg; dkQ = the gradient of k in its row role of Lk
  std::vector<T> dWr, dVb, Lk, dLk, Kg, dKg, dkQ;
  std::vector<T> saved;  // the state entering every chunk of the current job (pass 1)
  void resize(index_t C_, index_t K, index_t V) {
    C = C_, Kp = simd::round_up(K, PAD), Vp = simd::round_up(V, PAD), KV = Kp + Vp;
    auto sz = [](std::vector<T>& x, index_t n) { x.assign(static_cast<size_t>(n), T(0)); };
    for (auto* x : {&q, &k, &lg, &alpha, &b, &eG, &eGs, &e, &Qg, &Kd, &dQg, &dKd, &deL, &dqP,
                    &dkLP, &dG, &Kg, &dKg, &dkQ})
      sz(*x, C * Kp);
    for (auto* x : {&v, &w, &dO, &dWr, &dVb}) sz(*x, C * Vp);
    for (auto* x : {&rhs, &wu, &dWU, &dRHS}) sz(*x, C * KV);
    for (auto* x : {&L, &P, &A, &dP, &dA, &dL, &T1, &AT, &Lk, &dLk}) sz(*x, C * C);
    for (auto* x : {&S, &dS, &ST, &dST}) sz(*x, Kp * Vp);
    sz(rhsT, KV * C), sz(vnT, Vp * C), sz(beta, C), sz(gl, Kp), sz(dgamma, Kp), sz(dec, Kp);
    sz(dq_row, Kp), sz(dk_row, Kp);
  }
};

/// dst = the gradient wrt x of y = x / sqrt(|x|^2 + 1e-6) given dy (as ref::l2_normalize_backward):
/// dx = inv (dy - y (y . dy)),  inv = 1 / sqrt(|x|^2 + 1e-6).
template <class T>
LINATTN_INLINE void l2_normalize_backward_row(const T* x, const T* dy, index_t n, T* dst) {
  T ss = 0, ydy = 0;
  for (index_t d = 0; d < n; ++d) ss += x[d] * x[d];
  const T inv = T(1) / std::sqrt(ss + T(1e-6));
  for (index_t d = 0; d < n; ++d) ydy += x[d] * inv * dy[d];
  for (index_t d = 0; d < n; ++d) dst[d] = inv * (dy[d] - x[d] * inv * ydy);
}

// ------------------------------------------------------------------------------------------------
// The forward quantities of one chunk (F1-F6), recomputed from the entering state ws.S. Rows
// i >= n are zero (k, e, u0, q, do = 0 and g = 0), so they add nothing anywhere.
// ------------------------------------------------------------------------------------------------

/// Stage 0: q (l2-normalised if asked, times scale), k, v, the gates and the per-channel log-decays.
template <class T, int W>
LINATTN_INLINE void gather(const BwdJob<T>& j, Workspace<T>& ws, index_t c0, index_t n) {
  const index_t K = j.K, V = j.V, Kp = ws.Kp, Vp = ws.Vp;
  for (index_t i = 0; i < ws.C; ++i) {
    const bool in = i < n;
    const index_t t = c0 + i;
    T *qi = ws.q.data() + i * Kp, *ki = ws.k.data() + i * Kp, *gi = ws.lg.data() + i * Kp;
    simd::copy_row<T, W>(in ? j.q + t * j.ld_k : nullptr, K, Kp, qi);
    simd::copy_row<T, W>(in ? j.k + t * j.ld_k : nullptr, K, Kp, ki);
    simd::copy_row<T, W>(in ? j.v + t * j.ld_v : nullptr, V, Vp, ws.v.data() + i * Vp);
    simd::copy_row<T, W>(in ? j.do_ + t * j.ld_v : nullptr, V, Vp, ws.dO.data() + i * Vp);
    if (j.dwritten)
      simd::copy_row<T, W>(in ? j.dwritten + t * j.ld_v : nullptr, V, Vp, ws.dWr.data() + i * Vp);
    if (j.dvbar)
      simd::copy_row<T, W>(in ? j.dvbar + t * j.ld_v : nullptr, V, Vp, ws.dVb.data() + i * Vp);
    if (in && j.l2norm) l2_normalize_row(qi, K), l2_normalize_row(ki, K);
    for (index_t d = 0; d < K; ++d) qi[d] *= j.scale;
    if (j.decay == Decay::channel) {
      simd::copy_row<T, W>(in ? j.g + t * j.ld_g : nullptr, K, Kp, gi);
    } else {  // scalar decay repeated over the K channels; DeltaNet: g = 0
      const T gt = (in && j.g) ? j.g[t * j.ld_g] : T(0);
      for (index_t d = 0; d < Kp; ++d) gi[d] = d < K ? gt : T(0);
    }
    if (j.op == Op::gdn2) {
      simd::copy_row<T, W>(in ? j.b + t * j.ld_k : nullptr, K, Kp, ws.b.data() + i * Kp);
      simd::copy_row<T, W>(in ? j.w + t * j.ld_v : nullptr, V, Vp, ws.w.data() + i * Vp);
    } else {
      ws.beta[i] = in ? j.beta[t * j.ld_beta] : T(0);
    }
  }
}

/// F1 and the decay-scaled operands of F2: exp(G_i), exp(G_last - G_i) = exp(g_{i+1} + ... +
/// g_last) (a direct running sum from the end, never a difference of two sums), gamma = exp(G_last),
/// alpha = exp(g); then E = e (.) exp(G) (into rhs[:, :Kp]), Qg = q (.) exp(G), Kd = k (.) exp(G_last - G),
/// and Kg = k (.) exp(G) (the trace's read operand, used only with a dv_bar cotangent).
template <class T, int W>
LINATTN_INLINE void decays(Workspace<T>& ws) {
  using Vt = vec<T, W>;
  const index_t C = ws.C, Kp = ws.Kp, KV = ws.KV;
  const T* lg = ws.lg.data();
  for (index_t d = 0; d < Kp; d += W) {
    Vt acc{};
    for (index_t i = 0; i < C; ++i) {
      acc += ld<T, W>(lg + i * Kp + d);  // G_i
      const Vt eg = simd::vexp<T, W>(acc);
      st<T, W>(ws.eG.data() + i * Kp + d, eg);
      st<T, W>(ws.alpha.data() + i * Kp + d, simd::vexp<T, W>(ld<T, W>(lg + i * Kp + d)));
      st<T, W>(ws.rhs.data() + i * KV + d, ld<T, W>(ws.e.data() + i * Kp + d) * eg);
      st<T, W>(ws.Qg.data() + i * Kp + d, ld<T, W>(ws.q.data() + i * Kp + d) * eg);
      st<T, W>(ws.Kg.data() + i * Kp + d, ld<T, W>(ws.k.data() + i * Kp + d) * eg);
    }
    st<T, W>(ws.gl.data() + d, simd::vexp<T, W>(acc));  // gamma = exp(G_last)
    acc = Vt{};
    for (index_t i = C - 1; i >= 0; --i) {  // acc = g_{i+1} + ... + g_{C-1} = G_last - G_i
      const Vt es = simd::vexp<T, W>(acc);
      st<T, W>(ws.eGs.data() + i * Kp + d, es);
      st<T, W>(ws.Kd.data() + i * Kp + d, ld<T, W>(ws.k.data() + i * Kp + d) * es);
      acc += ld<T, W>(lg + i * Kp + d);
    }
  }
}

/// F2 (OPERATOR-SPECIFIC): e_i (into e) and u0_i (into rhs[:, Kp:]).
template <class T>
LINATTN_INLINE void make_e_u0(const BwdJob<T>& j, Workspace<T>& ws) {
  const index_t Kp = ws.Kp, Vp = ws.Vp, KV = ws.KV;
  for (index_t i = 0; i < ws.C; ++i) {
    T *ei = ws.e.data() + i * Kp, *u0i = ws.rhs.data() + i * KV + Kp;
    const T *ki = ws.k.data() + i * Kp, *vi = ws.v.data() + i * Vp;
    if (j.op == Op::gdn2) {  // e = b (.) k, u0 = w (.) v
      const T *bi = ws.b.data() + i * Kp, *wi = ws.w.data() + i * Vp;
      for (index_t d = 0; d < Kp; ++d) ei[d] = bi[d] * ki[d];
      for (index_t c = 0; c < Vp; ++c) u0i[c] = wi[c] * vi[c];
    } else {  // e = beta k, u0 = beta v
      const T bt = ws.beta[i];
      for (index_t d = 0; d < Kp; ++d) ei[d] = bt * ki[d];
      for (index_t c = 0; c < Vp; ++c) u0i[c] = bt * vi[c];
    }
  }
}

/// F3: L (strictly lower) and, if asked, P (lower, diagonal included), with the per-channel decay
/// Gam_ij = alpha_{j+1} ... alpha_i accumulated from j = i down to 0; with `with_Lk` also the
/// trace's Lk_ij = sum_d k_id k_jd Gam_ijd (strictly lower; chunk.cpp stage 3). Zero elsewhere.
template <class T, int W>
LINATTN_INLINE void intra_forward(Workspace<T>& ws, index_t n, bool with_P, bool with_Lk) {
  using Vt = vec<T, W>;
  const index_t C = ws.C, Kp = ws.Kp;
  T *L = ws.L.data(), *P = ws.P.data(), *Lk = ws.Lk.data(), *dec = ws.dec.data();
  const T *k = ws.k.data(), *q = ws.q.data(), *e = ws.e.data(), *alpha = ws.alpha.data();
  std::fill(L, L + C * C, T(0));
  if (with_P) std::fill(P, P + C * C, T(0));
  if (with_Lk) std::fill(Lk, Lk + C * C, T(0));
  for (index_t i = 0; i < n; ++i) {
    std::fill(dec, dec + Kp, T(1));
    for (index_t c = i; c >= 0; --c) {
      Vt sl{}, sp{}, sk{};
      for (index_t d = 0; d < Kp; d += W) {
        Vt g = ld<T, W>(dec + d);
        if (c < i) st<T, W>(dec + d, g = g * ld<T, W>(alpha + (c + 1) * Kp + d));
        const Vt kd = ld<T, W>(k + c * Kp + d) * g;
        sl += ld<T, W>(e + i * Kp + d) * kd;
        if (with_P) sp += ld<T, W>(q + i * Kp + d) * kd;
        if (with_Lk) sk += ld<T, W>(k + i * Kp + d) * kd;
      }
      if (c < i) L[i * C + c] = simd::hsum<T, W>(sl);
      if (with_P) P[i * C + c] = simd::hsum<T, W>(sp);
      if (with_Lk && c < i) Lk[i * C + c] = simd::hsum<T, W>(sk);
    }
  }
}

/// F4: A = (I + L)^-1 by forward substitution, row by row: A_i = unit_i - sum_{j<i} L_ij A_j.
template <class T, int W>
LINATTN_INLINE void invert_unit_lower(Workspace<T>& ws) {
  using Vt = vec<T, W>;
  const index_t C = ws.C;
  const T* L = ws.L.data();
  T* A = ws.A.data();
  for (index_t i = 0; i < C; ++i) {
    T* Ai = A + i * C;
    for (index_t c = 0; c < C; ++c) Ai[c] = c == i ? T(1) : T(0);
    for (index_t jj = 0; jj < i; ++jj) {
      const Vt l = simd::splat<T, W>(L[i * C + jj]);
      const T* Aj = A + jj * C;
      for (index_t c = 0; c <= jj; c += W) st<T, W>(Ai + c, ld<T, W>(Ai + c) - l * ld<T, W>(Aj + c));
    }
  }
}

/// F1-F6 for the chunk of n rows starting at token c0, from the entering state ws.S:
/// wu = [w_aux | v_new] (v_new overwrites u), P only if `with_P`.
template <class T, int W>
LINATTN_INLINE void chunk_forward_quantities(const BwdJob<T>& j, Workspace<T>& ws, index_t c0,
                                             index_t n, bool with_P) {
  const index_t C = ws.C, Vp = ws.Vp, KV = ws.KV, Kp = ws.Kp;
  gather<T, W>(j, ws, c0, n);
  make_e_u0(j, ws);                        // F2: e, u0
  decays<T, W>(ws);                        // F1 (+ E, Qg, Kd, gamma, alpha)
  intra_forward<T, W>(ws, n, with_P, with_P && j.dvbar);  // F3 (+ Lk for a dv_bar cotangent)
  invert_unit_lower<T, W>(ws);             // F4
  // F5: [w_aux | u] = A [E | u0];  F6: v_new = u - w_aux S
  kern::gemm<T, W>(C, KV, C, ws.A.data(), C, 1, ws.rhs.data(), KV, ws.wu.data(), KV, Acc::store,
                   Tri::lower_a);
  kern::gemm<T, W>(C, Vp, j.K, ws.wu.data(), KV, 1, ws.S.data(), Vp, ws.wu.data() + Kp, KV,
                   Acc::sub);
}

/// F7, the state only: S' = Diag(gamma) S + Kd^T v_new.
template <class T, int W>
LINATTN_INLINE void advance_state(Workspace<T>& ws, index_t n) {
  using Vt = vec<T, W>;
  const index_t Kp = ws.Kp, Vp = ws.Vp, KV = ws.KV;
  T* S = ws.S.data();
  for (index_t i = 0; i < Kp; ++i) {
    const Vt f = simd::splat<T, W>(ws.gl[i]);
    for (index_t c = 0; c < Vp; c += W) st<T, W>(S + i * Vp + c, ld<T, W>(S + i * Vp + c) * f);
  }
  kern::gemm<T, W>(Kp, Vp, n, ws.Kd.data(), 1, Kp, ws.wu.data() + Kp, KV, S, Vp, Acc::add);
}

// ------------------------------------------------------------------------------------------------
// The backward of one chunk (B1-B11). On entry ws.S is the entering state and ws.dS = dL/dS'; on
// exit ws.dS = dL/dS (entering), and the chunk's gradients are written out.
// ------------------------------------------------------------------------------------------------

/// Keep the entries of a C x C matrix with j < i (strict) or j <= i; zero the rest (a select).
template <class T>
LINATTN_INLINE void mask_lower(T* M, index_t C, bool strict, T sign = T(1)) {
  for (index_t i = 0; i < C; ++i)
    for (index_t c = 0; c < C; ++c) {
      const bool keep = strict ? c < i : c <= i;
      M[i * C + c] = keep ? sign * M[i * C + c] : T(0);
    }
}

/// B9: the gradients of F3 through the pair sums, accumulated into deL (e), dqP (q), dkLP (k).
/// With `trace` also T5's Lk: dkQ_i = sum_{c<i} dLk_ic k_c (.) Gam_ic (k in its row role) and
/// dkLP_c += sum_{i>c} dLk_ic k_i (.) Gam_ic (k in its column role, like L's and P's).
template <class T, int W>
LINATTN_INLINE void intra_backward(Workspace<T>& ws, index_t n, bool trace) {
  using Vt = vec<T, W>;
  const index_t C = ws.C, Kp = ws.Kp;
  const T *k = ws.k.data(), *q = ws.q.data(), *e = ws.e.data(), *alpha = ws.alpha.data();
  const T *dL = ws.dL.data(), *dP = ws.dP.data();
  T *deL = ws.deL.data(), *dqP = ws.dqP.data(), *dkLP = ws.dkLP.data(), *dec = ws.dec.data();
  std::fill(ws.deL.begin(), ws.deL.end(), T(0));
  std::fill(ws.dqP.begin(), ws.dqP.end(), T(0));
  std::fill(ws.dkLP.begin(), ws.dkLP.end(), T(0));
  const T* dLk = ws.dLk.data();
  T* dkQ = ws.dkQ.data();
  if (trace) std::fill(ws.dkQ.begin(), ws.dkQ.end(), T(0));
  for (index_t i = 0; i < n; ++i) {
    std::fill(dec, dec + Kp, T(1));
    for (index_t c = i; c >= 0; --c) {
      const Vt sp = simd::splat<T, W>(dP[i * C + c]);   // dP_ic, c <= i
      const Vt sl = simd::splat<T, W>(dL[i * C + c]);   // dL_ic, 0 for c = i (masked)
      for (index_t d = 0; d < Kp; d += W) {
        Vt g = ld<T, W>(dec + d);  // Gam_ic
        if (c < i) st<T, W>(dec + d, g = g * ld<T, W>(alpha + (c + 1) * Kp + d));
        const Vt kd = ld<T, W>(k + c * Kp + d) * g;
        st<T, W>(dqP + i * Kp + d, ld<T, W>(dqP + i * Kp + d) + sp * kd);
        st<T, W>(deL + i * Kp + d, ld<T, W>(deL + i * Kp + d) + sl * kd);
        const Vt src = sp * ld<T, W>(q + i * Kp + d) + sl * ld<T, W>(e + i * Kp + d);
        st<T, W>(dkLP + c * Kp + d, ld<T, W>(dkLP + c * Kp + d) + src * g);
        if (trace) {  // Lk_ic = sum_d k_id k_cd Gam_icd, c < i (dLk_ii = 0, masked)
          const Vt sk = simd::splat<T, W>(dLk[i * C + c]);
          st<T, W>(dkQ + i * Kp + d, ld<T, W>(dkQ + i * Kp + d) + sk * kd);
          st<T, W>(dkLP + c * Kp + d,
                   ld<T, W>(dkLP + c * Kp + d) + sk * ld<T, W>(k + i * Kp + d) * g);
        }
      }
    }
  }
}

template <class T, int W>
LINATTN_INLINE void chunk_backward_step(const BwdJob<T>& j, Workspace<T>& ws, index_t c0,
                                        index_t n) {
  using Vt = vec<T, W>;
  const index_t C = ws.C, K = j.K, V = j.V, Kp = ws.Kp, Vp = ws.Vp, KV = ws.KV;
  T *S = ws.S.data(), *dS = ws.dS.data(), *dO = ws.dO.data(), *wu = ws.wu.data();
  T *dWU = ws.dWU.data(), *dvn = dWU + Kp, *vn = wu + Kp;
  T *A = ws.A.data(), *AT = ws.AT.data();

  // Transposed copies used as right operands: S^T, dS'^T, v_new^T, [E | u0]^T, A^T.
  simd::transpose<T, W>(S, Vp, Kp, Vp, ws.ST.data(), Kp);
  simd::transpose<T, W>(dS, Vp, Kp, Vp, ws.dST.data(), Kp);
  simd::transpose<T, W>(vn, KV, C, Vp, ws.vnT.data(), C);
  simd::transpose<T, W>(ws.rhs.data(), KV, C, KV, ws.rhsT.data(), C);
  simd::transpose<T, W>(A, C, C, C, AT, C);

  // B2 (gamma part): dgamma_d = sum_c S_dc dS'_dc
  for (index_t d = 0; d < Kp; ++d) {
    Vt acc{};
    for (index_t c = 0; c < Vp; c += W) acc += ld<T, W>(S + d * Vp + c) * ld<T, W>(dS + d * Vp + c);
    ws.dgamma[d] = simd::hsum<T, W>(acc);
  }
  // B1: dv_new = P^T do + Kd dS'
  kern::gemm<T, W>(C, Vp, C, ws.P.data(), 1, C, dO, Vp, dvn, KV, Acc::store);
  kern::gemm<T, W>(C, Vp, K, ws.Kd.data(), Kp, 1, dS, Vp, dvn, KV, Acc::add);
  // T1: written = v_new, so dv_new += dwritten;  T2: v_bar = Kg S + Lk v_new, so dv_new += Lk^T dv_bar
  const bool tr = j.dvbar != nullptr;
  const T* dVb = ws.dVb.data();
  if (j.dwritten)
    for (index_t i = 0; i < C; ++i)
      for (index_t c = 0; c < Vp; c += W)
        st<T, W>(dvn + i * KV + c, ld<T, W>(dvn + i * KV + c) + ld<T, W>(ws.dWr.data() + i * Vp + c));
  if (tr) kern::gemm<T, W>(C, Vp, C, ws.Lk.data(), 1, C, dVb, Vp, dvn, KV, Acc::add);
  // B2: dKd = v_new dS'^T
  kern::gemm<T, W>(C, Kp, V, vn, KV, 1, ws.dST.data(), Kp, ws.dKd.data(), Kp, Acc::store);
  // B3: dS = Diag(gamma) dS' + Qg^T do - w_aux^T dv_new (dS' is not needed after this)
  for (index_t d = 0; d < Kp; ++d) {
    const Vt f = simd::splat<T, W>(ws.gl[d]);
    for (index_t c = 0; c < Vp; c += W) st<T, W>(dS + d * Vp + c, ld<T, W>(dS + d * Vp + c) * f);
  }
  kern::gemm<T, W>(Kp, Vp, C, ws.Qg.data(), 1, Kp, dO, Vp, dS, Vp, Acc::add);
  kern::gemm<T, W>(Kp, Vp, C, wu, 1, KV, dvn, KV, dS, Vp, Acc::sub);
  // T3: dS += Kg^T dv_bar (v_bar reads the entering state through Kg)
  if (tr) kern::gemm<T, W>(Kp, Vp, C, ws.Kg.data(), 1, Kp, dVb, Vp, dS, Vp, Acc::add);
  // B4: dQg = do S^T;  dw_aux = -dv_new S^T (into dWU[:, :Kp]; du = dv_new is dWU[:, Kp:])
  kern::gemm<T, W>(C, Kp, V, dO, Vp, 1, ws.ST.data(), Kp, ws.dQg.data(), Kp, Acc::store);
  kern::gemm<T, W>(C, Kp, V, dvn, KV, 1, ws.ST.data(), Kp, dWU, KV, Acc::store);
  for (index_t i = 0; i < C; ++i)
    for (index_t d = 0; d < Kp; d += W) st<T, W>(dWU + i * KV + d, -ld<T, W>(dWU + i * KV + d));
  // B5: dP = tril_incl(do v_new^T)
  kern::gemm<T, W>(C, C, V, dO, Vp, 1, ws.vnT.data(), C, ws.dP.data(), C, Acc::store, Tri::lower_c);
  mask_lower(ws.dP.data(), C, /*strict=*/false);
  // T4: dKg = dv_bar S^T;  T5: dLk = strict_tril(dv_bar v_new^T)
  if (tr) {
    kern::gemm<T, W>(C, Kp, V, dVb, Vp, 1, ws.ST.data(), Kp, ws.dKg.data(), Kp, Acc::store);
    kern::gemm<T, W>(C, C, V, dVb, Vp, 1, ws.vnT.data(), C, ws.dLk.data(), C, Acc::store, Tri::lower_c);
    mask_lower(ws.dLk.data(), C, /*strict=*/true);
  }
  // B6: dA = [dw_aux | du] [E | u0]^T (only the strictly lower part reaches L)
  kern::gemm<T, W>(C, C, KV, dWU, KV, 1, ws.rhsT.data(), C, ws.dA.data(), C, Acc::store,
                   Tri::lower_c);
  mask_lower(ws.dA.data(), C, /*strict=*/true);
  // B7: dL = -A^T dA A^T, strictly lower. T1 = dA A^T is needed strictly lower only (A^T's
  // nonzeros sit at rows a >= i, and i > j).
  kern::gemm<T, W>(C, C, C, ws.dA.data(), C, 1, AT, C, ws.T1.data(), C, Acc::store, Tri::lower_c);
  mask_lower(ws.T1.data(), C, /*strict=*/true);
  kern::gemm<T, W>(C, C, C, A, 1, C, ws.T1.data(), C, ws.dL.data(), C, Acc::store, Tri::lower_c);
  mask_lower(ws.dL.data(), C, /*strict=*/true, T(-1));
  // B8: [dE | du0] = A^T [dw_aux | du]
  kern::gemm<T, W>(C, KV, C, A, 1, C, dWU, KV, ws.dRHS.data(), KV, Acc::store);
  // B9: through the pair sums of F3
  intra_backward<T, W>(ws, n, tr);

  // B10: per token, through F2 and the decays; dG first (per channel), then the inputs.
  const T *q = ws.q.data(), *k = ws.k.data(), *e = ws.e.data(), *eG = ws.eG.data();
  const T *eGs = ws.eGs.data(), *rhs = ws.rhs.data(), *dRHS = ws.dRHS.data();
  const T *Qg = ws.Qg.data(), *Kd = ws.Kd.data(), *dQg = ws.dQg.data(), *dKd = ws.dKd.data();
  const T *deL = ws.deL.data(), *dqP = ws.dqP.data(), *dkLP = ws.dkLP.data();
  T* dG = ws.dG.data();
  T* last = dG + (n - 1) * Kp;  // dG_last collects the G_last terms of Kd and gamma
  for (index_t d = 0; d < Kp; d += W)
    st<T, W>(ws.dec.data() + d, ld<T, W>(ws.dgamma.data() + d) * ld<T, W>(ws.gl.data() + d));
  for (index_t i = 0; i < n; ++i)
    for (index_t d = 0; d < Kp; d += W) {
      const index_t x = i * Kp + d;
      const Vt kdk = ld<T, W>(dKd + x) * ld<T, W>(Kd + x);
      const Vt dg = ld<T, W>(dRHS + i * KV + d) * ld<T, W>(rhs + i * KV + d)  // dE E
                    + ld<T, W>(dQg + x) * ld<T, W>(Qg + x)                    // dQg Qg
                    - kdk                                                     // -dKd Kd
                    + ld<T, W>(e + x) * ld<T, W>(deL + x)                     // L: e de^L
                    + ld<T, W>(q + x) * ld<T, W>(dqP + x)                     // P: q dq^P
                    - ld<T, W>(k + x) * ld<T, W>(dkLP + x);                   // L, P: -k dk
      if (tr)  // T4, T5 through exp(G) of Kg and the row role of k in Lk: dKg Kg + k dkQ
        st<T, W>(dG + x, dg + ld<T, W>(ws.dKg.data() + x) * ld<T, W>(ws.Kg.data() + x)
                             + ld<T, W>(k + x) * ld<T, W>(ws.dkQ.data() + x));
      else
        st<T, W>(dG + x, dg);
      st<T, W>(ws.dec.data() + d, ld<T, W>(ws.dec.data() + d) + kdk);
    }
  for (index_t d = 0; d < Kp; d += W)
    st<T, W>(last + d, ld<T, W>(last + d) + ld<T, W>(ws.dec.data() + d));
  // B11: dg_t = sum_{i >= t} dG_i (in place, from the last token back)
  for (index_t i = n - 2; i >= 0; --i)
    for (index_t d = 0; d < Kp; d += W)
      st<T, W>(dG + i * Kp + d, ld<T, W>(dG + i * Kp + d) + ld<T, W>(dG + (i + 1) * Kp + d));

  // Per token: de = dE exp(G) + de^L;  dq (wrt the scaled q) = dQg exp(G) + dq^P;
  // dk = dKd exp(G_last - G) + dk^{L,P} + (beta | b) (.) de;  then through F2 to v and the gates.
  T *dqs = ws.dq_row.data(), *dks = ws.dk_row.data();
  for (index_t i = 0; i < n; ++i) {
    const index_t t = c0 + i, x = i * Kp;
    T dbeta = 0;
    for (index_t d = 0; d < K; ++d) {
      const T de = dRHS[i * KV + d] * eG[x + d] + deL[x + d];
      const T gate = j.op == Op::gdn2 ? ws.b[x + d] : ws.beta[i];
      dqs[d] = (dQg[x + d] * eG[x + d] + dqP[x + d]) * j.scale;  // x = scale q: dq = scale dx
      dks[d] = dKd[x + d] * eGs[x + d] + dkLP[x + d] + gate * de;
      if (tr) dks[d] += ws.dKg[x + d] * eG[x + d] + ws.dkQ[x + d];  // T4, T5
      if (j.op == Op::gdn2) j.db[t * j.ld_k + d] = de * k[x + d];  // e = b (.) k
      else dbeta += de * k[x + d];                                  // e = beta k
    }
    for (index_t c = 0; c < V; ++c) {
      const T du0 = dRHS[i * KV + Kp + c], vc = ws.v[i * Vp + c];
      if (j.op == Op::gdn2) {  // u0 = w (.) v
        j.dv[t * j.ld_v + c] = ws.w[i * Vp + c] * du0;
        j.dw[t * j.ld_v + c] = du0 * vc;
      } else {  // u0 = beta v
        j.dv[t * j.ld_v + c] = ws.beta[i] * du0;
        dbeta += du0 * vc;
      }
    }
    if (j.op != Op::gdn2) j.dbeta[t * j.ld_beta] = dbeta;
    T *dqt = j.dq + t * j.ld_k, *dkt = j.dk + t * j.ld_k;
    if (j.l2norm) {  // q, k were normalised inside: the chain rule through x / |x|
      l2_normalize_backward_row(j.q + t * j.ld_k, dqs, K, dqt);
      l2_normalize_backward_row(j.k + t * j.ld_k, dks, K, dkt);
    } else {
      std::copy(dqs, dqs + K, dqt);
      std::copy(dks, dks + K, dkt);
    }
    if (j.decay == Decay::channel) {
      std::copy(dG + x, dG + x + K, j.dg + t * j.ld_g);
    } else if (j.decay == Decay::scalar) {  // g repeated over the channels: dg = sum_d dg_d
      T s = 0;
      for (index_t d = 0; d < K; ++d) s += dG[x + d];
      j.dg[t * j.ld_g] = s;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// One (sequence, head): pass 1 forward (keep the entering states), pass 2 backward in reverse.
// ------------------------------------------------------------------------------------------------

template <class T, int W>
LINATTN_INLINE void run_head_backward(const BwdJob<T>& j, Workspace<T>& ws) {
  const index_t C = j.C, K = j.K, V = j.V, Kp = ws.Kp, Vp = ws.Vp, KpVp = Kp * Vp;
  const index_t nch = (j.len + C - 1) / C;
  T *S = ws.S.data(), *dS = ws.dS.data();
  for (index_t i = 0; i < Kp; ++i)
    for (index_t c = 0; c < Vp; ++c) {
      S[i * Vp + c] = (j.s0 && i < K && c < V) ? j.s0[i * V + c] : T(0);
      dS[i * Vp + c] = (j.dht && i < K && c < V) ? j.dht[i * V + c] : T(0);
    }
  if (ws.saved.size() < static_cast<size_t>(nch * KpVp)) ws.saved.resize(static_cast<size_t>(nch * KpVp));

  // Pass 1: the chunked forward, keeping the state entering each chunk.
  for (index_t ch = 0; ch < nch; ++ch) {
    const index_t c0 = ch * C, n = std::min(C, j.len - c0);
    std::copy(S, S + KpVp, ws.saved.data() + ch * KpVp);
    if (ch + 1 == nch) break;  // the last chunk's exit state is not needed
    chunk_forward_quantities<T, W>(j, ws, c0, n, /*with_P=*/false);
    advance_state<T, W>(ws, n);
  }
  // Pass 2: chunks in reverse, each recomputed from its entering state; dS carried backwards.
  for (index_t ch = nch - 1; ch >= 0; --ch) {
    const index_t c0 = ch * C, n = std::min(C, j.len - c0);
    std::copy(ws.saved.data() + ch * KpVp, ws.saved.data() + (ch + 1) * KpVp, S);
    chunk_forward_quantities<T, W>(j, ws, c0, n, /*with_P=*/true);
    chunk_backward_step<T, W>(j, ws, c0, n);
  }
  for (index_t i = 0; i < K; ++i)
    for (index_t c = 0; c < V; ++c) j.dh0[i * V + c] = dS[i * Vp + c];
}

// One version per instruction-set level; cpu::simd_level() picks (dispatch.hpp, simd_level.hpp).
LINATTN_CPU_DISPATCH(void, chunk_head_backward, (const BwdJob<float>& j, Workspace<float>& ws),
                     (j, ws), run_head_backward<float, VB / 4>(j, ws);)
LINATTN_CPU_DISPATCH(void, chunk_head_backward, (const BwdJob<double>& j, Workspace<double>& ws),
                     (j, ws), run_head_backward<double, VB / 8>(j, ws);)

// ------------------------------------------------------------------------------------------------
// The driver: validate, allocate the gradients, cut into (sequence, head) jobs, run them.
// ------------------------------------------------------------------------------------------------

template <class T>
ref::RecurrentGrads<T> run_backward(const std::string& fn, Op op, const Tensor<T>& q,
                                    const Tensor<T>& k, const Tensor<T>& v,
                                    const ref::Gates<T>& gates, const Tensor<T>& do_,
                                    const Tensor<T>& dht, const ChunkOptions<T>& opt,
                                    const Tensor<T>& dwritten, const Tensor<T>& dv_bar) {
  if (op == Op::linear_attn)
    fail(fn, "op", "one of delta_rule, gated_delta_rule, kda, gdn2", ref::op_name(op));
  const index_t N = ref::validate_recurrent(fn, op, q, k, v, gates, opt);
  if (opt.chunk_size != 16 && opt.chunk_size != 32 && opt.chunk_size != 64)
    fail(fn, "chunk_size", "one of 16, 32, 64", std::to_string(opt.chunk_size));
  if (opt.num_threads < 0)
    fail(fn, "num_threads", "0 (OpenMP's default) or a positive count",
         std::to_string(opt.num_threads));
  const index_t B = q.size(0), Tn = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  check_shape(fn, "do", do_, {B, Tn, H, V});
  check_finite(fn, "do", do_);
  if (dht.defined()) {
    check_shape(fn, "dht", dht, {N, H, K, V});
    check_finite(fn, "dht", dht);
  }
  if (dwritten.defined()) {
    check_shape(fn, "dwritten", dwritten, {B, Tn, H, V});
    check_finite(fn, "dwritten", dwritten);
  }
  if (dv_bar.defined()) {
    check_shape(fn, "dv_bar", dv_bar, {B, Tn, H, V});
    check_finite(fn, "dv_bar", dv_bar);
  }

  const Decay decay = detail::decay_of(op);
  ref::RecurrentGrads<T> gr;
  gr.dq = Tensor<T>({B, Tn, H, K});
  gr.dk = Tensor<T>({B, Tn, H, K});
  gr.dv = Tensor<T>({B, Tn, H, V});
  gr.dh0 = Tensor<T>({N, H, K, V});
  if (decay == Decay::scalar) gr.dg = Tensor<T>({B, Tn, H});
  if (decay == Decay::channel) gr.dg = Tensor<T>({B, Tn, H, K});
  if (op == Op::gdn2) gr.db = Tensor<T>({B, Tn, H, K}), gr.dw = Tensor<T>({B, Tn, H, V});
  else gr.dbeta = Tensor<T>({B, Tn, H});

  std::vector<BwdJob<T>> jobs;
  detail::for_each_head(N, H, Tn, opt.cu_seqlens, [&](index_t n, index_t h, index_t /*t0*/,
                                                      index_t len, index_t row) {
    BwdJob<T> j;
    j.op = op, j.decay = decay, j.len = len, j.K = K, j.V = V, j.C = opt.chunk_size;
    j.ld_k = H * K, j.ld_v = H * V;
    j.q = q.data() + row * K, j.k = k.data() + row * K, j.v = v.data() + row * V;
    j.do_ = do_.data() + row * V;
    if (dwritten.defined()) j.dwritten = dwritten.data() + row * V;
    if (dv_bar.defined()) j.dvbar = dv_bar.data() + row * V;
    j.dq = gr.dq.data() + row * K, j.dk = gr.dk.data() + row * K, j.dv = gr.dv.data() + row * V;
    if (decay != Decay::none) {
      const index_t per = decay == Decay::channel ? K : 1;
      j.g = gates.g.data() + row * per, j.dg = gr.dg.data() + row * per, j.ld_g = H * per;
    }
    if (op == Op::gdn2) {
      j.b = gates.b.data() + row * K, j.w = gates.w.data() + row * V;
      j.db = gr.db.data() + row * K, j.dw = gr.dw.data() + row * V;
    } else {
      j.beta = gates.beta.data() + row, j.dbeta = gr.dbeta.data() + row, j.ld_beta = H;
    }
    j.scale = opt.scale ? *opt.scale : T(1) / std::sqrt(T(K));
    j.l2norm = opt.use_qk_l2norm;
    if (opt.initial_state.defined()) j.s0 = opt.initial_state.data() + (n * H + h) * K * V;
    if (dht.defined()) j.dht = dht.data() + (n * H + h) * K * V;
    j.dh0 = gr.dh0.data() + (n * H + h) * K * V;
    jobs.push_back(j);
  });

  detail::for_each_job<Workspace<T>>(
      jobs, opt.num_threads, [&](Workspace<T>& ws) { ws.resize(opt.chunk_size, K, V); },
      [](const BwdJob<T>& j, Workspace<T>& ws) { chunk_head_backward(j, ws); });
  ref::require_finite_results<T>(fn, op, /*backward=*/true,
                                 {{"dq", &gr.dq}, {"dk", &gr.dk}, {"dv", &gr.dv}, {"dg", &gr.dg}, {"dbeta", &gr.dbeta},
                                  {"db", &gr.db}, {"dw", &gr.dw}, {"dh0", &gr.dh0}});
  return gr;
}

}  // namespace

template <class T>
ref::RecurrentGrads<T> chunk_backward(Op op, const Tensor<T>& q, const Tensor<T>& k,
                                      const Tensor<T>& v, const ref::Gates<T>& gates,
                                      const Tensor<T>& do_, const Tensor<T>& dht,
                                      const ChunkOptions<T>& opt, const Tensor<T>& dwritten,
                                      const Tensor<T>& dv_bar) {
  return run_backward<T>("chunk_backward", op, q, k, v, gates, do_, dht, opt, dwritten, dv_bar);
}

template <class T>
ref::RecurrentGrads<T> chunk_delta_rule_backward(const Tensor<T>& q, const Tensor<T>& k,
                                                 const Tensor<T>& v, const Tensor<T>& beta,
                                                 const Tensor<T>& do_, const Tensor<T>& dht,
                                                 const ChunkOptions<T>& opt,
                                                 const Tensor<T>& dwritten,
                                                 const Tensor<T>& dv_bar) {
  ref::Gates<T> gt;
  gt.beta = beta;
  return run_backward<T>("chunk_delta_rule_backward", Op::delta_rule, q, k, v, gt, do_, dht, opt,
                         dwritten, dv_bar);
}

template <class T>
ref::RecurrentGrads<T> chunk_gated_delta_rule_backward(const Tensor<T>& q, const Tensor<T>& k,
                                                       const Tensor<T>& v, const Tensor<T>& g,
                                                       const Tensor<T>& beta, const Tensor<T>& do_,
                                                       const Tensor<T>& dht,
                                                       const ChunkOptions<T>& opt,
                                                       const Tensor<T>& dwritten,
                                                       const Tensor<T>& dv_bar) {
  ref::Gates<T> gt;
  gt.g = g, gt.beta = beta;
  return run_backward<T>("chunk_gated_delta_rule_backward", Op::gated_delta_rule, q, k, v, gt, do_,
                         dht, opt, dwritten, dv_bar);
}

template <class T>
ref::RecurrentGrads<T> chunk_kda_backward(const Tensor<T>& q, const Tensor<T>& k,
                                          const Tensor<T>& v, const Tensor<T>& g,
                                          const Tensor<T>& beta, const Tensor<T>& do_,
                                          const Tensor<T>& dht, const ChunkOptions<T>& opt,
                                          const Tensor<T>& dwritten, const Tensor<T>& dv_bar) {
  ref::Gates<T> gt;
  gt.g = g, gt.beta = beta;
  return run_backward<T>("chunk_kda_backward", Op::kda, q, k, v, gt, do_, dht, opt, dwritten,
                         dv_bar);
}

template <class T>
ref::RecurrentGrads<T> chunk_gdn2_backward(const Tensor<T>& q, const Tensor<T>& k,
                                           const Tensor<T>& v, const Tensor<T>& g,
                                           const Tensor<T>& b, const Tensor<T>& w,
                                           const Tensor<T>& do_, const Tensor<T>& dht,
                                           const ChunkOptions<T>& opt, const Tensor<T>& dwritten,
                                           const Tensor<T>& dv_bar) {
  ref::Gates<T> gt;
  gt.g = g, gt.b = b, gt.w = w;
  return run_backward<T>("chunk_gdn2_backward", Op::gdn2, q, k, v, gt, do_, dht, opt, dwritten,
                         dv_bar);
}

#define LINATTN_INSTANTIATE(T)                                                                    \
  template ref::RecurrentGrads<T> chunk_backward<T>(Op, const Tensor<T>&, const Tensor<T>&,       \
                                                    const Tensor<T>&, const ref::Gates<T>&,       \
                                                    const Tensor<T>&, const Tensor<T>&,           \
                                                    const ChunkOptions<T>&, const Tensor<T>&, const Tensor<T>&);                      \
  template ref::RecurrentGrads<T> chunk_delta_rule_backward<T>(                                   \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,   \
      const Tensor<T>&, const ChunkOptions<T>&, const Tensor<T>&, const Tensor<T>&);                                                  \
  template ref::RecurrentGrads<T> chunk_gated_delta_rule_backward<T>(                             \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,   \
      const Tensor<T>&, const Tensor<T>&, const ChunkOptions<T>&, const Tensor<T>&, const Tensor<T>&);                                \
  template ref::RecurrentGrads<T> chunk_kda_backward<T>(                                          \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,   \
      const Tensor<T>&, const Tensor<T>&, const ChunkOptions<T>&, const Tensor<T>&, const Tensor<T>&);                                \
  template ref::RecurrentGrads<T> chunk_gdn2_backward<T>(                                         \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,   \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const ChunkOptions<T>&, const Tensor<T>&, const Tensor<T>&);
LINATTN_INSTANTIATE(float)
LINATTN_INSTANTIATE(double)
#undef LINATTN_INSTANTIATE

}  // namespace linattn::cpu
