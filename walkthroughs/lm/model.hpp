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
// (i + 1) % 3 == 0, SPEC section 5 and erratum 4). Mixers: mixer_softmax.hpp (GQA, RoPE, causal,
// optional sigmoid output gate) and mixer_linear.hpp (DeltaNet, GDN, KDA, GDN2 with the authors'
// layer structure). Cross-layer routing (SPEC section 3): CLER inside the linear mixers (the
// model wires each linear layer to its routable predecessor p(l)); CLER-H and CLVR here, adding
// P_l s_l to the residual stream after the whole layer l; P_l full (d_model x Hv Dv) or, with
// route_rank r > 0, P_l = U_l D_l (U_l: d_model x r, zero-initialised; D_l: r x Hv Dv, random
// N(0, 1/(Hv Dv)) from its own generator, as reference/routing.hpp's low_rank_projection), applied
// as U_l (D_l s_l) without forming P_l.
// The Sec.6.6 controls (SPEC section 3), injected the same way: clvr-gate routes
// s = sigmoid(a_l rho + b_l) v per token and head with rho = ||r|| / (||v|| + 1e-6) ("surprise"
// gating; scalars a_l, b_l initialised to 1, 0), clvr-concat routes s = [r; v] (P_l twice as wide).
//
// Model<T>::forward saves every activation that backward needs; backward accumulates all
// parameter gradients into ParamStore::grad (zeroed by the caller, see zero_grad()).
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "walkthroughs/lm/config.hpp"
#include "walkthroughs/lm/mixer_linear.hpp"
#include "walkthroughs/lm/mixer_softmax.hpp"
#include "walkthroughs/lm/modules.hpp"
#include "reference/routing.hpp"

namespace linattn::lm {

/// The whole model. Construct, then call init(seed) (or load parameters), then forward/backward.
template <class T>
struct Model {
  ModelConfig cfg;
  ParamStore<T> ps;
  int wte, head, lnf;
  struct Block {
    int ln1, ln2, w1, w3, w2;
    int route_P = -1;               ///< CLER-H / CLVR: P_l (C, Hv Dv), zero-initialised (Eq.29)
    int route_U = -1, route_D = -1; ///< low rank: P_l = U_l D_l, U_l (C, r) zero, D_l (r, Hv Dv) random
    std::vector<T> route_t;         ///< low rank: t = D_l s_l per token (N, r), kept for backward
    int gate_a = -1, gate_b = -1;   ///< clvr-gate: the gate's scalars a_l (init 1), b_l (init 0)
    std::vector<T> sig;             ///< clvr-gate / clvr-concat: the routed signal s (N, width)
    std::vector<T> g_rho, g_gate, g_nr, g_nv;  ///< clvr-gate per (token, head): rho, gate, ||r||, ||v||
    index_t pred = -1;              ///< p(l): the nearest lower linear layer (-1: none)
    std::unique_ptr<Mixer<T>> mixer;
    LinearMixer<T>* lin = nullptr;  ///< the same mixer when it is linear
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
  std::vector<T> dres, dn, dmid, dh1, dh3, dact, dlogits, eps_l;

