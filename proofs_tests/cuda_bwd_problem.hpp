// proofs_tests/cuda_bwd_problem.hpp -- one backward test problem, shared by test_cuda_backward.cu and
// test_cuda_saved.cu: the case (forward case plus dht, l2norm, scale), the float64 problem with its
// random do and dht, the float32 inputs exactly as the device sees them (bf16 rounding of q, k, v,
// do and of bf16 gates), and the float64 reference backward (reference/recurrent_backward.hpp) on them.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>

#include "generators.hpp"
#include "optimized/cuda/chunk_cuda.hpp"
#include "reference/recurrent_backward.hpp"

namespace linattn::testing {

/// The structure of one backward case: the forward case plus dht, l2norm, scale.
struct BwdCase {
  Case c;
  bool with_dht = true, l2norm = false, custom_scale = false;
};

inline std::ostream& operator<<(std::ostream& os, const BwdCase& b) {
  return os << b.c << " dht=" << b.with_dht << " l2norm=" << b.l2norm
            << " scale=" << (b.custom_scale ? "0.7" : "default");
}

/// A full backward problem in float64: forward inputs, do, dht.
struct BwdProblem {
  Problem<double> p;
  Tensor<double> do_, dht;
};

inline BwdProblem make_bwd_problem(Op op, const BwdCase& b) {
  BwdProblem r;
  r.p = make_problem<double>(op, b.c, /*unit_keys=*/!b.l2norm);
  r.p.opt.use_qk_l2norm = b.l2norm;
  r.p.opt.output_final_state = false;
  if (b.custom_scale) r.p.opt.scale = 0.7;
  std::mt19937_64 rng(b.c.seed ^ 0x5851f42d4c957f2dULL);
  std::normal_distribution<double> nd(0.0, 1.0);
  r.do_ = Tensor<double>({b.c.B, b.c.T, b.c.H, b.c.V});
  for (double& x : r.do_) x = nd(rng);
  if (b.with_dht) {
    r.dht = Tensor<double>({r.p.N, b.c.H, b.c.K, b.c.V});
    for (double& x : r.dht) x = nd(rng);
  }
  return r;
}

/// The problem in float32 as the device sees it: q, k, v and do rounded to bf16 for cuda::DType::bf16,
/// the gates too for gate dtype bf16 (dht and the initial state stay float32).
struct DevProblem {
  Problem<float> p;
  Tensor<float> do_, dht;
};

inline DevProblem as_device_sees(const BwdProblem& b, cuda::DType dt, cuda::DType gdt) {
  DevProblem d;
  d.p = cast_problem<float>(b.p);
  d.do_ = cast<float>(b.do_);
  d.dht = cast<float>(b.dht);
  if (dt == cuda::DType::bf16) {
    d.p.q = cuda::round_to_bf16(d.p.q), d.p.k = cuda::round_to_bf16(d.p.k);
    d.p.v = cuda::round_to_bf16(d.p.v), d.do_ = cuda::round_to_bf16(d.do_);
  }
  if (gdt == cuda::DType::bf16) {
    Gates<float>& g = d.p.gates;
    g.g = cuda::round_to_bf16(g.g), g.beta = cuda::round_to_bf16(g.beta);
    g.b = cuda::round_to_bf16(g.b), g.w = cuda::round_to_bf16(g.w);
  }
  return d;
}

/// The float64 reference backward on the inputs the device sees.
inline ref::RecurrentGrads<double> reference_backward(const DevProblem& d) {
  const Problem<double> p = cast_problem<double>(d.p);
  const Tensor<double> do_ = cast<double>(d.do_), dht = cast<double>(d.dht);
  switch (p.op) {
    case Op::delta_rule:
      return ref::naive_recurrent_delta_rule_backward(p.q, p.k, p.v, p.gates.beta, do_, dht, p.opt);
    case Op::gated_delta_rule:
      return ref::naive_recurrent_gated_delta_rule_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta,
                                                            do_, dht, p.opt);
    case Op::kda:
      return ref::naive_recurrent_kda_backward(p.q, p.k, p.v, p.gates.g, p.gates.beta, do_, dht, p.opt);
    case Op::gdn2:
      return ref::naive_recurrent_gdn2_backward(p.q, p.k, p.v, p.gates.g, p.gates.b, p.gates.w, do_,
                                                dht, p.opt);
    default: break;
  }
  return {};
}

}  // namespace linattn::testing
