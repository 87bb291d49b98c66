// notebooks_bindings/src/bindings.hpp -- the generic sequence-level call shared by every operator
// binding (reference naive_recurrent_<op>, and the chunked CPU kernels when built), and the
// per-part registration functions that module.cpp calls.
#pragma once

#include "common.hpp"
#include "reference/recurrent.hpp"
#include "reference/recurrent_backward.hpp"

namespace linattn::pyb {

/// The fla-style arguments of one sequence-level call, as they came from Python.
struct RecurrentCall {
  std::string fn;
  ref::Op op;
  py::object q, k, v, g, beta, b, w, initial_state;
  std::optional<double> scale;
  bool output_final_state = false;
  py::object cu_seqlens;
  bool use_qk_l2norm = false;
  bool return_trace = false;
  bool copy = false;
  py::object do_ = py::none(), dht = py::none();  ///< backward only: dL/do, dL/d(final state)
};

/// A RecurrentCall from the Python arguments, the scalars checked (common.hpp: bool flags, a real
/// scale) and named as the caller named them.
inline RecurrentCall make_call(const std::string& fn, ref::Op op, py::object q, py::object k, py::object v,
                               py::object g, py::object beta, py::object b, py::object w, py::object h0,
                               const py::object& scale, const py::object& output_final_state, py::object cu,
                               const py::object& l2, const py::object& trace, const py::object& copy) {
  return RecurrentCall{fn, op, q, k, v, g, beta, b, w, h0, opt_real(fn, "scale", scale),
                       flag(fn, "output_final_state", output_final_state), cu,
                       flag(fn, "use_qk_l2norm_in_kernel", l2), flag(fn, "return_trace", trace),
                       flag(fn, "copy", copy)};
}

/// chunk_size and num_threads as integers that fit the options (the kernels check their values).
inline index_t chunk_size_arg(const std::string& fn, const py::object& o) {
  return integer(fn, "chunk_size", o, std::numeric_limits<index_t>::min(), std::numeric_limits<index_t>::max());
}
inline int num_threads_arg(const std::string& fn, const py::object& o) {
  return static_cast<int>(integer(fn, "num_threads", o, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
}

/// Gates that `op` does not take must be None (as linattn.chunk and linattn.reference require).
inline void check_gates(const std::string& fn, ref::Op op, const py::object& g, const py::object& beta,
                        const py::object& b, const py::object& w) {
  const bool takes_g = op != ref::Op::linear_attn && op != ref::Op::delta_rule;
  const bool takes_beta = op == ref::Op::delta_rule || op == ref::Op::gated_delta_rule || op == ref::Op::kda;
  const bool takes_bw = op == ref::Op::gdn2;
  const std::string takes = op == ref::Op::linear_attn ? "no gates"
                            : op == ref::Op::delta_rule ? "the gate beta"
                            : op == ref::Op::gdn2       ? "the gates g, b, w"
                                                        : "the gates g, beta";
  const std::pair<const char*, std::pair<const py::object*, bool>> all[] = {
      {"g", {&g, takes_g}}, {"beta", {&beta, takes_beta}}, {"b", {&b, takes_bw}}, {"w", {&w, takes_bw}}};
  for (const auto& [name, x] : all)
    if (!x.second && !x.first->is_none())
      fail(fn, name, "None (operator '" + std::string(ref::op_name(op)) + "' takes " + takes + ")",
           describe(*x.first));
}

/// The tensors and options of a call in dtype T (arguments in the order of call_args()).
template <class T, class Opt>
struct TypedCall {
  Tensor<T> q, k, v, do_, dht;
  ref::Gates<T> gates;
  Opt opt;
};

template <class T, class Opt>
TypedCall<T, Opt> make_typed(const RecurrentCall& c, std::vector<Arg>& a, Opt opt) {
  const std::string& fn = c.fn;
  TypedCall<T, Opt> t;
  t.q = borrow<T>(fn, a[0]), t.k = borrow<T>(fn, a[1]), t.v = borrow<T>(fn, a[2]);
  t.gates.g = borrow<T>(fn, a[3]);
  t.gates.beta = borrow<T>(fn, a[4]);
  t.gates.b = borrow<T>(fn, a[5]);
  t.gates.w = borrow<T>(fn, a[6]);
  const bool needs_beta =
      c.op == ref::Op::delta_rule || c.op == ref::Op::gated_delta_rule || c.op == ref::Op::kda;
  if (needs_beta && !t.gates.beta.defined() && t.q.dim() == 4)  // fla: beta=None means ones
    t.gates.beta = Tensor<T>({t.q.size(0), t.q.size(1), t.q.size(2)}, T(1));
  opt.initial_state = borrow<T>(fn, a[7]);
  t.do_ = borrow<T>(fn, a[8]);
  t.dht = borrow<T>(fn, a[9]);
  if (c.scale) opt.scale = narrow<T>(fn, "scale", *c.scale);
  opt.output_final_state = c.output_final_state;
  opt.cu_seqlens = offsets(fn, c.cu_seqlens);
  opt.use_qk_l2norm = c.use_qk_l2norm;
  opt.return_trace = c.return_trace;
  t.opt = std::move(opt);
  return t;
}

/// Build the tensors and options of a call in dtype T, run `runner` with the GIL released and hand
/// the result back as (o, final_state) or (o, final_state, trace). `opt` may be a type derived
/// from RecurrentOptions<T> (the chunked kernels add chunk_size and num_threads).
template <class T, class Opt, class Runner>
py::tuple run_typed(const RecurrentCall& c, std::vector<Arg>& a, Opt opt, Runner&& runner) {
  TypedCall<T, Opt> t = make_typed<T>(c, a, std::move(opt));
  ref::RecurrentOutput<T> out;
  {
    py::gil_scoped_release nogil;
    out = runner(t.q, t.k, t.v, t.gates, t.opt);
  }
  if (!c.return_trace) return py::make_tuple(to_numpy(out.o), to_numpy(out.final_state));
  py::dict trace;
  trace["v_bar"] = to_numpy(out.v_bar);
  trace["r"] = to_numpy(out.r);
  trace["written"] = to_numpy(out.written);
  return py::make_tuple(to_numpy(out.o), to_numpy(out.final_state), trace);
}

/// The argument list of a call in a fixed order: q, k, v, g, beta, b, w, initial_state, do, dht.
inline std::vector<Arg> call_args(const RecurrentCall& c) {
  return {{"q", c.q}, {"k", c.k}, {"v", c.v}, {"g", c.g}, {"beta", c.beta}, {"b", c.b},
          {"w", c.w}, {"initial_state", c.initial_state}, {"do", c.do_}, {"dht", c.dht}};
}

/// Dispatch a call on its dtype. `make_opt<T>()` gives the options object (RecurrentOptions<T> or
/// a type derived from it); `runner(q, k, v, gates, opt)` computes the RecurrentOutput<T>.
template <template <class> class OptT = ref::RecurrentOptions, class Runner>
py::tuple call_recurrent(const RecurrentCall& c, Runner&& runner,
                         const OptT<double>& opt64 = {}, const OptT<float>& opt32 = {}) {
  std::vector<Arg> a = call_args(c);
  if (c.copy) convert_all(c.fn, a);
  if (common_dtype(c.fn, a) == DType::f64) return run_typed<double>(c, a, opt64, runner);
  return run_typed<float>(c, a, opt32, runner);
}

/// Gradients as a dict of arrays: 'dq', 'dk', 'dv', 'dh0' and those of the operator's gates
/// ('dg', 'dbeta', 'db', 'dw'); a gradient that is not defined is left out.
template <class T>
py::dict grads_dict(const ref::RecurrentGrads<T>& g) {
  py::dict d;
  const std::pair<const char*, const Tensor<T>*> all[] = {
      {"dq", &g.dq}, {"dk", &g.dk}, {"dv", &g.dv}, {"dg", &g.dg},
      {"dbeta", &g.dbeta}, {"db", &g.db}, {"dw", &g.dw}, {"dh0", &g.dh0}};
  for (const auto& [name, t] : all)
    if (t->defined()) d[name] = to_numpy(*t);
  return d;
}

void bind_reference(py::module_& m);
void bind_steps(py::module_& m);
void bind_backward(py::module_& m);
void bind_routing(py::module_& m);
void bind_chunk(py::module_& m);
void bind_cuda(py::module_& m);  ///< only in the build with LINATTN_PY_CUDA (src/cuda/)

}  // namespace linattn::pyb
