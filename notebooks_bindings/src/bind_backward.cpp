// notebooks_bindings/src/bind_backward.cpp -- Python bindings of the reference backward
// (reference/backward.hpp): naive_recurrent_<op>_backward, the reverse-time recurrence of each
// update (proven by finite differences in proofs_tests/test_gradcheck_reference.cpp), and the
// backward of causal softmax attention (Eq.1), and the chunked CPU backward (optimized/cpu,
// chunk_backward by operator name). Gradients come back as a dict of arrays.
#include "bindings.hpp"

#include "optimized/cpu/chunk_backward.hpp"
#include "reference/backward.hpp"

namespace linattn::pyb {

using ref::Op;

namespace {

template <class T>
py::dict backward_typed(const RecurrentCall& c, std::vector<Arg>& a) {
  TypedCall<T, ref::RecurrentOptions<T>> t = make_typed<T>(c, a, ref::RecurrentOptions<T>{});
  if (!t.do_.defined()) fail(c.fn, "do", "an array of shape [B, T, H, V] (dL/do)", "None");
  ref::RecurrentGrads<T> g;
  {
    py::gil_scoped_release nogil;
    const auto& G = t.gates;
    switch (c.op) {
      case Op::linear_attn:
        g = ref::naive_recurrent_linear_attn_backward(t.q, t.k, t.v, t.do_, t.dht, t.opt);
        break;
      case Op::delta_rule:
        g = ref::naive_recurrent_delta_rule_backward(t.q, t.k, t.v, G.beta, t.do_, t.dht, t.opt);
        break;
      case Op::gated_delta_rule:
        g = ref::naive_recurrent_gated_delta_rule_backward(t.q, t.k, t.v, G.g, G.beta, t.do_, t.dht, t.opt);
        break;
      case Op::kda:
        g = ref::naive_recurrent_kda_backward(t.q, t.k, t.v, G.g, G.beta, t.do_, t.dht, t.opt);
        break;
      case Op::gdn2:
        g = ref::naive_recurrent_gdn2_backward(t.q, t.k, t.v, G.g, G.b, G.w, t.do_, t.dht, t.opt);
        break;
    }
  }
  return grads_dict(g);
}

template <class T>
py::dict chunk_backward_typed(const RecurrentCall& c, std::vector<Arg>& a, index_t chunk_size,
                              int num_threads) {
  cpu::ChunkOptions<T> o;
  o.chunk_size = chunk_size;
  o.num_threads = num_threads;
  TypedCall<T, cpu::ChunkOptions<T>> t = make_typed<T>(c, a, o);
  if (!t.do_.defined()) fail(c.fn, "do", "an array of shape [B, T, H, V] (dL/do)", "None");
  ref::RecurrentGrads<T> g;
  {
    py::gil_scoped_release nogil;
    g = cpu::chunk_backward(c.op, t.q, t.k, t.v, t.gates, t.do_, t.dht, t.opt);
  }
  return grads_dict(g);
}

py::dict call_backward(const RecurrentCall& c) {
  std::vector<Arg> a = call_args(c);
  if (c.copy) convert_all(c.fn, a);
  return common_dtype(c.fn, a) == DType::f64 ? backward_typed<double>(c, a) : backward_typed<float>(c, a);
}

const char* kBackwardDoc = R"doc(
Returns a dict of gradients dL/d(input) for a loss with dL/do = `do` [B, T, H, V] and
dL/d(final state) = `dht` [N, H, K, V] (None: zero): 'dq', 'dk', 'dv', 'dh0' (initial state;
zeros when none was given) and the gate gradients of the operator ('dg' wrt the log-decays,
'dbeta', 'db', 'dw'). Same keyword arguments and array policy as the forward.
)doc";

}  // namespace

