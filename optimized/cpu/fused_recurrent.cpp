// optimized/cpu/fused_recurrent.cpp -- the token-by-token kernels of fused_recurrent.hpp.
//
// All four operators are one update in the S layout (K x V state, o = S^T q):
//   rd_t      = e_t^T Diag(alpha_t) S_{t-1}                  read of the decayed state
//   written_t = u0_t - gamma_t rd_t                          the vector written along k_t
//   S_t       = Diag(alpha_t) S_{t-1} + k_t written_t^T
//   o_t       = S_t^T (scale q_t)                            (Eq.8: the new state)
// OPERATOR-SPECIFIC: DeltaNet/GDN/KDA (Eqs.14-20): e = k, u0 = beta v, gamma = beta, so
// written = beta (v - v_bar) with v_bar = rd; GDN2 (Eqs.21-24): e = b (.) k, u0 = w (.) v,
// gamma = 1. alpha_t = exp(g_t): 1 (DeltaNet), a scalar (GDN) or per key channel (KDA, GDN2).
//
// Each column c of S evolves on its own (every term above is column-wise), so the state is
// processed in column blocks of NV vectors (64 floats with AVX-512): a K x 64 block of S stays in
// L1 while a block of TB tokens runs through it. Per token, one pass over the block's K rows
// updates S, accumulates o_t and already accumulates the NEXT token's read rd_{t+1}, so each
// element of S is loaded and stored once per token.
#include "optimized/cpu/fused_recurrent.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "optimized/cpu/dispatch.hpp"
#include "optimized/cpu/jobs.hpp"
#include "optimized/cpu/simd.hpp"

