// walkthroughs/lm/mixer_linear.hpp -- the linear-attention token mixers (DeltaNet, GDN, KDA, GDN2)
// with the layer structure of the authors' code (SPEC section 5), and the CLER hook (SPEC section 3).
//
//   P = x W_in^T                      one fused projection; per token the columns are
//                                     [q (Hk Dk) | k (Hk Dk) | v (Hv Dv) | gate logits ... | z (Hv Dv)]
//   q, k, v = SiLU(ShortConv4(.))     causal depthwise convolution, kernel 4, then SiLU
//   q, k <- q / sqrt(||q||^2 + 1e-6)  L2 normalisation per head
//   beta = sigmoid(.)                 per value head (DeltaNet, GDN, KDA)
//   GDN:  g = -exp(A_log) softplus(a + dt_bias)            per head;    A ~ U(1, 16), dt_bias = 1
//   KDA:  g = -exp(A_log_h) softplus(f + dt_bias)          per key channel, f = W_f2 f1 with f1 from
//                                                          the projection (low rank d_model -> Dv -> Hv Dk)
//   GDN2: b = sigmoid(.) per key channel, w = sigmoid(.) per value channel, decay as KDA
//   o = Core(q, k, v, gates)          the recurrence, fla layout, scale Dk^-1/2 (delta_core.hpp,
//                                     or the chunked CPU kernels, or the naive reference)
//   y = RMSNorm_Dv(o) * act(z)        per head; act = SiLU (GDN, GDN2), sigmoid (KDA); DeltaNet: no gate
//   out = y W_out^T
// Grouped values (GVA): Hv value heads share Hk query/key heads (Hv / Hk per group), as the 350M
// model's 4 key heads and 8 value heads; the core runs Hv heads with q, k repeated per group.
// Simplifications, stated: KDA's output gate is a full-rank slice of the fused projection (the
// Kimi layer uses a low-rank one); the output RMSNorm eps is the model's norm eps.
//
// CLER (Eqs.27-28): when the model sets route_in (the routed signal s of the layer p(l)), the
// value written is v~ = v + Gamma rho(s) with Gamma a learned scalar (initialised to 0) and rho the
// identity or an RMS normalisation per token and head; the gradient of s goes to droute_in. The
// layer's own trace (r or written, RoutedError) is in `trace` for the next layer or for CLER-H;
// its gradient reaches the recurrence through the per-token core (delta_core.hpp) or the chunked
// kernels' trace cotangents (`--core chunk`, optimized/cpu/chunk_backward.hpp).
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "optimized/cpu/chunk_backward.hpp"
#include "reference/recurrent_backward.hpp"
#include "walkthroughs/lm/config.hpp"
#include "walkthroughs/lm/delta_core.hpp"
#include "walkthroughs/lm/modules.hpp"

namespace linattn::lm {

inline Op op_of(MixerKind m) {
  switch (m) {
    case MixerKind::deltanet: return Op::delta_rule;
    case MixerKind::gdn: return Op::gated_delta_rule;
    case MixerKind::kda: return Op::kda;
    case MixerKind::gdn2: return Op::gdn2;
    case MixerKind::softmax: break;
  }
  fail("op_of", "mixer", "a linear mixer", "softmax");
}

template <class T>
struct LinearMixer : Mixer<T> {
  MixerKind kind;
  Op op;
  index_t C, Hk, Hv, Dk, Dv, G, KW;
  std::string core;
  T eps;
  bool want_trace, route_written;
  // projection layout (column offsets in P; -1: absent)
  index_t off_q = 0, off_k, off_v, off_beta = -1, off_a = -1, off_f1 = -1, off_b = -1, off_w = -1,
          off_z = -1, Wp = 0, Cqkv;
  int w_in, w_f2 = -1, w_out, conv, A_log = -1, dt_bias = -1, onorm, gamma = -1;
  GateAct zact = GateAct::silu;
  bool rho_rms;

  // routing hooks, set by the model
  const T* route_in = nullptr;  ///< CLER: s_{p(l)} (N, Hv Dv), or null
  T* droute_in = nullptr;       ///< CLER: d s_{p(l)} accumulates here
  std::vector<T> trace;         ///< this layer's routed signal s (N, Hv Dv): r or written
  std::vector<T> dtrace;        ///< its gradient, accumulated by the model before backward
  std::vector<T> dv_extra;      ///< CLVR: gradient of v from the residual injection

