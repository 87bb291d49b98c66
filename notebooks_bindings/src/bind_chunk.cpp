// notebooks_bindings/src/bind_chunk.cpp -- Python bindings of the optimized CPU kernels
// (optimized/cpu): the chunked UT-transform forward chunk_<op> (SPEC section 4) with chunk_size and
// num_threads, its per-chunk intermediates (G, e, u0, L, A, w_aux, u, S_in, v_new, S_out) for the
// notebooks, and the token-by-token fused_recurrent_<op> baseline. Same arguments, array policy and
// results as the reference bindings (bind_reference.cpp).
#include "bindings.hpp"

#include "optimized/cpu/chunk.hpp"
#include "optimized/cpu/fused_recurrent.hpp"

namespace linattn::pyb {

using ref::Op;

namespace {

Op parse_op(const std::string& fn, const std::string& name) {
  for (Op op : {Op::linear_attn, Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2})
    if (name == ref::op_name(op)) return op;
  fail(fn, "op", "one of 'delta_rule', 'gated_delta_rule', 'kda', 'gdn2'", "'" + name + "'");
}

template <class T>
cpu::ChunkOptions<T> chunk_opt(index_t chunk_size, int num_threads) {
  cpu::ChunkOptions<T> o;
  o.chunk_size = chunk_size;
  o.num_threads = num_threads;
  return o;
}

const char* kChunkDoc = R"doc(
Chunked (UT-transform) CPU kernel, SPEC section 4: chunks of chunk_size tokens (16, 32 or 64),
num_threads OpenMP threads over (sequence, head) pairs (0: OpenMP's default). Same arguments and
results as the naive reference: (o, final_state) or, with return_trace=True, (o, final_state, trace).
All arithmetic in the input's precision (float32 inputs: float32 state and cumulative gates).
)doc";

const char* kFusedDoc = R"doc(
Tuned token-by-token CPU kernel (the baseline of the chunked kernels). Same arguments and results
as the naive reference: (o, final_state) or, with return_trace=True, (o, final_state, trace).
)doc";

}  // namespace