namespace linattn::cpu {
namespace {

using detail::Decay;
using detail::ld;
using detail::st;
using detail::HeadJob;
using ref::Op;
using simd::PAD;
using simd::vec;

constexpr index_t TB = 32;  // tokens per block

/// Per-thread buffers. Token rows (TB + 1 of them: the last is the next block's first token,
/// whose read rd is accumulated during the last token of this block) are Kp or Vp long.
template <class T>
struct Workspace {
  index_t Kp = 0, Vp = 0;
  std::vector<T> S, rd, vb;                // state K x Vp; pending reads (Vp)
  std::vector<T> qs, kk, al, er, kr;       // per token: scale q, k, alpha, e (.) alpha, k (.) alpha
  std::vector<T> z, vv, gam, as;           // u0, v (trace), gamma, scalar alpha
  std::vector<T> obuf, wbuf, vbbuf;        // o, written, v_bar of the block (TB x Vp)
  void resize(index_t K, index_t V) {
    Kp = simd::round_up(K, PAD), Vp = simd::round_up(V, PAD);
    auto sz = [](std::vector<T>& x, index_t n) { x.assign(static_cast<size_t>(n), T(0)); };
    sz(S, K * Vp), sz(rd, Vp), sz(vb, Vp);
    for (auto* x : {&qs, &kk, &al, &er, &kr}) sz(*x, (TB + 1) * Kp);
    for (auto* x : {&z, &vv}) sz(*x, (TB + 1) * Vp);
    sz(gam, TB + 1), sz(as, TB + 1);
    for (auto* x : {&obuf, &wbuf, &vbbuf}) sz(*x, TB * Vp);
  }
};

/// Pack token t of the job into row `row` of the token buffers (OPERATOR-SPECIFIC part here).
template <class T, int W, Decay D>
LINATTN_INLINE void pack_token(const HeadJob<T>& j, Workspace<T>& ws, index_t t, index_t row) {
  using Vt = vec<T, W>;
  const index_t K = j.K, V = j.V, Kp = ws.Kp, Vp = ws.Vp;
  T *qs = ws.qs.data() + row * Kp, *kk = ws.kk.data() + row * Kp, *al = ws.al.data() + row * Kp;
  T *er = ws.er.data() + row * Kp, *kr = ws.kr.data() + row * Kp;
  T *z = ws.z.data() + row * Vp, *vv = ws.vv.data() + row * Vp;
  if (t >= j.len) {  // past the end: reads nothing
    std::fill(er, er + Kp, T(0)), std::fill(kr, kr + Kp, T(0));
    return;
  }
  simd::copy_row<T, W>(j.q + t * j.ld_k, K, Kp, qs);
  simd::copy_row<T, W>(j.k + t * j.ld_k, K, Kp, kk);
  simd::copy_row<T, W>(j.v + t * j.ld_v, V, Vp, vv);
  T qn = 1, kn = 1;
  if (j.l2norm) {  // as ref::l2_normalize: x / sqrt(sum x^2 + 1e-6)
    T sq = 0, sk = 0;
    for (index_t d = 0; d < K; ++d) sq += qs[d] * qs[d], sk += kk[d] * kk[d];
    qn = T(1) / std::sqrt(sq + T(1e-6)), kn = T(1) / std::sqrt(sk + T(1e-6));
  }
  const Vt vq = simd::splat<T, W>(qn), vk = simd::splat<T, W>(kn), vs = simd::splat<T, W>(j.scale);
  for (index_t d = 0; d < Kp; d += W) {
    st<T, W>(qs + d, (ld<T, W>(qs + d) * vq) * vs);  // (q / |q|) scale, as the reference
    st<T, W>(kk + d, ld<T, W>(kk + d) * vk);
  }
  Vt a = simd::splat<T, W>(T(1));
  if constexpr (D == Decay::channel) {
    simd::copy_row<T, W>(j.g + t * j.ld_g, K, Kp, al);
    for (index_t d = 0; d < Kp; d += W) st<T, W>(al + d, simd::vexp<T, W>(ld<T, W>(al + d)));
  } else if constexpr (D == Decay::scalar) {
    ws.as[row] = std::exp(j.g[t * j.ld_g]);
    a = simd::splat<T, W>(ws.as[row]);
  } else {
    ws.as[row] = T(1);
  }
  for (index_t d = 0; d < Kp; d += W) {
    const Vt ad = D == Decay::channel ? ld<T, W>(al + d) : a, kd = ld<T, W>(kk + d);
    st<T, W>(kr + d, kd * ad);
    st<T, W>(er + d, kd * ad);  // e = k (DeltaNet, GDN, KDA)
  }
  if (j.op == Op::gdn2) {  // e = b (.) k, u0 = w (.) v, gamma = 1
    const T *bt = j.b + t * j.ld_k, *wt = j.w + t * j.ld_v;
    for (index_t d = 0; d < K; ++d) er[d] *= bt[d];
    for (index_t c = 0; c < V; ++c) z[c] = wt[c] * vv[c];
    ws.gam[row] = T(1);
  } else {  // u0 = beta v, gamma = beta
    const T bt = j.beta[t * j.ld_beta];
    const Vt vb = simd::splat<T, W>(bt);
    for (index_t c = 0; c < Vp; c += W) st<T, W>(z + c, ld<T, W>(vv + c) * vb);
    ws.gam[row] = bt;
  }
}

/// Run tokens [0, tb) of the packed block through columns [c0, c0 + NV W) of S.
/// EXTRA: also accumulate the trace read v_bar = k^T Diag(alpha) S (GDN2 only: elsewhere e = k
/// and v_bar = rd).
template <class T, int W, int NV, Decay D, bool EXTRA>
LINATTN_INLINE void run_columns(Workspace<T>& ws, index_t K, index_t tb, index_t c0, bool trace) {
  using Vt = vec<T, W>;
  const index_t Kp = ws.Kp, Vp = ws.Vp;
  T* S = ws.S.data() + c0;
  Vt rd[NV], vb[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    rd[v] = simd::load<T, W>(ws.rd.data() + c0 + v * W);
    vb[v] = EXTRA ? simd::load<T, W>(ws.vb.data() + c0 + v * W) : rd[v];
  }
  for (index_t tt = 0; tt < tb; ++tt) {
    const T *qs = ws.qs.data() + tt * Kp, *kk = ws.kk.data() + tt * Kp, *al = ws.al.data() + tt * Kp;
    const T *er = ws.er.data() + (tt + 1) * Kp, *kr = ws.kr.data() + (tt + 1) * Kp;
    const Vt gam = simd::splat<T, W>(ws.gam[tt]), as = simd::splat<T, W>(ws.as[tt]);
    Vt wr[NV], o[NV], rn[NV], vn[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      wr[v] = simd::load<T, W>(ws.z.data() + tt * Vp + c0 + v * W) - gam * rd[v];
      o[v] = rn[v] = vn[v] = Vt{};
      if (trace) {
        simd::store<T, W>(ws.wbuf.data() + tt * Vp + c0 + v * W, wr[v]);
        simd::store<T, W>(ws.vbbuf.data() + tt * Vp + c0 + v * W, EXTRA ? vb[v] : rd[v]);
      }
    }
    for (index_t i = 0; i < K; ++i) {
      const Vt ki = simd::splat<T, W>(kk[i]), qi = simd::splat<T, W>(qs[i]);
      const Vt ei = simd::splat<T, W>(er[i]);
      [[maybe_unused]] const Vt ai = D == Decay::channel ? simd::splat<T, W>(al[i]) : as;
      T* Si = S + i * Vp;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        Vt s = simd::load<T, W>(Si + v * W);
        if constexpr (D == Decay::none) s += ki * wr[v];
        else s = s * ai + ki * wr[v];  // S_t = Diag(alpha) S_{t-1} + k written^T
        simd::store<T, W>(Si + v * W, s);
        o[v] += qi * s;   // o_t = S_t^T (scale q_t)
        rn[v] += ei * s;  // rd_{t+1} = (e (.) alpha)_{t+1}^T S_t
        if constexpr (EXTRA) vn[v] += simd::splat<T, W>(kr[i]) * s;
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      simd::store<T, W>(ws.obuf.data() + tt * Vp + c0 + v * W, o[v]);
      rd[v] = rn[v];
      if constexpr (EXTRA) vb[v] = vn[v];
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    simd::store<T, W>(ws.rd.data() + c0 + v * W, rd[v]);
    if constexpr (EXTRA) simd::store<T, W>(ws.vb.data() + c0 + v * W, vb[v]);
  }
}

template <class T, int W, Decay D, bool EXTRA>
LINATTN_INLINE void run_block(Workspace<T>& ws, index_t K, index_t tb, bool trace) {
  constexpr int NV = W * sizeof(T) == 64 ? 4 : 2;  // 64 floats (AVX-512), 16 floats (AVX2)
  index_t c0 = 0;
  for (; c0 + NV * W <= ws.Vp; c0 += NV * W) run_columns<T, W, NV, D, EXTRA>(ws, K, tb, c0, trace);
  for (; c0 < ws.Vp; c0 += W) run_columns<T, W, 1, D, EXTRA>(ws, K, tb, c0, trace);
}

template <class T, int W, Decay D>
LINATTN_INLINE void recurrent_head(const HeadJob<T>& j, Workspace<T>& ws) {
  const index_t K = j.K, V = j.V, Vp = ws.Vp;
  const bool trace = j.v_bar != nullptr, extra = trace && j.op == Op::gdn2;
  T* S = ws.S.data();
  for (index_t i = 0; i < K; ++i)
    for (index_t c = 0; c < Vp; ++c) S[i * Vp + c] = (j.s0 && c < V) ? j.s0[i * V + c] : T(0);
  std::fill(ws.z.begin(), ws.z.end(), T(0));  // padding columns of u0 stay 0
  for (index_t t0 = 0; t0 < j.len; t0 += TB) {
    const index_t tb = std::min(TB, j.len - t0);
    for (index_t tt = 0; tt <= tb; ++tt) pack_token<T, W, D>(j, ws, t0 + tt, tt);
    if (t0 == 0) {  // the first token's reads, from the initial state
      for (index_t c = 0; c < Vp; ++c) {
        T r = 0, b = 0;
        for (index_t i = 0; i < K; ++i) r += ws.er[i] * S[i * Vp + c], b += ws.kr[i] * S[i * Vp + c];
        ws.rd[static_cast<size_t>(c)] = r, ws.vb[static_cast<size_t>(c)] = b;
      }
    }
    if (extra) run_block<T, W, D, true>(ws, K, tb, trace);
    else run_block<T, W, D, false>(ws, K, tb, trace);
    for (index_t tt = 0; tt < tb; ++tt) {
      const index_t t = t0 + tt;
      std::copy(ws.obuf.data() + tt * Vp, ws.obuf.data() + tt * Vp + V, j.o + t * j.ld_v);
      if (trace)
        for (index_t c = 0; c < V; ++c) {
          const T vb = ws.vbbuf[tt * Vp + c];
          j.v_bar[t * j.ld_v + c] = vb;
          j.r[t * j.ld_v + c] = ws.vv[tt * Vp + c] - vb;
          j.written[t * j.ld_v + c] = ws.wbuf[tt * Vp + c];
        }
    }
  }
  if (j.s_final)
    for (index_t i = 0; i < K; ++i)
      for (index_t c = 0; c < V; ++c) j.s_final[i * V + c] = S[i * Vp + c];
}

#define LINATTN_RECURRENT_BODY(T, W)                                  \
  switch (detail::decay_of(j.op)) {                                   \
    case Decay::none: return recurrent_head<T, W, Decay::none>(j, ws);     \
    case Decay::scalar: return recurrent_head<T, W, Decay::scalar>(j, ws); \
    case Decay::channel: return recurrent_head<T, W, Decay::channel>(j, ws); \
  }
LINATTN_CPU_DISPATCH(void, recurrent_head_mv, (const HeadJob<float>& j, Workspace<float>& ws),
                         (j, ws),
                         LINATTN_RECURRENT_BODY(float, VB / 4))
LINATTN_CPU_DISPATCH(void, recurrent_head_mv,
                         (const HeadJob<double>& j, Workspace<double>& ws), (j, ws),
                         LINATTN_RECURRENT_BODY(double, VB / 8))
#undef LINATTN_RECURRENT_BODY

template <class T>
ref::RecurrentOutput<T> run_fused(const std::string& fn, Op op, const Tensor<T>& q,
                                  const Tensor<T>& k, const Tensor<T>& v,
                                  const ref::Gates<T>& gates, const ref::RecurrentOptions<T>& opt) {
  if (op == Op::linear_attn)
    fail(fn, "op", "one of delta_rule, gated_delta_rule, kda, gdn2", ref::op_name(op));
  const index_t N = ref::validate_recurrent(fn, op, q, k, v, gates, opt);
  ref::RecurrentOutput<T> out = detail::make_outputs(q, v, opt, N);
  const std::vector<HeadJob<T>> jobs = detail::make_jobs(op, q, k, v, gates, opt, N, out);
  const index_t K = q.size(3), V = v.size(3);
  detail::for_each_job<Workspace<T>>(
      jobs, 0, [&](Workspace<T>& ws) { ws.resize(K, V); },
      [](const HeadJob<T>& j, Workspace<T>& ws) { recurrent_head_mv(j, ws); });
  ref::require_finite_results<T>(fn, op, false, {{"o", &out.o}, {"final_state", &out.final_state}});
  return out;
}

}  // namespace

template <class T>
ref::RecurrentOutput<T> fused_recurrent_forward(Op op, const Tensor<T>& q, const Tensor<T>& k,
                                                const Tensor<T>& v, const ref::Gates<T>& gates,
                                                const ref::RecurrentOptions<T>& opt) {
  return run_fused<T>("fused_recurrent_forward", op, q, k, v, gates, opt);
}

template <class T>
ref::RecurrentOutput<T> fused_recurrent_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                                   const Tensor<T>& v, const Tensor<T>& beta,
                                                   const ref::RecurrentOptions<T>& opt) {
  ref::Gates<T> gt;
  gt.beta = beta;
  return run_fused<T>("fused_recurrent_delta_rule", Op::delta_rule, q, k, v, gt, opt);
}

template <class T>
ref::RecurrentOutput<T> fused_recurrent_gated_delta_rule(const Tensor<T>& q, const Tensor<T>& k,
                                                         const Tensor<T>& v, const Tensor<T>& g,
                                                         const Tensor<T>& beta,
                                                         const ref::RecurrentOptions<T>& opt) {
  ref::Gates<T> gt;
  gt.g = g, gt.beta = beta;
  return run_fused<T>("fused_recurrent_gated_delta_rule", Op::gated_delta_rule, q, k, v, gt, opt);
}

template <class T>
ref::RecurrentOutput<T> fused_recurrent_kda(const Tensor<T>& q, const Tensor<T>& k,
                                            const Tensor<T>& v, const Tensor<T>& g,
                                            const Tensor<T>& beta,
                                            const ref::RecurrentOptions<T>& opt) {
  ref::Gates<T> gt;
  gt.g = g, gt.beta = beta;
  return run_fused<T>("fused_recurrent_kda", Op::kda, q, k, v, gt, opt);
}

template <class T>
ref::RecurrentOutput<T> fused_recurrent_gdn2(const Tensor<T>& q, const Tensor<T>& k,
                                             const Tensor<T>& v, const Tensor<T>& g,
                                             const Tensor<T>& b, const Tensor<T>& w,
                                             const ref::RecurrentOptions<T>& opt) {
  ref::Gates<T> gt;
  gt.g = g, gt.b = b, gt.w = w;
  return run_fused<T>("fused_recurrent_gdn2", Op::gdn2, q, k, v, gt, opt);
}

#define LINATTN_INSTANTIATE(T)                                                                  \
  template ref::RecurrentOutput<T> fused_recurrent_forward<T>(                                  \
      Op, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const ref::Gates<T>&,           \
      const ref::RecurrentOptions<T>&);                                                         \
  template ref::RecurrentOutput<T> fused_recurrent_delta_rule<T>(                               \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,                   \
      const ref::RecurrentOptions<T>&);                                                         \
  template ref::RecurrentOutput<T> fused_recurrent_gated_delta_rule<T>(                         \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, \
      const ref::RecurrentOptions<T>&);                                                         \
  template ref::RecurrentOutput<T> fused_recurrent_kda<T>(                                      \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, \
      const ref::RecurrentOptions<T>&);                                                         \
  template ref::RecurrentOutput<T> fused_recurrent_gdn2<T>(                                     \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, \
      const Tensor<T>&, const ref::RecurrentOptions<T>&);
LINATTN_INSTANTIATE(float)
LINATTN_INSTANTIATE(double)
#undef LINATTN_INSTANTIATE

}  // namespace linattn::cpu
