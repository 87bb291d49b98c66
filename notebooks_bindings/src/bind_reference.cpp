// notebooks_bindings/src/bind_reference.cpp -- Python bindings of the sequence-level reference
// operators: naive_recurrent_<op> (reference/recurrent.hpp) with flash-linear-attention's keyword
// arguments, causal softmax attention (Eq.1) and per-head linear attention with feature maps
// (Eqs.3-6). The recurrent binding is generic over a "runner", so the chunked CPU kernels bind
// through the same code (bind_chunk.cpp).
#include "bindings.hpp"

#include "reference/linear_attention.hpp"
#include "reference/softmax_attention.hpp"

namespace linattn::pyb {

using ref::Op;

namespace {

ref::FeatureMap parse_phi(const std::string& fn, const std::string& phi) {
  if (phi == "identity") return ref::FeatureMap::identity;
  if (phi == "l2norm") return ref::FeatureMap::l2norm;
  if (phi == "elu+1" || phi == "elu_plus_one") return ref::FeatureMap::elu_plus_one;
  if (phi == "relu") return ref::FeatureMap::relu;
  fail(fn, "phi", "one of 'identity', 'l2norm', 'elu+1', 'relu'", "'" + phi + "'");
}

template <class T>
py::object softmax_impl(const std::string& fn, std::vector<Arg>& a, std::optional<double> scale,
                        bool causal) {
  Tensor<T> q = borrow<T>(fn, a[0]), k = borrow<T>(fn, a[1]), v = borrow<T>(fn, a[2]);
  ref::SoftmaxOptions<T> opt;
  if (scale) opt.scale = narrow<T>(fn, "scale", *scale);
  opt.causal = causal;
  opt.mask = borrow<T>(fn, a[3]);
  Tensor<T> o;
  {
    py::gil_scoped_release nogil;
    o = ref::naive_softmax_attn(q, k, v, opt);
  }
  return to_numpy(o);
}

template <class T>
py::object linear_attn_impl(const std::string& fn, bool parallel, std::vector<Arg>& a,
                            const std::string& phi, bool normalize, double eps) {
  Tensor<T> q = borrow<T>(fn, a[0]), k = borrow<T>(fn, a[1]), v = borrow<T>(fn, a[2]);
  ref::LinearAttnOptions<T> opt;
  opt.phi = parse_phi(fn, phi);
  opt.normalize = normalize;
  opt.eps = narrow<T>(fn, "eps", eps, false);
  Tensor<T> y;
  {
    py::gil_scoped_release nogil;
    y = parallel ? ref::linear_attention_parallel(q, k, v, opt)
                 : ref::linear_attention_recurrent(q, k, v, opt);
  }
  return to_numpy(y);
}

const char* kRecurrentDoc = R"doc(
Returns (o, final_state), like flash-linear-attention; final_state is None unless
output_final_state=True. With return_trace=True returns (o, final_state, trace), trace a dict of
[B, T, H, V] arrays: 'v_bar' (key read of the decayed old state, Eq.9/25), 'r' (the paper's error
v - v_bar, Eq.10/26) and 'written' (the vector written along kappa; the official code's routed error).

Layout (SPEC section 1): q, k [B, T, H, K]; v [B, T, H, V]; states [N, H, K, V] (S = W^T);
log-space decays g = log(alpha) <= 0. scale multiplies q (default K**-0.5). cu_seqlens: packed
variable-length batch (B = 1), offsets [0, ..., T]. use_qk_l2norm_in_kernel: L2-normalise q and k
per head (eps 1e-6). Arrays must be C-contiguous float32 or float64 of one dtype (never copied);
copy=True allows a conversion instead. Bad input raises ValueError (linattn.Error).
)doc";

}  // namespace

void bind_reference(py::module_& m) {
  using namespace py::literals;

  auto ref_runner = [](Op op) {
    return [op]<class T>(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                         const ref::Gates<T>& g, const ref::RecurrentOptions<T>& opt) {
      switch (op) {
        case Op::linear_attn: return ref::naive_recurrent_linear_attn(q, k, v, opt);
        case Op::delta_rule: return ref::naive_recurrent_delta_rule(q, k, v, g.beta, opt);
        case Op::gated_delta_rule:
          return ref::naive_recurrent_gated_delta_rule(q, k, v, g.g, g.beta, opt);
        case Op::kda: return ref::naive_recurrent_kda(q, k, v, g.g, g.beta, opt);
        case Op::gdn2: return ref::naive_recurrent_gdn2(q, k, v, g.g, g.b, g.w, opt);
      }
      throw Error("unknown op");
    };
  };

  m.def(
      "naive_recurrent_linear_attn",
      [ref_runner](py::object q, py::object k, py::object v, const py::object& scale,
                   py::object initial_state, const py::object& output_final_state, py::object cu_seqlens,
                   const py::object& use_qk_l2norm_in_kernel, const py::object& return_trace, const py::object& copy) {
        RecurrentCall c = make_call("naive_recurrent_linear_attn", Op::linear_attn, q, k, v,
                        py::none(), py::none(), py::none(), py::none(), initial_state, scale,
                        output_final_state, cu_seqlens, use_qk_l2norm_in_kernel, return_trace, copy);
        return call_recurrent(c, ref_runner(Op::linear_attn));
      },
      "q"_a, "k"_a, "v"_a, py::kw_only(), "scale"_a = py::none(), "initial_state"_a = py::none(),
      "output_final_state"_a = false, "cu_seqlens"_a = py::none(),
      "use_qk_l2norm_in_kernel"_a = false, "return_trace"_a = false, "copy"_a = false,
      (std::string("Linear attention (Eqs.4-5, 8): S_t = S_{t-1} + k_t v_t^T, o_t = S_t^T (scale q_t).\n"
                   "q and k are phi(q), phi(k) already.\n") + kRecurrentDoc).c_str());

  m.def(
      "naive_recurrent_delta_rule",
      [ref_runner](py::object q, py::object k, py::object v, py::object beta,
                   const py::object& scale, py::object initial_state, const py::object& output_final_state,
                   py::object cu_seqlens, const py::object& use_qk_l2norm_in_kernel, const py::object& return_trace, const py::object& copy) {
        RecurrentCall c = make_call("naive_recurrent_delta_rule", Op::delta_rule, q, k, v, py::none(), beta,
                        py::none(), py::none(), initial_state, scale, output_final_state, cu_seqlens,
                        use_qk_l2norm_in_kernel, return_trace, copy);
        return call_recurrent(c, ref_runner(Op::delta_rule));
      },
      "q"_a, "k"_a, "v"_a, "beta"_a = py::none(), py::kw_only(), "scale"_a = py::none(),
      "initial_state"_a = py::none(), "output_final_state"_a = false, "cu_seqlens"_a = py::none(),
      "use_qk_l2norm_in_kernel"_a = false, "return_trace"_a = false, "copy"_a = false,
      (std::string("DeltaNet (Eq.14). beta [B, T, H] in [0, 1] (None: ones, as in fla).\n") + kRecurrentDoc)
          .c_str());

  m.def(
      "naive_recurrent_gated_delta_rule",
      [ref_runner](py::object q, py::object k, py::object v, py::object g, py::object beta,
                   const py::object& scale, py::object initial_state, const py::object& output_final_state,
                   py::object cu_seqlens, const py::object& use_qk_l2norm_in_kernel, const py::object& return_trace, const py::object& copy) {
        RecurrentCall c = make_call("naive_recurrent_gated_delta_rule", Op::gated_delta_rule, q, k, v, g, beta,
                        py::none(), py::none(), initial_state, scale, output_final_state, cu_seqlens,
                        use_qk_l2norm_in_kernel, return_trace, copy);
        return call_recurrent(c, ref_runner(Op::gated_delta_rule));
      },
      "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a = py::none(), py::kw_only(), "scale"_a = py::none(),
      "initial_state"_a = py::none(), "output_final_state"_a = false, "cu_seqlens"_a = py::none(),
      "use_qk_l2norm_in_kernel"_a = false, "return_trace"_a = false, "copy"_a = false,
      (std::string("Gated DeltaNet (Eqs.15-17): decay first, error against the decayed state.\n"
                   "g [B, T, H] = log(alpha) <= 0; beta [B, T, H] in [0, 1] (None: ones).\n") +
       kRecurrentDoc)
          .c_str());

  m.def(
      "naive_recurrent_kda",
      [ref_runner](py::object q, py::object k, py::object v, py::object g, py::object beta,
                   const py::object& scale, py::object initial_state, const py::object& output_final_state,
                   py::object cu_seqlens, const py::object& use_qk_l2norm_in_kernel, const py::object& return_trace, const py::object& copy) {
        RecurrentCall c = make_call("naive_recurrent_kda", Op::kda, q, k, v, g, beta, py::none(), py::none(),
                        initial_state, scale, output_final_state, cu_seqlens,
                        use_qk_l2norm_in_kernel, return_trace, copy);
        return call_recurrent(c, ref_runner(Op::kda));
      },
      "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a = py::none(), py::kw_only(), "scale"_a = py::none(),
      "initial_state"_a = py::none(), "output_final_state"_a = false, "cu_seqlens"_a = py::none(),
      "use_qk_l2norm_in_kernel"_a = false, "return_trace"_a = false, "copy"_a = false,
      (std::string("Kimi Delta Attention (Eqs.18-20): per-key-channel decay.\n"
                   "g [B, T, H, K] = log(alpha_vec) <= 0; beta [B, T, H] in [0, 1] (None: ones).\n") +
       kRecurrentDoc)
          .c_str());

  m.def(
      "naive_recurrent_gdn2",
      [ref_runner](py::object q, py::object k, py::object v, py::object g, py::object b,
                   py::object w, const py::object& scale, py::object initial_state,
                   const py::object& output_final_state, py::object cu_seqlens, const py::object& use_qk_l2norm_in_kernel,
                   const py::object& return_trace, const py::object& copy) {
        RecurrentCall c = make_call("naive_recurrent_gdn2", Op::gdn2, q, k, v, g, py::none(), b, w,
                        initial_state, scale, output_final_state, cu_seqlens,
                        use_qk_l2norm_in_kernel, return_trace, copy);
        return call_recurrent(c, ref_runner(Op::gdn2));
      },
      "q"_a, "k"_a, "v"_a, "g"_a, "b"_a, "w"_a, py::kw_only(), "scale"_a = py::none(),
      "initial_state"_a = py::none(), "output_final_state"_a = false, "cu_seqlens"_a = py::none(),
      "use_qk_l2norm_in_kernel"_a = false, "return_trace"_a = false, "copy"_a = false,
      (std::string("Gated DeltaNet-2 (Eqs.21-24). g [B, T, H, K] log-decays; b [B, T, H, K] erase gates\n"
                   "in [0, 1]; w [B, T, H, V] write gates in [0, 1].\n") +
       kRecurrentDoc)
          .c_str());

  m.def(
      "naive_softmax_attn",
      [](py::object q, py::object k, py::object v, const py::object& scale_, const py::object& causal_,
         py::object mask, const py::object& copy) -> py::object {
        const std::string fn = "naive_softmax_attn";
        const std::optional<double> scale = opt_real(fn, "scale", scale_);
        const bool causal = flag(fn, "causal", causal_);
        std::vector<Arg> a{{"q", q}, {"k", k}, {"v", v}, {"mask", mask}};
        if (flag(fn, "copy", copy)) convert_all(fn, a);
        return common_dtype(fn, a) == DType::f64 ? softmax_impl<double>(fn, a, scale, causal)
                                                 : softmax_impl<float>(fn, a, scale, causal);
      },
      "q"_a, "k"_a, "v"_a, py::kw_only(), "scale"_a = py::none(), "causal"_a = true,
      "mask"_a = py::none(), "copy"_a = false,
      "Causal softmax attention (Eq.1): o_i = sum_{j<=i} softmax_j(scale q_i . k_j + mask_ij) v_j.\n"
      "q [B, T, H, K]; k [B, T, Hkv, K], v [B, T, Hkv, V] with Hkv dividing H (GQA); optional\n"
      "additive mask [T, T] (may hold -inf). scale defaults to K**-0.5. Returns o [B, T, H, V]\n"
      "(no state). Arrays: C-contiguous float32/float64 of one dtype, or copy=True.");

  for (bool parallel : {false, true}) {
    const char* name = parallel ? "linear_attention_parallel" : "linear_attention_recurrent";
    m.def(
        name,
        [parallel, name](py::object q, py::object k, py::object v, const py::object& phi_,
                         const py::object& normalize_, const py::object& eps_, const py::object& copy) -> py::object {
          const std::string fn = name;
          const std::string phi = text(fn, "phi", phi_);
          const bool normalize = flag(fn, "normalize", normalize_);
          const double eps = real(fn, "eps", eps_);
          std::vector<Arg> a{{"q", q}, {"k", k}, {"v", v}};
          if (flag(fn, "copy", copy)) convert_all(fn, a);
          return common_dtype(fn, a) == DType::f64
                     ? linear_attn_impl<double>(fn, parallel, a, phi, normalize, eps)
                     : linear_attn_impl<float>(fn, parallel, a, phi, normalize, eps);
        },
        "q"_a, "k"_a, "v"_a, py::kw_only(), "phi"_a = "identity", "normalize"_a = false,
        "eps"_a = 1e-6, "copy"_a = false,
        parallel ? "Linear attention for one head, parallel causal form (Eq.3 read as W phi(q)):\n"
                   "y_i = sum_{j<=i} (phi(q_i) . phi(k_j)) v_j. q, k [T, d_k]; v [T, d_v].\n"
                   "phi: 'identity', 'l2norm', 'elu+1', 'relu'; normalize divides by z_i . phi(q_i) + eps."
                 : "Linear attention for one head, recurrent form (Eqs.4-5, 8):\n"
                   "W_i = W_{i-1} + v_i phi(k_i)^T, y_i = W_i phi(q_i). q, k [T, d_k]; v [T, d_v].\n"
                   "phi: 'identity', 'l2norm', 'elu+1', 'relu'; normalize divides by z_i . phi(q_i) + eps.");
  }

  m.def(
      "feature_map",
      [](const py::object& phi_, py::object x, const py::object& copy) -> py::object {
        const std::string fn = "feature_map";
        const ref::FeatureMap phi = parse_phi(fn, text(fn, "phi", phi_));
        std::vector<Arg> a{{"x", x}};
        if (flag(fn, "copy", copy)) convert_all(fn, a);
        if (common_dtype(fn, a) == DType::f64) return to_numpy(ref::feature_map(phi, vec<double>(fn, a[0])));
        return to_numpy(ref::feature_map(phi, vec<float>(fn, a[0])));
      },
      "phi"_a, "x"_a, py::kw_only(), "copy"_a = false,
      "phi(x) for one vector (Eqs.3-6): 'identity', 'l2norm' (x / sqrt(|x|^2 + 1e-6)), 'elu+1', 'relu'.");
}

}  // namespace linattn::pyb