void bind_chunk(py::module_& m) {
  using namespace py::literals;
  auto chunk_runner = [](Op op) {
    return [op]<class T>(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                         const ref::Gates<T>& g, const cpu::ChunkOptions<T>& opt) {
      return cpu::chunk_forward(op, q, k, v, g, opt);
    };
  };
  auto fused_runner = [](Op op) {
    return [op]<class T>(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                         const ref::Gates<T>& g, const ref::RecurrentOptions<T>& opt) {
      return cpu::fused_recurrent_forward(op, q, k, v, g, opt);
    };
  };

  // One call for both families: chunked (with chunk_size, num_threads) or fused recurrent.
  auto call = [chunk_runner, fused_runner](const std::string& name, Op op, bool chunked, py::object q,
                                           py::object k, py::object v, py::object g, py::object beta,
                                           py::object b, py::object w, const py::object& scale,
                                           py::object h0, const py::object& ofs, py::object cu, const py::object& l2, const py::object& trace,
                                           const py::object& copy, const py::object& chunk_size, const py::object& num_threads) -> py::tuple {
    RecurrentCall c = make_call(name, op, q, k, v, g, beta, b, w, h0, scale, ofs, cu, l2, trace, copy);
    if (chunked) {
      const index_t C = chunk_size_arg(name, chunk_size);
      const int nt = num_threads_arg(name, num_threads);
      return call_recurrent<cpu::ChunkOptions>(c, chunk_runner(op), chunk_opt<double>(C, nt), chunk_opt<float>(C, nt));
    }
    return call_recurrent(c, fused_runner(op));
  };
  const py::object none = py::none();
#define LINATTN_FWD_KW                                                                         \
  py::kw_only(), "scale"_a = py::none(), "initial_state"_a = py::none(),                       \
      "output_final_state"_a = false, "cu_seqlens"_a = py::none(),                             \
      "use_qk_l2norm_in_kernel"_a = false, "return_trace"_a = false, "copy"_a = false
  // chunk_<op>: the fla keywords plus chunk_size and num_threads.
  {
    const bool chunked = true;
    const std::string tail = kChunkDoc;
    const std::string pre = "chunk_";
#define LINATTN_EXTRA_PARAMS , const py::object& C, const py::object& nt
#define LINATTN_EXTRA_ARGS C, nt
#define LINATTN_EXTRA_KW , "chunk_size"_a = 64, "num_threads"_a = 0
#include "bind_chunk_defs.inc"
#undef LINATTN_EXTRA_PARAMS
#undef LINATTN_EXTRA_ARGS
#undef LINATTN_EXTRA_KW
  }
  // fused_recurrent_<op>: the fla keywords only.
  {
    const bool chunked = false;
    const std::string tail = kFusedDoc;
    const std::string pre = "fused_recurrent_";
#define LINATTN_EXTRA_PARAMS
#define LINATTN_EXTRA_ARGS none, none  // unused: fused kernels take no chunk_size, num_threads
#define LINATTN_EXTRA_KW
#include "bind_chunk_defs.inc"
#undef LINATTN_EXTRA_PARAMS
#undef LINATTN_EXTRA_ARGS
#undef LINATTN_EXTRA_KW
  }
#undef LINATTN_FWD_KW

  m.def(
      "chunk_intermediates",
      [](const py::object& op_name, py::object q, py::object k, py::object v, py::object g,
         py::object beta, py::object b, py::object w, const py::object& scale,
         py::object initial_state, py::object cu_seqlens, const py::object& use_qk_l2norm_in_kernel,
         const py::object& chunk_size_, const py::object& copy) -> py::list {
        const std::string fn = "chunk_intermediates";
        const Op op = parse_op(fn, text(fn, "op", op_name));
        check_gates(fn, op, g, beta, b, w);
        const py::bool_ no(false);
        RecurrentCall c = make_call(fn, op, q, k, v, g, beta, b, w, initial_state, scale, no, cu_seqlens,
                                    use_qk_l2norm_in_kernel, no, copy);
        const index_t chunk_size = chunk_size_arg(fn, chunk_size_);
        std::vector<Arg> a = call_args(c);
        if (c.copy) convert_all(fn, a);
        auto run = [&]<class T>(T) {
          auto t = make_typed<T>(c, a, chunk_opt<T>(chunk_size, 1));
          std::vector<cpu::ChunkStages<T>> st;
          {
            py::gil_scoped_release nogil;
            st = cpu::chunk_intermediates(op, t.q, t.k, t.v, t.gates, t.opt);
          }
          py::list out;
          for (const auto& s : st) {
            py::dict d;
            d["seq"] = s.seq, d["head"] = s.head, d["t0"] = s.t0, d["len"] = s.len;
            d["G"] = to_numpy(s.G), d["e"] = to_numpy(s.e), d["u0"] = to_numpy(s.u0);
            d["L"] = to_numpy(s.L), d["A"] = to_numpy(s.A), d["w_aux"] = to_numpy(s.w_aux);
            d["u"] = to_numpy(s.u), d["S_in"] = to_numpy(s.S_in), d["v_new"] = to_numpy(s.v_new);
            d["S_out"] = to_numpy(s.S_out);
            out.append(d);
          }
          return out;
        };
        return common_dtype(fn, a) == DType::f64 ? run(double{}) : run(float{});
      },
      "op"_a, "q"_a, "k"_a, "v"_a, py::kw_only(), "g"_a = py::none(), "beta"_a = py::none(),
      "b"_a = py::none(), "w"_a = py::none(), "scale"_a = py::none(), "initial_state"_a = py::none(),
      "cu_seqlens"_a = py::none(), "use_qk_l2norm_in_kernel"_a = false, "chunk_size"_a = 64,
      "copy"_a = false,
      "Every chunk's intermediates of the chunked kernel (SPEC section 4), in the order sequence,\n"
      "head, chunk: a list of dicts with 'seq', 'head', 't0', 'len' and the arrays 'G' [n, K]\n"
      "(cumulative log-decays), 'e' [n, K], 'u0' [n, V], 'L' [n, n], 'A' = (I + L)^-1, 'w_aux' [n, K],\n"
      "'u' [n, V], 'S_in' [K, V], 'v_new' = u - w_aux S_in [n, V], 'S_out' [K, V]. Slow; for study.");
}

}  // namespace linattn::pyb