  // activations
  std::vector<T> P, qkv_in, qkv_pre, qkv_act, qn, kn, rq, rk, v, vt, srho, srstd;
  std::vector<T> beta, u, g, f1, f, bg, wg, qe, ke, o, z, onormed, orstd, y, Wprev;
  // gradient scratch
  std::vector<T> dP, dy, do_, dz, dqe, dke, dvt, dg, dbeta, db, dw, dqn, dkn, dqkv, dqkv_in, df, df1;

  /// has_route_input: this layer receives CLER's routed signal (it has a routable predecessor).
  LinearMixer(ParamStore<T>& ps, const ModelConfig& c, const std::string& pre, bool has_route_input)
      : kind(c.linear_mixer), op(op_of(c.linear_mixer)), C(c.d_model), Hk(c.lin_heads),
        Hv(c.lin_v_heads), Dk(c.lin_dk), Dv(c.lin_dv), G(c.lin_v_heads / c.lin_heads),
        KW(c.conv_size), core(c.core), eps(T(c.norm_eps)),
        want_trace(c.needs_trace()),
        route_written(c.routed_error == "written"), rho_rms(c.rho == "rms") {
    off_k = Hk * Dk, off_v = 2 * Hk * Dk, Cqkv = 2 * Hk * Dk + Hv * Dv;
    Wp = Cqkv;
    if (kind != MixerKind::gdn2) off_beta = Wp, Wp += Hv;
    if (kind == MixerKind::gdn) off_a = Wp, Wp += Hv;
    if (kind == MixerKind::kda || kind == MixerKind::gdn2) off_f1 = Wp, Wp += Dv;
    if (kind == MixerKind::gdn2) off_b = Wp, Wp += Hv * Dk, off_w = Wp, Wp += Hv * Dv;
    if (kind != MixerKind::deltanet) off_z = Wp, Wp += Hv * Dv;
    zact = kind == MixerKind::kda ? GateAct::sigmoid : GateAct::silu;

    const Init hid{c.init_std}, outp{c.init_std / std::sqrt(2.0 * double(c.n_layer))}, one{0, 1.0};
    Init conv_init;
    conv_init.custom = Init::Custom::uniform;
    conv_init.lo = -1.0 / std::sqrt(double(KW)), conv_init.hi = 1.0 / std::sqrt(double(KW));
    Init alog;
    alog.custom = Init::Custom::log_uniform, alog.lo = 1, alog.hi = 16;
    w_in = ps.add(pre + "lin.w_in", Wp, C, ParamKind::matrix, hid);
    conv = ps.add(pre + "lin.conv", Cqkv, KW, ParamKind::vector, conv_init);
    if (kind != MixerKind::deltanet) A_log = ps.add(pre + "lin.A_log", 1, Hv, ParamKind::vector, alog);
    if (kind == MixerKind::gdn) dt_bias = ps.add(pre + "lin.dt_bias", 1, Hv, ParamKind::vector, one);
    if (off_f1 >= 0) {
      w_f2 = ps.add(pre + "lin.w_f2", Hv * Dk, Dv, ParamKind::matrix, hid);
      dt_bias = ps.add(pre + "lin.dt_bias", 1, Hv * Dk, ParamKind::vector, one);
    }
    onorm = ps.add(pre + "lin.onorm", 1, Dv, ParamKind::vector, one);
    w_out = ps.add(pre + "lin.w_out", C, Hv * Dv, ParamKind::matrix, outp);
    if (c.cler() && has_route_input) gamma = ps.add(pre + "lin.Gamma", 1, 1, ParamKind::vector, Init{0, 0.0});
  }

  index_t HVD() const { return Hv * Dv; }
  /// The write value v (post-conv, post-SiLU, before CLER): what CLVR routes.
  const std::vector<T>& value() const { return v; }

