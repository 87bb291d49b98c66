// walkthroughs/lm/model.hpp -- the pre-norm decoder language model of SPEC section 5.
//
//   x_0     = Embed(tokens)                                   (B, T, C)
//   for each layer l:
//     m_l   = x_l + Mixer_l(RMSNorm(x_l))                     token mixer: softmax or linear
//     x_l+1 = m_l + W2 (SiLU(W1 RMSNorm(m_l)) * W3 RMSNorm(m_l))   SwiGLU MLP
//   logits  = RMSNorm(x_L) W_head^T                           untied head, (B, T, vocab)
//   loss    = mean cross-entropy against the next token
//
// Stacks: "dense" (all softmax), "pure" (all linear), "hybrid" (layer i is softmax iff
// (i + 1) % 3 == 0, SPEC section 5 and erratum 4). The softmax mixer (GQA, RoPE, causal,
// optional sigmoid output gate) is here; the linear mixers plug in through the same Mixer
// interface (walkthroughs/lm/mixers_linear.hpp, when present).
//
// Model<T>::forward saves every activation that backward needs; backward accumulates all
// parameter gradients into ParamStore::grad (zeroed by the caller, see zero_grad()).
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "walkthroughs/lm/modules.hpp"
#include "walkthroughs/lm/params.hpp"

namespace linattn::lm {

enum class MixerKind { softmax, deltanet, gdn, kda, gdn2 };

inline const char* to_string(MixerKind m) {
  switch (m) {
    case MixerKind::softmax: return "softmax";
    case MixerKind::deltanet: return "deltanet";
    case MixerKind::gdn: return "gdn";
    case MixerKind::kda: return "kda";
    case MixerKind::gdn2: return "gdn2";
  }
  return "?";
}

struct ModelConfig {
  index_t vocab = 256;        ///< byte-level
  index_t d_model = 128;      ///< C
  index_t n_layer = 4;
  index_t n_head = 4;         ///< softmax query heads H
  index_t n_kv_head = 2;      ///< softmax key/value heads (GQA groups), divides n_head
  index_t head_dim = 0;       ///< 0: d_model / n_head
  index_t mlp_hidden = 0;     ///< 0: 8/3 d_model rounded up to a multiple of 32
  bool attn_gate = false;     ///< sigmoid output gate on the softmax attention
  double rope_theta = 10000;
  double norm_eps = 1e-6;     ///< RMSNorm eps
  std::string stack = "dense";           ///< dense | pure | hybrid
  MixerKind linear_mixer = MixerKind::gdn;  ///< the mixer of the linear layers of pure/hybrid stacks
  double init_std = 0.02;     ///< std of the hidden matrices, embedding and head

  index_t hd() const { return head_dim > 0 ? head_dim : d_model / n_head; }
  index_t hidden() const {
    return mlp_hidden > 0 ? mlp_hidden : ((8 * d_model / 3 + 31) / 32) * 32;
  }
  /// Layer i is softmax (true) or linear (false).
  bool is_softmax_layer(index_t i) const {
    if (stack == "dense") return true;
    if (stack == "pure") return false;
    return (i + 1) % 3 == 0;  // hybrid
  }
  void validate() const {
    const std::string fn = "ModelConfig";
    check_positive(fn, "vocab", vocab);
    check_positive(fn, "d_model", d_model);
    check_positive(fn, "n_layer", n_layer);
    check_positive(fn, "n_head", n_head);
    check_positive(fn, "n_kv_head", n_kv_head);
    if (n_head % n_kv_head) fail(fn, "n_kv_head", "a divisor of n_head = " + std::to_string(n_head), std::to_string(n_kv_head));
    if (head_dim <= 0 && d_model % n_head)
      fail(fn, "n_head", "a divisor of d_model = " + std::to_string(d_model) + " (or set head_dim)", std::to_string(n_head));
    if (hd() % 2) fail(fn, "head_dim", "an even size (RoPE rotates pairs)", std::to_string(hd()));
    if (stack != "dense" && stack != "pure" && stack != "hybrid")
      fail(fn, "stack", "dense, pure or hybrid", stack);
    if (!(norm_eps > 0)) fail(fn, "norm_eps", "a positive value", num_str(norm_eps));
  }
};

/// A token mixer: out (B, T, C) = mixer(x (B, T, C)), with its parameters in the store.
template <class T>
struct Mixer {
  virtual ~Mixer() = default;
  /// Overwrites out; saves what backward needs (x is kept alive by the caller).
  virtual void forward(ParamStore<T>& ps, const T* x, T* out, index_t B, index_t Tn) = 0;
  /// dx (B, T, C) += d loss / d x; parameter gradients += into ps.grad.
  virtual void backward(ParamStore<T>& ps, const T* dout, T* dx, const T* x, index_t B,
                        index_t Tn) = 0;
};

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

/// Factory for the linear mixers of pure/hybrid stacks. Returns null while they are not built.
template <class T>
std::unique_ptr<Mixer<T>> make_linear_mixer(ParamStore<T>&, const ModelConfig&, const std::string&,
                                            index_t) {
  return nullptr;
}

/// The whole model. Construct, then call init(seed) (or load parameters), then forward/backward.
template <class T>
struct Model {
  ModelConfig cfg;
  ParamStore<T> ps;
  int wte, head, lnf;
  struct Block {
    int ln1, ln2, w1, w3, w2;
    std::unique_ptr<Mixer<T>> mixer;
    // activations (N = B*T rows)
    std::vector<T> a, rstd1, mix, b, rstd2, h1, h3, act;  // a = RMSNorm(x), b = RMSNorm(m)
  };
  std::vector<Block> blocks;
  // activations
  std::vector<T> res;    // residual streams x_0..x_L and m_0..m_{L-1}: (2L+1, N, C)
  std::vector<T> xf, rstdf, logits, probs, losses;
  std::vector<int> tok, tgt;
  index_t B = 0, Tn = 0;
  // gradient scratch
  std::vector<T> dres, dn, dmid, dh1, dh3, dact, dlogits;

