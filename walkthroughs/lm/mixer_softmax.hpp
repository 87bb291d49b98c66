// walkthroughs/lm/mixer_softmax.hpp -- the softmax token mixer of the model: causal attention
// (Eq.1) with grouped-query attention, RoPE and an optional sigmoid output gate, built from the
// modules of modules.hpp.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "walkthroughs/lm/config.hpp"
#include "walkthroughs/lm/modules.hpp"

namespace linattn::lm {

/// Causal softmax attention (Eq.1) with GQA, RoPE and an optional sigmoid output gate:
///   q = RoPE(x Wq^T), k = RoPE(x Wk^T), v = x Wv^T, y = Attn(q, k, v) [* sigmoid(x Wg^T)],
///   out = y Wo^T.
template <class T>
struct SoftmaxMixer : Mixer<T> {
  index_t C, H, Hkv, D;
  bool gate;
  double theta;
  int wq, wk, wv, wg = -1, wo;
  std::vector<T> q, k, v, probs, y, z, yg;          // activations
  std::vector<T> dq, dk, dv, dqr, dkr, dy, dz, dyg;  // gradient scratch

  SoftmaxMixer(ParamStore<T>& ps, const ModelConfig& c, const std::string& pre)
      : C(c.d_model), H(c.n_head), Hkv(c.n_kv_head), D(c.hd()), gate(c.attn_gate),
        theta(c.rope_theta) {
    const Init hid{c.init_std}, outp{c.init_std / std::sqrt(2.0 * double(c.n_layer))};
    wq = ps.add(pre + "attn.wq", H * D, C, ParamKind::matrix, hid);
    wk = ps.add(pre + "attn.wk", Hkv * D, C, ParamKind::matrix, hid);
    wv = ps.add(pre + "attn.wv", Hkv * D, C, ParamKind::matrix, hid);
    if (gate) wg = ps.add(pre + "attn.wg", H * D, C, ParamKind::matrix, hid);
    wo = ps.add(pre + "attn.wo", C, H * D, ParamKind::matrix, outp);
  }

  void forward(ParamStore<T>& ps, const T* x, T* out, index_t B, index_t Tn) override {
    const index_t N = B * Tn;
    q.resize(N * H * D), k.resize(N * Hkv * D), v.resize(N * Hkv * D), y.resize(N * H * D);
    probs.resize(B * H * Tn * Tn);
    linear_forward(q.data(), x, ps.p(wq), N, C, H * D);    // q (N, H*D)
    linear_forward(k.data(), x, ps.p(wk), N, C, Hkv * D);  // k (N, Hkv*D)
    linear_forward(v.data(), x, ps.p(wv), N, C, Hkv * D);  // v (N, Hkv*D)
    rope_forward(q.data(), q.data(), B, Tn, H, D, theta);
    rope_forward(k.data(), k.data(), B, Tn, Hkv, D, theta);
    attention_forward(y.data(), probs.data(), q.data(), k.data(), v.data(), B, Tn, H, Hkv, D);
    const T* yo = y.data();
    if (gate) {
      z.resize(N * H * D), yg.resize(N * H * D);
      linear_forward(z.data(), x, ps.p(wg), N, C, H * D);
      gate_forward(yg.data(), y.data(), z.data(), N * H * D, GateAct::sigmoid);
      yo = yg.data();
    }
    linear_forward(out, yo, ps.p(wo), N, H * D, C);
  }

  void backward(ParamStore<T>& ps, const T* dout, T* dx, const T* x, index_t B,
                index_t Tn) override {
    const index_t N = B * Tn;
    auto zeros = [](std::vector<T>& a, index_t n) { a.assign(static_cast<size_t>(n), T(0)); };
    zeros(dy, N * H * D);
    zeros(dq, N * H * D), zeros(dk, N * Hkv * D), zeros(dv, N * Hkv * D);
    zeros(dqr, N * H * D), zeros(dkr, N * Hkv * D);
    if (gate) {
      zeros(dyg, N * H * D), zeros(dz, N * H * D);
      linear_backward(dyg.data(), ps.g(wo), dout, yg.data(), ps.p(wo), N, H * D, C);
      gate_backward(dy.data(), dz.data(), dyg.data(), y.data(), z.data(), N * H * D, GateAct::sigmoid);
      linear_backward(dx, ps.g(wg), dz.data(), x, ps.p(wg), N, C, H * D);
    } else {
      linear_backward(dy.data(), ps.g(wo), dout, y.data(), ps.p(wo), N, H * D, C);
    }
    attention_backward(dqr.data(), dkr.data(), dv.data(), dy.data(), probs.data(), q.data(),
                       k.data(), v.data(), B, Tn, H, Hkv, D);
    rope_backward(dq.data(), dqr.data(), B, Tn, H, D, theta);
    rope_backward(dk.data(), dkr.data(), B, Tn, Hkv, D, theta);
    linear_backward(dx, ps.g(wq), dq.data(), x, ps.p(wq), N, C, H * D);
    linear_backward(dx, ps.g(wk), dk.data(), x, ps.p(wk), N, C, Hkv * D);
    linear_backward(dx, ps.g(wv), dv.data(), x, ps.p(wv), N, C, Hkv * D);
  }
};

}  // namespace linattn::lm