  ref::Gates<T> tensor_gates(index_t B, index_t Tn) {
    ref::Gates<T> gt;
    if (op == Op::gated_delta_rule) gt.g = Tensor<T>::wrap(g.data(), {B, Tn, Hv});
    if (op == Op::kda || op == Op::gdn2) gt.g = Tensor<T>::wrap(g.data(), {B, Tn, Hv, Dk});
    if (op != Op::gdn2) gt.beta = Tensor<T>::wrap(beta.data(), {B, Tn, Hv});
    if (op == Op::gdn2) {
      gt.b = Tensor<T>::wrap(bg.data(), {B, Tn, Hv, Dk});
      gt.w = Tensor<T>::wrap(wg.data(), {B, Tn, Hv, Dv});
    }
    return gt;
  }
  CoreGates<T> core_gates() const {
    return {g.empty() ? nullptr : g.data(), beta.empty() ? nullptr : beta.data(),
            bg.empty() ? nullptr : bg.data(), wg.empty() ? nullptr : wg.data()};
  }

  void forward(ParamStore<T>& ps, const T* x, T* out, index_t B, index_t Tn) override {
    const index_t N = B * Tn, HV = HVD(), HK = Hk * Dk;
    auto sz = [](std::vector<T>& a, index_t n) { a.resize(static_cast<size_t>(n)); };
    sz(P, N * Wp), sz(qkv_in, N * Cqkv), sz(qkv_pre, N * Cqkv), sz(qkv_act, N * Cqkv);
    // pass 1: fused projection, short convolution + SiLU on [q | k | v]
    linear_forward(P.data(), x, ps.p(w_in), N, C, Wp);
    for (index_t n = 0; n < N; ++n)
      std::copy(P.data() + n * Wp, P.data() + n * Wp + Cqkv, qkv_in.data() + n * Cqkv);
    shortconv_forward(qkv_act.data(), qkv_pre.data(), qkv_in.data(), ps.p(conv), B, Tn, Cqkv, KW);
    // pass 2: split, L2-normalise q and k per head
    sz(qn, N * HK), sz(kn, N * HK), sz(rq, N * Hk), sz(rk, N * Hk), sz(v, N * HV), sz(vt, N * HV);
    std::vector<T> tmp(static_cast<size_t>(N * HK));
    for (index_t n = 0; n < N; ++n) std::copy_n(qkv_act.data() + n * Cqkv + off_q, HK, tmp.data() + n * HK);
    l2norm_forward(qn.data(), rq.data(), tmp.data(), N * Hk, Dk, T(1e-6));
    for (index_t n = 0; n < N; ++n) std::copy_n(qkv_act.data() + n * Cqkv + off_k, HK, tmp.data() + n * HK);
    l2norm_forward(kn.data(), rk.data(), tmp.data(), N * Hk, Dk, T(1e-6));
    for (index_t n = 0; n < N; ++n) std::copy_n(qkv_act.data() + n * Cqkv + off_v, HV, v.data() + n * HV);
    // pass 3: CLER, v~ = v + Gamma rho(s_{p(l)}) (Eq.27)
    vt = v;
    if (gamma >= 0 && route_in) {
      sz(srho, N * HV);
      if (rho_rms) {
        sz(srstd, N * Hv);
        const std::vector<T> ones(static_cast<size_t>(Dv), T(1));
        rmsnorm_forward(srho.data(), srstd.data(), route_in, ones.data(), N * Hv, Dv, T(1e-6));
      } else {
        std::copy(route_in, route_in + N * HV, srho.begin());
      }
      const T G_ = ps.p(gamma)[0];
      for (index_t i = 0; i < N * HV; ++i) vt[i] += G_ * srho[i];
    }
    // pass 4: gates
    if (off_beta >= 0) {
      sz(beta, N * Hv);
      for (index_t n = 0; n < N; ++n)
        for (index_t h = 0; h < Hv; ++h) beta[n * Hv + h] = sigmoid(P[n * Wp + off_beta + h]);
    }
    if (kind == MixerKind::gdn) {  // g = -exp(A_log) softplus(a + dt_bias), per head
      sz(u, N * Hv), sz(g, N * Hv);
      for (index_t n = 0; n < N; ++n)
        for (index_t h = 0; h < Hv; ++h) {
          u[n * Hv + h] = P[n * Wp + off_a + h] + ps.p(dt_bias)[h];
          g[n * Hv + h] = -std::exp(ps.p(A_log)[h]) * softplus(u[n * Hv + h]);
        }
    }
    if (off_f1 >= 0) {  // per key channel: f = W_f2 f1, g = -exp(A_log_h) softplus(f + dt_bias)
      sz(f1, N * Dv), sz(f, N * Hv * Dk), sz(u, N * Hv * Dk), sz(g, N * Hv * Dk);
      for (index_t n = 0; n < N; ++n) std::copy_n(P.data() + n * Wp + off_f1, Dv, f1.data() + n * Dv);
      linear_forward(f.data(), f1.data(), ps.p(w_f2), N, Dv, Hv * Dk);
      for (index_t n = 0; n < N; ++n)
        for (index_t h = 0; h < Hv; ++h)
          for (index_t i = 0; i < Dk; ++i) {
            const index_t j = (n * Hv + h) * Dk + i;
            u[j] = f[j] + ps.p(dt_bias)[h * Dk + i];
            g[j] = -std::exp(ps.p(A_log)[h]) * softplus(u[j]);
          }
    }
    if (kind == MixerKind::gdn2) {
      sz(bg, N * Hv * Dk), sz(wg, N * HV);
      for (index_t n = 0; n < N; ++n) {
        for (index_t i = 0; i < Hv * Dk; ++i) bg[n * Hv * Dk + i] = sigmoid(P[n * Wp + off_b + i]);
        for (index_t i = 0; i < HV; ++i) wg[n * HV + i] = sigmoid(P[n * Wp + off_w + i]);
      }
    }
    // pass 5: the recurrence on Hv heads (q, k repeated over each group of value heads)
    sz(qe, N * Hv * Dk), sz(ke, N * Hv * Dk), sz(o, N * HV);
    for (index_t n = 0; n < N; ++n)
      for (index_t h = 0; h < Hv; ++h) {
        std::copy_n(qn.data() + (n * Hk + h / G) * Dk, Dk, qe.data() + (n * Hv + h) * Dk);
        std::copy_n(kn.data() + (n * Hk + h / G) * Dk, Dk, ke.data() + (n * Hv + h) * Dk);
      }
    core_forward_dispatch(B, Tn);
    // pass 6: per-head RMSNorm, output gate, output projection
    sz(y, N * HV), sz(onormed, N * HV), sz(orstd, N * Hv);
    if (off_z >= 0) {
      sz(z, N * HV);
      for (index_t n = 0; n < N; ++n) std::copy_n(P.data() + n * Wp + off_z, HV, z.data() + n * HV);
      head_norm_gate_forward(y.data(), onormed.data(), orstd.data(), o.data(), z.data(), ps.p(onorm), N, Hv, Dv, eps, zact);
    } else {
      rmsnorm_forward(y.data(), orstd.data(), o.data(), ps.p(onorm), N * Hv, Dv, eps);
    }
    linear_forward(out, y.data(), ps.p(w_out), N, HV, C);
  }