void bind_backward(py::module_& m) {
  using namespace py::literals;
  // The fla keyword arguments of the forward (output_final_state and return_trace do not apply).
#define LINATTN_BWD_KW                                                                          \
  "do"_a, "dht"_a = py::none(), py::kw_only(), "scale"_a = py::none(),                          \
      "initial_state"_a = py::none(), "cu_seqlens"_a = py::none(),                              \
      "use_qk_l2norm_in_kernel"_a = false, "copy"_a = false
  auto make = [](const char* fn, Op op, py::object q, py::object k, py::object v, py::object g,
                 py::object beta, py::object b, py::object w, py::object do_, py::object dht,
                 const py::object& scale, py::object h0, py::object cu, const py::object& l2, const py::object& copy) {
    const py::bool_ no(false);
    RecurrentCall c = make_call(fn, op, q, k, v, g, beta, b, w, h0, scale, no, cu, l2, no, copy);
    c.do_ = do_;
    c.dht = dht;
    return call_backward(c);
  };
  const py::object none = py::none();
  m.def(
      "naive_recurrent_linear_attn_backward",
      [make, none](py::object q, py::object k, py::object v, py::object do_, py::object dht,
                   const py::object& scale, py::object h0, py::object cu, const py::object& l2, const py::object& copy) {
        return make("naive_recurrent_linear_attn_backward", Op::linear_attn, q, k, v, none, none,
                    none, none, do_, dht, scale, h0, cu, l2, copy);
      },
      "q"_a, "k"_a, "v"_a, LINATTN_BWD_KW,
      (std::string("Backward of naive_recurrent_linear_attn (Eqs.4-5, 8).\n") + kBackwardDoc).c_str());
  m.def(
      "naive_recurrent_delta_rule_backward",
      [make, none](py::object q, py::object k, py::object v, py::object beta, py::object do_,
                   py::object dht, const py::object& scale, py::object h0, py::object cu, const py::object& l2,
                   const py::object& copy) {
        return make("naive_recurrent_delta_rule_backward", Op::delta_rule, q, k, v, none, beta, none,
                    none, do_, dht, scale, h0, cu, l2, copy);
      },
      "q"_a, "k"_a, "v"_a, "beta"_a, LINATTN_BWD_KW,
      (std::string("Backward of naive_recurrent_delta_rule (Eq.14).\n") + kBackwardDoc).c_str());
  m.def(
      "naive_recurrent_gated_delta_rule_backward",
      [make, none](py::object q, py::object k, py::object v, py::object g, py::object beta,
                   py::object do_, py::object dht, const py::object& scale, py::object h0,
                   py::object cu, const py::object& l2, const py::object& copy) {
        return make("naive_recurrent_gated_delta_rule_backward", Op::gated_delta_rule, q, k, v, g,
                    beta, none, none, do_, dht, scale, h0, cu, l2, copy);
      },
      "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, LINATTN_BWD_KW,
      (std::string("Backward of naive_recurrent_gated_delta_rule (Eqs.15-17).\n") + kBackwardDoc).c_str());
  m.def(
      "naive_recurrent_kda_backward",
      [make, none](py::object q, py::object k, py::object v, py::object g, py::object beta,
                   py::object do_, py::object dht, const py::object& scale, py::object h0,
                   py::object cu, const py::object& l2, const py::object& copy) {
        return make("naive_recurrent_kda_backward", Op::kda, q, k, v, g, beta, none, none, do_, dht,
                    scale, h0, cu, l2, copy);
      },
      "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, LINATTN_BWD_KW,
      (std::string("Backward of naive_recurrent_kda (Eqs.18-20).\n") + kBackwardDoc).c_str());
  m.def(
      "naive_recurrent_gdn2_backward",
      [make, none](py::object q, py::object k, py::object v, py::object g, py::object b,
                   py::object w, py::object do_, py::object dht, const py::object& scale,
                   py::object h0, py::object cu, const py::object& l2, const py::object& copy) {
        return make("naive_recurrent_gdn2_backward", Op::gdn2, q, k, v, g, none, b, w, do_, dht,
                    scale, h0, cu, l2, copy);
      },
      "q"_a, "k"_a, "v"_a, "g"_a, "b"_a, "w"_a, LINATTN_BWD_KW,
      (std::string("Backward of naive_recurrent_gdn2 (Eqs.21-24).\n") + kBackwardDoc).c_str());
#undef LINATTN_BWD_KW

  m.def(
      "_chunk_backward",
      [](const py::object& op_obj, py::object q, py::object k, py::object v, py::object g,
         py::object beta, py::object b, py::object w, py::object do_, py::object dht,
         const py::object& scale, py::object h0, py::object cu, const py::object& l2, const py::object& copy,
         const py::object& chunk_size_, const py::object& num_threads_) -> py::dict {
        const std::string fn = "chunk_backward";
        const std::string op_name = text(fn, "op", op_obj);
        Op op = Op::linear_attn;
        bool found = false;
        for (Op x : {Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2})
          if (op_name == ref::op_name(x)) op = x, found = true;
        if (!found) fail(fn, "op", "one of 'delta_rule', 'gated_delta_rule', 'kda', 'gdn2'", "'" + op_name + "'");
        check_gates(fn, op, g, beta, b, w);
        const py::bool_ no(false);
        RecurrentCall c = make_call(fn, op, q, k, v, g, beta, b, w, h0, scale, no, cu, l2, no, copy);
        const index_t chunk_size = chunk_size_arg(fn, chunk_size_);
        const int num_threads = num_threads_arg(fn, num_threads_);
        c.do_ = do_;
        c.dht = dht;
        std::vector<Arg> a = call_args(c);
        if (c.copy) convert_all(fn, a);
        return common_dtype(fn, a) == DType::f64 ? chunk_backward_typed<double>(c, a, chunk_size, num_threads)
                                                 : chunk_backward_typed<float>(c, a, chunk_size, num_threads);
      },
      "op"_a, "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, "b"_a, "w"_a, "do"_a, "dht"_a, "scale"_a,
      "initial_state"_a, "cu_seqlens"_a, "use_qk_l2norm_in_kernel"_a, "copy"_a, "chunk_size"_a,
      "num_threads"_a, "The chunked CPU backward (use linattn.chunk_backward).");

  m.def(
      "naive_softmax_attn_backward",
      [](py::object q, py::object k, py::object v, py::object do_, const py::object& scale_,
         const py::object& causal_, py::object mask, const py::object& copy) -> py::dict {
        const std::string fn = "naive_softmax_attn_backward";
        const std::optional<double> scale = opt_real(fn, "scale", scale_);
        const bool causal = flag(fn, "causal", causal_);
        std::vector<Arg> a{{"q", q}, {"k", k}, {"v", v}, {"do", do_}, {"mask", mask}};
        if (flag(fn, "copy", copy)) convert_all(fn, a);
        auto run = [&]<class T>(T) {
          Tensor<T> tq = borrow<T>(fn, a[0]), tk = borrow<T>(fn, a[1]), tv = borrow<T>(fn, a[2]);
          Tensor<T> tdo = borrow<T>(fn, a[3]);
          if (!tdo.defined()) fail(fn, "do", "an array of shape [B, T, H, V] (dL/do)", "None");
          ref::SoftmaxOptions<T> opt;
          if (scale) opt.scale = narrow<T>(fn, "scale", *scale);
          opt.causal = causal;
          opt.mask = borrow<T>(fn, a[4]);
          ref::AttentionGrads<T> g;
          {
            py::gil_scoped_release nogil;
            g = ref::naive_softmax_attn_backward(tq, tk, tv, tdo, opt);
          }
          py::dict d;
          d["dq"] = to_numpy(g.dq);
          d["dk"] = to_numpy(g.dk);
          d["dv"] = to_numpy(g.dv);
          if (g.dmask.defined()) d["dmask"] = to_numpy(g.dmask);
          return d;
        };
        return common_dtype(fn, a) == DType::f64 ? run(double{}) : run(float{});
      },
      "q"_a, "k"_a, "v"_a, "do"_a, py::kw_only(), "scale"_a = py::none(), "causal"_a = true,
      "mask"_a = py::none(), "copy"_a = false,
      "Backward of naive_softmax_attn (Eq.1): dict {'dq', 'dk', 'dv'} (+ 'dmask' when a mask is\n"
      "given) for dL/do = do [B, T, H, V]. With GQA a key/value head's gradient sums over its query heads.");
}

}  // namespace linattn::pyb
