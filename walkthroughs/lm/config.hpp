// walkthroughs/lm/config.hpp -- the configuration of the language model (SPEC section 5) and the
// interface that every token mixer (softmax or linear) implements.
#pragma once

#include <string>
#include <utility>

#include "walkthroughs/lm/params.hpp"

namespace linattn::lm {

/// The largest model size (width, layers, heads, head dimensions, MLP width, convolution, routing
/// rank) that a configuration accepts, and the most tokens of one step (batch x sequence length,
/// lm/trainer.hpp): far beyond what this CPU trainer can run, they turn absurd sizes (a typo, an
/// overflow) into an error that names the limit instead of a failed allocation.
inline constexpr index_t kMaxSize = index_t(1) << 16;
inline constexpr index_t kMaxTokens = index_t(1) << 24;

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
  // linear mixers (SPEC section 5; the 350M model has 4 key heads x 64 and 8 value heads x 64)
  index_t lin_heads = 2;      ///< key (and query) heads Hk
  index_t lin_v_heads = 4;    ///< value heads Hv, a multiple of Hk (q, k shared by Hv / Hk heads)
  index_t lin_dk = 32, lin_dv = 32;
  index_t conv_size = 4;      ///< causal depthwise short convolution on q, k, v
  std::string core = "chunk";  ///< recurrence core: chunk (optimized/cpu, the default) | recurrent | reference
  // cross-layer routing (SPEC section 3)
  /// none | cler | cler-h | clvr, or the Sec.6.6 controls clvr-gate (s = sigmoid(a ||r|| / (||v|| +
  /// eps) + b) v per token and head) and clvr-concat (s = [r; v]), injected as CLER-H / CLVR
  std::string routing = "none";
  std::string routed_error = "paper";   ///< paper (r = v - v_bar) | written (what the kernel writes)
  std::string rho = "identity";         ///< CLER's rho: identity | rms
  /// CLER-H / CLVR: rank of P_l (0: full matrix). r > 0: P_l = U_l D_l with U_l (d_model x r)
  /// zero-initialised and D_l (r x Hv Dv) random, as reference/routing.hpp's low_rank_projection.
  index_t route_rank = 0;

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
    if (mlp_hidden < 0) fail(fn, "mlp_hidden", "0 (8/3 d_model rounded up to 32) or a positive size", std::to_string(mlp_hidden));
    if (head_dim < 0) fail(fn, "head_dim", "0 (d_model / n_head) or a positive size", std::to_string(head_dim));
    for (const auto& [name, size] : {std::pair<const char*, index_t>{"d_model", d_model}, {"n_layer", n_layer},
                                     {"n_head", n_head}, {"n_kv_head", n_kv_head}, {"head_dim", head_dim},
                                     {"mlp_hidden", mlp_hidden}, {"lin_heads", lin_heads}, {"lin_v_heads", lin_v_heads},
                                     {"lin_dk", lin_dk}, {"lin_dv", lin_dv}, {"conv_size", conv_size},
                                     {"route_rank", route_rank}})
      if (size > kMaxSize) fail(fn, name, "a size at most " + std::to_string(kMaxSize), std::to_string(size));
    if (n_head % n_kv_head) fail(fn, "n_kv_head", "a divisor of n_head = " + std::to_string(n_head), std::to_string(n_kv_head));
    if (head_dim <= 0 && d_model % n_head)
      fail(fn, "n_head", "a divisor of d_model = " + std::to_string(d_model) + " (or set head_dim)", std::to_string(n_head));
    if (hd() % 2) fail(fn, "head_dim", "an even size (RoPE rotates pairs)", std::to_string(hd()));
    if (stack != "dense" && stack != "pure" && stack != "hybrid")
      fail(fn, "stack", "dense, pure or hybrid", stack);
    if (!(norm_eps > 0)) fail(fn, "norm_eps", "a positive value", num_str(norm_eps));
    if (linear_mixer == MixerKind::softmax) fail(fn, "linear_mixer", "deltanet, gdn, kda or gdn2", "softmax");
    check_positive(fn, "lin_heads", lin_heads);
    check_positive(fn, "lin_v_heads", lin_v_heads);
    check_positive(fn, "lin_dk", lin_dk);
    check_positive(fn, "lin_dv", lin_dv);
    check_positive(fn, "conv_size", conv_size);
    if (lin_v_heads % lin_heads)
      fail(fn, "lin_v_heads", "a multiple of lin_heads = " + std::to_string(lin_heads), std::to_string(lin_v_heads));
    if (core != "recurrent" && core != "chunk" && core != "reference")
      fail(fn, "core", "recurrent, chunk or reference", core);
    if (routing != "none" && routing != "cler" && routing != "cler-h" && routing != "clvr" &&
        routing != "clvr-gate" && routing != "clvr-concat")
      fail(fn, "routing", "none, cler, cler-h, clvr, clvr-gate or clvr-concat", routing);
    if (routed_error != "paper" && routed_error != "written") fail(fn, "routed_error", "paper or written", routed_error);
    if (rho != "identity" && rho != "rms") fail(fn, "rho", "identity or rms", rho);
    if (needs_trace() && core == "reference")
      fail(fn, "core", "recurrent or chunk with routing " + routing +
           " (it differentiates through the recurrence trace; the naive reference backward does not)", core);
    if (route_rank < 0) fail(fn, "route_rank", "0 (full P) or a positive rank", std::to_string(route_rank));
    if (route_rank > 0 && !residual_routing())
      fail(fn, "route_rank", "0 unless routing is cler-h or clvr (or a clvr control; only they have a P_l)",
           std::to_string(route_rank) + " with routing " + routing);
    if (routing != "none" && stack == "dense")
      fail(fn, "routing", "none for a dense stack (only linear layers are routable)", routing);
  }
  /// Routing mode predicates.
  bool cler() const { return routing == "cler"; }
  bool residual_routing() const {
    return routing == "cler-h" || routing == "clvr" || routing == "clvr-gate" || routing == "clvr-concat";
  }
  /// The linear layers must keep their trace r (or written) and its gradient.
  bool needs_trace() const {
    return routing == "cler" || routing == "cler-h" || routing == "clvr-gate" || routing == "clvr-concat";
  }
  /// The routed signal depends on the write value v (its gradient goes to LinearMixer::dv_extra).
  bool routes_value() const { return routing == "clvr" || routing == "clvr-gate" || routing == "clvr-concat"; }
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

}  // namespace linattn::lm