  T scale() const { return T(1) / std::sqrt(T(Dk)); }
  /// Threads of the chunked kernels: one below kParMin multiply-adds of state work (a parallel
  /// region costs more than tiny problems, up to a time slice on a loaded machine: the model
  /// gradient checks ran 10x slower), else OpenMP's default. Results do not depend on it.
  int chunk_threads(index_t B, index_t Tn) const { return B * Hv * Tn * Dk * Dv > kParMin ? 0 : 1; }
  /// Chunk size of the chunked kernels: the smallest of 16, 32, 64 that holds T, else 64 (a chunk
  /// costs C rows whatever its fill: tiny gradient-check sequences ran 16x the work at C = 64).
  static index_t chunk_size(index_t Tn) { return Tn <= 16 ? 16 : Tn <= 32 ? 32 : 64; }

  void core_forward_dispatch(index_t B, index_t Tn) {
    const index_t N = B * Tn, HV = HVD();
    if (want_trace) trace.resize(static_cast<size_t>(N * HV));
    if (core == "recurrent") {
      Wprev.resize(static_cast<size_t>(B * Hv * Tn * Dv * Dk));
      core_forward(op, CoreDims{B, Tn, Hv, Dk, Dv}, qe.data(), ke.data(), vt.data(), core_gates(), scale(),
                   o.data(), want_trace && !route_written ? trace.data() : nullptr,
                   want_trace && route_written ? trace.data() : nullptr, Wprev.data());
      return;
    }
    const Tensor<T> q4 = Tensor<T>::wrap(qe.data(), {B, Tn, Hv, Dk}), k4 = Tensor<T>::wrap(ke.data(), {B, Tn, Hv, Dk}),
                    v4 = Tensor<T>::wrap(vt.data(), {B, Tn, Hv, Dv});
    ref::RecurrentOutput<T> out;
    if (core == "chunk") {
      cpu::ChunkOptions<T> opt;
      opt.scale = scale();
      opt.num_threads = chunk_threads(B, Tn);
      opt.chunk_size = chunk_size(Tn);
      opt.return_trace = want_trace;
      out = cpu::chunk_forward(op, q4, k4, v4, tensor_gates(B, Tn), opt);
      if (want_trace) {  // the routed signal: written = v_new, or the paper error r = v - v_bar
        const Tensor<T>& s = route_written ? out.written : out.r;
        std::copy(s.begin(), s.end(), trace.begin());
      }
    } else {  // reference
      ref::RecurrentOptions<T> opt;
      opt.scale = scale();
      const ref::Gates<T> gt = tensor_gates(B, Tn);
      switch (op) {
        case Op::delta_rule: out = ref::naive_recurrent_delta_rule(q4, k4, v4, gt.beta, opt); break;
        case Op::gated_delta_rule: out = ref::naive_recurrent_gated_delta_rule(q4, k4, v4, gt.g, gt.beta, opt); break;
        case Op::kda: out = ref::naive_recurrent_kda(q4, k4, v4, gt.g, gt.beta, opt); break;
        default: out = ref::naive_recurrent_gdn2(q4, k4, v4, gt.g, gt.b, gt.w, opt); break;
      }
    }
    std::copy(out.o.begin(), out.o.end(), o.begin());
  }