  explicit Model(const ModelConfig& c) : cfg(c) {
    cfg.validate();
    const index_t C = cfg.d_model, F = cfg.hidden();
    const Init hid{cfg.init_std}, outp{cfg.init_std / std::sqrt(2.0 * double(cfg.n_layer))};
    const Init one{0, 1.0};
    wte = ps.add("wte", cfg.vocab, C, ParamKind::embedding, hid);
    blocks.resize(static_cast<size_t>(cfg.n_layer));
    for (index_t l = 0; l < cfg.n_layer; ++l) {
      Block& bl = blocks[static_cast<size_t>(l)];
      std::string pre = "h";  // (appended, not "h" + ...: avoids a GCC 12 -Wrestrict false positive)
      pre += std::to_string(l);
      pre += '.';
      bl.ln1 = ps.add(pre + "ln1", 1, C, ParamKind::vector, one);
      if (cfg.is_softmax_layer(l)) {
        bl.mixer = std::make_unique<SoftmaxMixer<T>>(ps, cfg, pre);
      } else {
        bl.mixer = make_linear_mixer<T>(ps, cfg, pre, l);
        if (!bl.mixer)
          fail("Model", "stack", "dense (the linear mixers are not built into this program)", cfg.stack);
      }
      bl.ln2 = ps.add(pre + "ln2", 1, C, ParamKind::vector, one);
      bl.w1 = ps.add(pre + "mlp.w1", F, C, ParamKind::matrix, hid);
      bl.w3 = ps.add(pre + "mlp.w3", F, C, ParamKind::matrix, hid);
      bl.w2 = ps.add(pre + "mlp.w2", C, F, ParamKind::matrix, outp);
    }
    lnf = ps.add("lnf", 1, C, ParamKind::vector, one);
    head = ps.add("head", cfg.vocab, C, ParamKind::head, hid);
    ps.allocate();
  }

  void init(std::uint64_t seed) { ps.initialise(seed); }
  index_t num_params() const { return ps.size(); }

  T* stream(index_t i) { return res.data() + i * B * Tn * cfg.d_model; }  // x_l = 2l, m_l = 2l+1