  explicit Model(const ModelConfig& c) : cfg(c) {
    cfg.validate();
    const index_t C = cfg.d_model, F = cfg.hidden();
    const Init hid{cfg.init_std}, outp{cfg.init_std / std::sqrt(2.0 * double(cfg.n_layer))};
    const Init one{0, 1.0};
    wte = ps.add("wte", cfg.vocab, C, ParamKind::embedding, hid);
    blocks.resize(static_cast<size_t>(cfg.n_layer));
    std::vector<ref::LayerKind> kinds;
    for (index_t l = 0; l < cfg.n_layer; ++l)
      kinds.push_back(cfg.is_softmax_layer(l) ? ref::LayerKind::softmax : ref::LayerKind::linear);
    const std::vector<index_t> pred = ref::routable_predecessor(kinds);  // p(l), Sec.4.2
    for (index_t l = 0; l < cfg.n_layer; ++l) {
      Block& bl = blocks[static_cast<size_t>(l)];
      std::string pre = "h";  // (appended, not "h" + ...: avoids a GCC 12 -Wrestrict false positive)
      pre += std::to_string(l);
      pre += '.';
      bl.ln1 = ps.add(pre + "ln1", 1, C, ParamKind::vector, one);
      if (cfg.is_softmax_layer(l)) {
        bl.mixer = std::make_unique<SoftmaxMixer<T>>(ps, cfg, pre);
      } else {
        bl.pred = pred[static_cast<size_t>(l)];
        auto lm = std::make_unique<LinearMixer<T>>(ps, cfg, pre, bl.pred >= 0);
        bl.lin = lm.get();
        bl.mixer = std::move(lm);
        const index_t SW = signal_width(bl);
        if (cfg.residual_routing() && cfg.route_rank == 0)
          bl.route_P = ps.add(pre + "route.P", C, SW, ParamKind::matrix, Init{0, 0.0});
        if (cfg.residual_routing() && cfg.route_rank > 0) {
          // one factor zero (P = 0 at initialisation), the other random: both zero never learn
          Init dinit{1.0 / std::sqrt(double(SW))};
          dinit.own_stream = true;  // the other parameters stay those of the baseline model
          bl.route_U = ps.add(pre + "route.U", C, cfg.route_rank, ParamKind::matrix, Init{0, 0.0});
          bl.route_D = ps.add(pre + "route.D", cfg.route_rank, SW, ParamKind::matrix, dinit);
        }
        if (cfg.routing == "clvr-gate") {
          bl.gate_a = ps.add(pre + "route.gate_a", 1, 1, ParamKind::vector, Init{0, 1.0});
          bl.gate_b = ps.add(pre + "route.gate_b", 1, 1, ParamKind::vector, Init{0, 0.0});
        }
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

  /// s_l of Eq.29: the routed error (CLER-H), the write value (CLVR) or a control's signal.
  const std::vector<T>& routed_signal(const Block& bl) const {
    if (cfg.routing == "clvr-gate" || cfg.routing == "clvr-concat") return bl.sig;
    return cfg.routing == "clvr" ? bl.lin->value() : bl.lin->trace;
  }
  /// Width of s_l per token: Hv Dv, or 2 Hv Dv for clvr-concat.
  index_t signal_width(const Block& bl) const { return (cfg.routing == "clvr-concat" ? 2 : 1) * bl.lin->HVD(); }

  /// The Sec.6.6 controls' signal from the layer's r (its trace) and v: bl.sig.
  void control_signal_forward(Block& bl, index_t N) {
    const LinearMixer<T>& lin = *bl.lin;
    const index_t H = lin.Hv, D = lin.Dv, HV = lin.HVD();
    const std::vector<T>&r = lin.trace, &v = lin.value();
    bl.sig.resize(static_cast<size_t>(N * signal_width(bl)));
    if (cfg.routing == "clvr-concat") {  // s = [r; v]
      for (index_t n = 0; n < N; ++n) {
        std::copy_n(r.data() + n * HV, HV, bl.sig.data() + n * 2 * HV);
        std::copy_n(v.data() + n * HV, HV, bl.sig.data() + n * 2 * HV + HV);
      }
      return;
    }
    // s = sigmoid(a rho + b) v, rho = ||r|| / (||v|| + eps), per token and head
    const T a = ps.p(bl.gate_a)[0], b = ps.p(bl.gate_b)[0];
    for (auto* x : {&bl.g_rho, &bl.g_gate, &bl.g_nr, &bl.g_nv}) x->resize(static_cast<size_t>(N * H));
    for (index_t i = 0; i < N * H; ++i) {
      T sr = 0, sv = 0;
      for (index_t j = 0; j < D; ++j) sr += r[i * D + j] * r[i * D + j], sv += v[i * D + j] * v[i * D + j];
      bl.g_nr[i] = std::sqrt(sr), bl.g_nv[i] = std::sqrt(sv);
      bl.g_rho[i] = bl.g_nr[i] / (bl.g_nv[i] + T(kGateEps));
      bl.g_gate[i] = sigmoid(a * bl.g_rho[i] + b);
      for (index_t j = 0; j < D; ++j) bl.sig[i * D + j] = bl.g_gate[i] * v[i * D + j];
    }
  }
  /// Backward of control_signal_forward: ds into the layer's dtrace (r) and dv_extra (v), and a, b.
  void control_signal_backward(Block& bl, const std::vector<T>& ds, index_t N) {
    LinearMixer<T>& lin = *bl.lin;
    const index_t H = lin.Hv, D = lin.Dv, HV = lin.HVD();
    const std::vector<T>&r = lin.trace, &v = lin.value();
    if (cfg.routing == "clvr-concat") {
      for (index_t n = 0; n < N; ++n)
        for (index_t j = 0; j < HV; ++j) {
          lin.dtrace[n * HV + j] += ds[n * 2 * HV + j];
          lin.dv_extra[n * HV + j] += ds[n * 2 * HV + HV + j];
        }
      return;
    }
    const T a = ps.p(bl.gate_a)[0];
    double da = 0, db = 0;
    for (index_t i = 0; i < N * H; ++i) {
      const T gt = bl.g_gate[i], nr = bl.g_nr[i], nv = bl.g_nv[i], den = nv + T(kGateEps);
      T dgate = 0;
      for (index_t j = 0; j < D; ++j) {
        lin.dv_extra[i * D + j] += gt * ds[i * D + j];  // s = gate v
        dgate += ds[i * D + j] * v[i * D + j];
      }
      const T dz = dgate * gt * (T(1) - gt);  // gate = sigmoid(z), z = a rho + b
      da += double(dz) * double(bl.g_rho[i]), db += double(dz);
      const T drho = dz * a;  // rho = ||r|| / (||v|| + eps): d/dr = r / (||r|| den), d/dv = -rho v / (||v|| den)
      for (index_t j = 0; j < D; ++j) {
        if (nr > 0) lin.dtrace[i * D + j] += drho * r[i * D + j] / (nr * den);
        if (nv > 0) lin.dv_extra[i * D + j] -= drho * bl.g_rho[i] * v[i * D + j] / (nv * den);
      }
    }
    ps.g(bl.gate_a)[0] += static_cast<T>(da);
    ps.g(bl.gate_b)[0] += static_cast<T>(db);
  }
  static constexpr double kGateEps = 1e-6;
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
      if (bl.lin && cfg.cler())  // CLER: this layer reads the routed signal of p(l) (Eq.27)
        bl.lin->route_in = bl.pred >= 0 ? blocks[static_cast<size_t>(bl.pred)].lin->trace.data() : nullptr;
      bl.mixer->forward(ps, bl.a.data(), bl.mix.data(), B, Tn);
      for (index_t i = 0; i < N * C; ++i) m[i] = x[i] + bl.mix[i];
      // pass 2: SwiGLU MLP with residual (the MLP output is written into bl.mix, reused)
      rmsnorm_forward(bl.b.data(), bl.rstd2.data(), m, ps.p(bl.ln2), N, C, T(cfg.norm_eps));
      linear_forward(bl.h1.data(), bl.b.data(), ps.p(bl.w1), N, C, F);
      linear_forward(bl.h3.data(), bl.b.data(), ps.p(bl.w3), N, C, F);
      swiglu_forward(bl.act.data(), bl.h1.data(), bl.h3.data(), N * F);
      linear_forward(bl.mix.data(), bl.act.data(), ps.p(bl.w2), N, F, C);
      for (index_t i = 0; i < N * C; ++i) xn[i] = m[i] + bl.mix[i];
      // pass 3: CLER-H / CLVR, x_{l+1} += P_l s_l after the whole layer (Eq.29)
      if (bl.route_P >= 0 || bl.route_U >= 0) {
        if (cfg.routing == "clvr-gate" || cfg.routing == "clvr-concat") control_signal_forward(bl, N);
        eps_l.resize(N * C);
        if (bl.route_P >= 0) {
          linear_forward(eps_l.data(), routed_signal(bl).data(), ps.p(bl.route_P), N, signal_width(bl), C);
        } else {  // low rank: eps = U (D s), t = D s
          bl.route_t.resize(static_cast<size_t>(N * cfg.route_rank));
          lowrank_forward(eps_l.data(), bl.route_t.data(), routed_signal(bl).data(), ps.p(bl.route_U),
                          ps.p(bl.route_D), N, signal_width(bl), cfg.route_rank, C);
        }
        for (index_t i = 0; i < N * C; ++i) xn[i] += eps_l[i];
      }
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
    for (Block& bl : blocks)  // routing cotangents start at zero
      if (bl.lin) {
        if (bl.lin->want_trace) bl.lin->dtrace.assign(static_cast<size_t>(N * bl.lin->HVD()), T(0));
        if (cfg.routes_value()) bl.lin->dv_extra.assign(static_cast<size_t>(N * bl.lin->HVD()), T(0));
        if (cfg.cler() && bl.pred >= 0)
          bl.lin->droute_in = blocks[static_cast<size_t>(bl.pred)].lin->dtrace.data();
      }
    // dres now holds d loss / d x_L; walk the layers backwards
    for (index_t l = L - 1; l >= 0; --l) {
      Block& bl = blocks[static_cast<size_t>(l)];
      const T* x = stream(2 * l);
      const T* m = stream(2 * l + 1);
      if (bl.route_P >= 0 || bl.route_U >= 0) {
        // ds: straight into the layer's trace / value gradient, or (controls) via control_signal_backward
        const bool control = cfg.routing == "clvr-gate" || cfg.routing == "clvr-concat";
        std::vector<T> dsig;
        if (control) dsig.assign(static_cast<size_t>(N * signal_width(bl)), T(0));
        std::vector<T>& ds = control ? dsig : cfg.routing == "clvr" ? bl.lin->dv_extra : bl.lin->dtrace;
        if (bl.route_P >= 0)  // x_{l+1} = ... + s P^T: dP += dres^T s, ds += dres P
          linear_backward(ds.data(), ps.g(bl.route_P), dres.data(), routed_signal(bl).data(), ps.p(bl.route_P), N,
                          signal_width(bl), C);
        else  // x_{l+1} = ... + (s D^T) U^T
          lowrank_backward(ds.data(), ps.g(bl.route_U), ps.g(bl.route_D), dres.data(), bl.route_t.data(),
                           routed_signal(bl).data(), ps.p(bl.route_U), ps.p(bl.route_D), N, signal_width(bl),
                           cfg.route_rank, C);
        if (control) control_signal_backward(bl, dsig, N);
      }
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