  void backward(ParamStore<T>& ps, const T* dout, T* dx, const T* x, index_t B, index_t Tn) override {
    const index_t N = B * Tn, HV = HVD(), HK = Hk * Dk;
    auto zeros = [](std::vector<T>& a, index_t n) { a.assign(static_cast<size_t>(n), T(0)); };
    zeros(dP, N * Wp), zeros(dy, N * HV), zeros(do_, N * HV);
    // pass 6 back: output projection, gate, per-head RMSNorm
    linear_backward(dy.data(), ps.g(w_out), dout, y.data(), ps.p(w_out), N, HV, C);
    if (off_z >= 0) {
      zeros(dz, N * HV);
      head_norm_gate_backward(do_.data(), dz.data(), ps.g(onorm), dy.data(), onormed.data(), orstd.data(),
                              o.data(), z.data(), ps.p(onorm), N, Hv, Dv, zact);
      for (index_t n = 0; n < N; ++n)
        for (index_t i = 0; i < HV; ++i) dP[n * Wp + off_z + i] += dz[n * HV + i];
    } else {
      rmsnorm_backward(do_.data(), ps.g(onorm), dy.data(), o.data(), ps.p(onorm), orstd.data(), N * Hv, Dv);
    }
    // pass 5 back: the recurrence
    zeros(dqe, N * Hv * Dk), zeros(dke, N * Hv * Dk), zeros(dvt, N * HV);
    zeros(dg, g.empty() ? 0 : index_t(g.size())), zeros(dbeta, beta.empty() ? 0 : index_t(beta.size()));
    zeros(db, bg.empty() ? 0 : index_t(bg.size())), zeros(dw, wg.empty() ? 0 : index_t(wg.size()));
    core_backward_dispatch(B, Tn);
    // pass 4 back: gates into the projection columns
    if (off_beta >= 0)
      for (index_t n = 0; n < N; ++n)
        for (index_t h = 0; h < Hv; ++h) {
          const T bt = beta[n * Hv + h];
          dP[n * Wp + off_beta + h] += dbeta[n * Hv + h] * bt * (T(1) - bt);
        }
    if (!g.empty()) {  // g = -exp(A_log) softplus(u): dg/du = -exp(A_log) sigmoid(u), dg/dA_log = g
      const index_t per = kind == MixerKind::gdn ? 1 : Dk;  // channels per head
      std::vector<T> du(g.size());
      for (index_t n = 0; n < N; ++n)
        for (index_t h = 0; h < Hv; ++h)
          for (index_t i = 0; i < per; ++i) {
            const index_t j = (n * Hv + h) * per + i;
            du[j] = dg[j] * -std::exp(ps.p(A_log)[h]) * sigmoid(u[j]);
            ps.g(A_log)[h] += dg[j] * g[j];
            ps.g(dt_bias)[h * per + i] += du[j];
          }
      if (kind == MixerKind::gdn) {
        for (index_t n = 0; n < N; ++n)
          for (index_t h = 0; h < Hv; ++h) dP[n * Wp + off_a + h] += du[n * Hv + h];
      } else {  // f = f1 W_f2^T
        zeros(df1, N * Dv);
        linear_backward(df1.data(), ps.g(w_f2), du.data(), f1.data(), ps.p(w_f2), N, Dv, Hv * Dk);
        for (index_t n = 0; n < N; ++n)
          for (index_t i = 0; i < Dv; ++i) dP[n * Wp + off_f1 + i] += df1[n * Dv + i];
      }
    }
    if (kind == MixerKind::gdn2)
      for (index_t n = 0; n < N; ++n) {
        for (index_t i = 0; i < Hv * Dk; ++i) {
          const T s = bg[n * Hv * Dk + i];
          dP[n * Wp + off_b + i] += db[n * Hv * Dk + i] * s * (T(1) - s);
        }
        for (index_t i = 0; i < HV; ++i) {
          const T s = wg[n * HV + i];
          dP[n * Wp + off_w + i] += dw[n * HV + i] * s * (T(1) - s);
        }
      }
    // pass 3 back: CLER. dv = dv~ (+ CLVR's dv); dGamma = sum dv~ rho(s); ds = rho'^T (Gamma dv~)
    std::vector<T>& dv = dvt;  // v~ = v + ..., so dv starts as dv~
    if (gamma >= 0 && route_in) {
      double dG = 0;
      for (index_t i = 0; i < N * HV; ++i) dG += double(dvt[i]) * double(srho[i]);
      ps.g(gamma)[0] += static_cast<T>(dG);
      const T G_ = ps.p(gamma)[0];
      std::vector<T> dsr(static_cast<size_t>(N * HV));
      for (index_t i = 0; i < N * HV; ++i) dsr[i] = G_ * dvt[i];
      if (rho_rms) {
        const std::vector<T> ones(static_cast<size_t>(Dv), T(1));
        std::vector<T> dones(static_cast<size_t>(Dv), T(0));
        rmsnorm_backward(droute_in, dones.data(), dsr.data(), route_in, ones.data(), srstd.data(), N * Hv, Dv);
      } else {
        for (index_t i = 0; i < N * HV; ++i) droute_in[i] += dsr[i];
      }
    }
    if (!dv_extra.empty())
      for (index_t i = 0; i < N * HV; ++i) dv[i] += dv_extra[i];
    // pass 2 back: GVA reduction over each group, L2 norms, assemble d[q | k | v]
    zeros(dqn, N * HK), zeros(dkn, N * HK), zeros(dqkv, N * Cqkv), zeros(dqkv_in, N * Cqkv);
    for (index_t n = 0; n < N; ++n)
      for (index_t h = 0; h < Hv; ++h)
        for (index_t i = 0; i < Dk; ++i) {
          dqn[(n * Hk + h / G) * Dk + i] += dqe[(n * Hv + h) * Dk + i];
          dkn[(n * Hk + h / G) * Dk + i] += dke[(n * Hv + h) * Dk + i];
        }
    std::vector<T> dtmp(static_cast<size_t>(N * HK), T(0));
    l2norm_backward(dtmp.data(), dqn.data(), qn.data(), rq.data(), N * Hk, Dk);
    for (index_t n = 0; n < N; ++n) std::copy_n(dtmp.data() + n * HK, HK, dqkv.data() + n * Cqkv + off_q);
    std::fill(dtmp.begin(), dtmp.end(), T(0));
    l2norm_backward(dtmp.data(), dkn.data(), kn.data(), rk.data(), N * Hk, Dk);
    for (index_t n = 0; n < N; ++n) std::copy_n(dtmp.data() + n * HK, HK, dqkv.data() + n * Cqkv + off_k);
    for (index_t n = 0; n < N; ++n) std::copy_n(dv.data() + n * HV, HV, dqkv.data() + n * Cqkv + off_v);
    // pass 1 back: short convolution, fused projection
    shortconv_backward(dqkv_in.data(), ps.g(conv), dqkv.data(), qkv_pre.data(), qkv_in.data(), ps.p(conv), B, Tn, Cqkv, KW);
    for (index_t n = 0; n < N; ++n)
      for (index_t i = 0; i < Cqkv; ++i) dP[n * Wp + i] += dqkv_in[n * Cqkv + i];
    linear_backward(dx, ps.g(w_in), dP.data(), x, ps.p(w_in), N, C, Wp);
  }