  /// tokens, targets (B, T) (targets may be null: no loss). Returns the mean loss (0 if none).
  double forward(const int* tokens, const int* targets, index_t B_, index_t T_) {
    const std::string fn = "Model::forward";
    check_positive(fn, "B", B_);
    check_positive(fn, "T", T_);
    B = B_, Tn = T_;
    const index_t N = B * Tn, C = cfg.d_model, F = cfg.hidden(), V = cfg.vocab, L = cfg.n_layer;
    tok.assign(tokens, tokens + N);
    for (index_t n = 0; n < N; ++n)
      if (tok[n] < 0 || tok[n] >= V)
        fail(fn, "tokens", "ids in [0, " + std::to_string(V) + ")", std::to_string(tok[n]) + " at " + std::to_string(n));
    res.resize(static_cast<size_t>((2 * L + 1) * N * C));
    embedding_forward(stream(0), tok.data(), ps.p(wte), N, C);
    for (index_t l = 0; l < L; ++l) {
      Block& bl = blocks[static_cast<size_t>(l)];
      bl.a.resize(N * C), bl.rstd1.resize(N), bl.mix.resize(N * C), bl.b.resize(N * C);
      bl.rstd2.resize(N), bl.h1.resize(N * F), bl.h3.resize(N * F), bl.act.resize(N * F);
      const T* x = stream(2 * l);
      T* m = stream(2 * l + 1);
      T* xn = stream(2 * l + 2);
      // pass 1: token mixer with residual
      rmsnorm_forward(bl.a.data(), bl.rstd1.data(), x, ps.p(bl.ln1), N, C, T(cfg.norm_eps));
      bl.mixer->forward(ps, bl.a.data(), bl.mix.data(), B, Tn);
      for (index_t i = 0; i < N * C; ++i) m[i] = x[i] + bl.mix[i];
      // pass 2: SwiGLU MLP with residual (the MLP output is written into bl.mix, reused)
      rmsnorm_forward(bl.b.data(), bl.rstd2.data(), m, ps.p(bl.ln2), N, C, T(cfg.norm_eps));
      linear_forward(bl.h1.data(), bl.b.data(), ps.p(bl.w1), N, C, F);
      linear_forward(bl.h3.data(), bl.b.data(), ps.p(bl.w3), N, C, F);
      swiglu_forward(bl.act.data(), bl.h1.data(), bl.h3.data(), N * F);
      linear_forward(bl.mix.data(), bl.act.data(), ps.p(bl.w2), N, F, C);
      for (index_t i = 0; i < N * C; ++i) xn[i] = m[i] + bl.mix[i];
    }
    xf.resize(N * C), rstdf.resize(N), logits.resize(N * V);
    rmsnorm_forward(xf.data(), rstdf.data(), stream(2 * L), ps.p(lnf), N, C, T(cfg.norm_eps));
    linear_forward(logits.data(), xf.data(), ps.p(head), N, C, V);
    if (!targets) {
      tgt.clear();
      return 0.0;
    }
    tgt.assign(targets, targets + N);
    for (index_t n = 0; n < N; ++n)
      if (tgt[n] < 0 || tgt[n] >= V)
        fail(fn, "targets", "ids in [0, " + std::to_string(V) + ")", std::to_string(tgt[n]) + " at " + std::to_string(n));
    probs.resize(N * V), losses.resize(N);
    crossentropy_forward(losses.data(), probs.data(), logits.data(), tgt.data(), N, V);
    double sum = 0;  // serial, in double: the same for any thread count
    for (index_t n = 0; n < N; ++n) sum += double(losses[n]);
    return sum / double(N);
  }

  /// Gradients of the mean loss of the last forward (which must have had targets), accumulated
  /// into ps.grad.
  void backward() {
    if (tgt.empty()) fail("Model::backward", "targets", "a forward pass with targets first", "none");
    const index_t N = B * Tn, C = cfg.d_model, F = cfg.hidden(), V = cfg.vocab, L = cfg.n_layer;
    auto zeros = [](std::vector<T>& a, index_t n) { a.assign(static_cast<size_t>(n), T(0)); };
    zeros(dlogits, N * V), zeros(dn, N * C), zeros(dres, N * C);
    crossentropy_backward(dlogits.data(), probs.data(), tgt.data(), T(1.0 / double(N)), N, V);
    linear_backward(dn.data(), ps.g(head), dlogits.data(), xf.data(), ps.p(head), N, C, V);
    rmsnorm_backward(dres.data(), ps.g(lnf), dn.data(), stream(2 * L), ps.p(lnf), rstdf.data(), N, C);
    // dres now holds d loss / d x_L; walk the layers backwards
    for (index_t l = L - 1; l >= 0; --l) {
      Block& bl = blocks[static_cast<size_t>(l)];
      const T* x = stream(2 * l);
      const T* m = stream(2 * l + 1);
      // MLP: x_{l+1} = m + W2 swiglu(W1 b, W3 b), b = RMSNorm(m)
      zeros(dact, N * F), zeros(dh1, N * F), zeros(dh3, N * F), zeros(dn, N * C);
      linear_backward(dact.data(), ps.g(bl.w2), dres.data(), bl.act.data(), ps.p(bl.w2), N, F, C);
      swiglu_backward(dh1.data(), dh3.data(), dact.data(), bl.h1.data(), bl.h3.data(), N * F);
      linear_backward(dn.data(), ps.g(bl.w1), dh1.data(), bl.b.data(), ps.p(bl.w1), N, C, F);
      linear_backward(dn.data(), ps.g(bl.w3), dh3.data(), bl.b.data(), ps.p(bl.w3), N, C, F);
      rmsnorm_backward(dres.data(), ps.g(bl.ln2), dn.data(), m, ps.p(bl.ln2), bl.rstd2.data(), N, C);
      // dres = d/dm. Mixer: m = x + Mixer(a), a = RMSNorm(x)
      zeros(dn, N * C);
      bl.mixer->backward(ps, dres.data(), dn.data(), bl.a.data(), B, Tn);
      rmsnorm_backward(dres.data(), ps.g(bl.ln1), dn.data(), x, ps.p(bl.ln1), bl.rstd1.data(), N, C);
    }
    embedding_backward(ps.g(wte), dres.data(), tok.data(), N, C);
  }
};

}  // namespace linattn::lm