  void core_backward_dispatch(index_t B, index_t Tn) {
    if (core == "recurrent") {
      const bool has_dtrace = want_trace && !dtrace.empty();
      CoreGrads<T> gr{dqe.data(), dke.data(), dvt.data(), dg.empty() ? nullptr : dg.data(),
                      dbeta.empty() ? nullptr : dbeta.data(), db.empty() ? nullptr : db.data(),
                      dw.empty() ? nullptr : dw.data()};
      core_backward(op, CoreDims{B, Tn, Hv, Dk, Dv}, qe.data(), ke.data(), vt.data(), core_gates(), scale(),
                    do_.data(), has_dtrace && !route_written ? dtrace.data() : nullptr,
                    has_dtrace && route_written ? dtrace.data() : nullptr, Wprev.data(), gr);
      return;
    }
    const Tensor<T> q4 = Tensor<T>::wrap(qe.data(), {B, Tn, Hv, Dk}), k4 = Tensor<T>::wrap(ke.data(), {B, Tn, Hv, Dk}),
                    v4 = Tensor<T>::wrap(vt.data(), {B, Tn, Hv, Dv}), do4 = Tensor<T>::wrap(do_.data(), {B, Tn, Hv, Dv});
    const ref::Gates<T> gt = tensor_gates(B, Tn);
    ref::RecurrentGrads<T> gr;
    if (core == "chunk") {
      cpu::ChunkOptions<T> opt;
      opt.scale = scale();
      opt.num_threads = chunk_threads(B, Tn);
      opt.chunk_size = chunk_size(Tn);
      // The trace cotangent (CLER / CLER-H; chunk_backward.hpp, "Trace cotangents"):
      // written error: dwritten = dtrace;  paper error r = v - v_bar: dv_bar = -dtrace, dv += dtrace.
      Tensor<T> dwr, dvb;
      if (want_trace && !dtrace.empty()) {
        if (route_written) {
          dwr = Tensor<T>::wrap(dtrace.data(), {B, Tn, Hv, Dv});
        } else {
          dvb = Tensor<T>({B, Tn, Hv, Dv});
          for (index_t i = 0; i < dvb.numel(); ++i) dvb.data()[i] = -dtrace[static_cast<size_t>(i)];
          for (index_t i = 0; i < dvb.numel(); ++i) dvt[static_cast<size_t>(i)] += dtrace[static_cast<size_t>(i)];
        }
      }
      gr = cpu::chunk_backward(op, q4, k4, v4, gt, do4, Tensor<T>(), opt, dwr, dvb);
    } else {
      ref::RecurrentOptions<T> opt;
      opt.scale = scale();
      gr = ref::detail::recurrent_backward<T>("LinearMixer::backward (reference core)", op, q4, k4, v4, gt, do4,
                                              Tensor<T>(), opt);
    }
    auto add = [](std::vector<T>& dst, const Tensor<T>& src) {
      if (src.defined())
        for (index_t i = 0; i < src.numel(); ++i) dst[i] += src.data()[i];
    };
    add(dqe, gr.dq), add(dke, gr.dk), add(dvt, gr.dv), add(dg, gr.dg), add(dbeta, gr.dbeta);
    add(db, gr.db), add(dw, gr.dw);
  }
};

}  // namespace linattn::lm
