// optimized/bench/bench_cpu_backward.cpp -- forward + backward timings of the chunked CPU kernels
// (optimized/cpu/chunk.hpp, chunk_backward.hpp) beside the naive reference forward and backward
// (reference/recurrent.hpp, recurrent_backward.hpp), for DeltaNet, GDN, KDA and GDN2, float32.
//
// Usage: bench_cpu_backward [--quick] [--T 1024,4096] [--d 64,128] [--H 4] [--chunks 16,32,64]
//                           [--ops dn,gdn,kda,gdn2] [--naive-T 64] [--min-time 0.3] [--no-naive]
//                           [--clock wall|cpu]
// Threads: OpenMP's (set OMP_NUM_THREADS). Output: a Markdown table per operator. Each time is
// the best of several runs (after one warm-up run) totalling at least --min-time seconds.
// --clock cpu times the process's CPU time (summed over threads) instead of the wall clock: on a
// machine shared with other jobs, with OMP_NUM_THREADS=1, it is the kernel's own cost.
// The naive reference is timed at --naive-T tokens and scaled linearly in T (it is exactly linear),
// marked "extrap.". Before timing, each operator's chunked backward is checked against the
// reference backward at T = --naive-T (every gradient, relative RMS; printed under the table).
//
// FLOP counts (multiply and add = 2; exponentials, gathers and transposes not counted), per token
// per head, K = d_k, V = d_v, C = chunk size, tri = C (C + 1) / 2:
//   reference backward: pass 1, the forward (7 K V: decay, error read, update); pass 2, the
//     recomputed step (5 K V) and its reverse (dW += dy x^T, dx, dr, dkappa, de, dW~ -= dr e^T, dg:
//     2 K V each; dW D: K V) = 27 K V.
//   chunked backward, per chunk divided by C: pass 1 (the forward for the states: L 2 tri K,
//     (I + L)^-1 C^3 / 3, [w_aux | u] 2 tri (K + V), v_new and S' 4 C K V), pass 2 (the same
//     recomputation plus P 2 tri K, without S'; then dv_new 2 C^2 V + 2 C K V, dKd, dS (2x),
//     dQg, dw_aux 2 C K V each, dP 2 tri V, dA 2 tri (K + V), dL 2 C^3, [dE | du0] 2 C^2 (K + V),
//     the pair sums of dL and dP 8 tri K).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "optimized/bench/bench_common.hpp"
#include "optimized/cpu/chunk.hpp"
#include "optimized/cpu/chunk_backward.hpp"
#include "reference/recurrent_backward.hpp"

using namespace linattn;
using namespace linattn::bench;

namespace {

bool g_cpu_clock = false;  // --clock cpu

ref::RecurrentGrads<float> run_naive_backward(Op op, const Inputs& in,
                                              const ref::RecurrentOptions<float>& o) {
  const auto& g = in.gates;
  switch (op) {
    case Op::delta_rule:
      return ref::naive_recurrent_delta_rule_backward(in.q, in.k, in.v, g.beta, in.do_, in.dht, o);
    case Op::gated_delta_rule:
      return ref::naive_recurrent_gated_delta_rule_backward(in.q, in.k, in.v, g.g, g.beta, in.do_,
                                                            in.dht, o);
    case Op::kda:
      return ref::naive_recurrent_kda_backward(in.q, in.k, in.v, g.g, g.beta, in.do_, in.dht, o);
    default:
      return ref::naive_recurrent_gdn2_backward(in.q, in.k, in.v, g.g, g.b, g.w, in.do_, in.dht, o);
  }
}

double reference_backward_flops(double K, double V) { return 27 * K * V; }
double chunk_backward_flops(double K, double V, double C) {
  const double tri = C * (C + 1) / 2;
  const double fwd = 2 * tri * K + C * C * C / 3 + 2 * tri * (K + V) + 2 * C * K * V;  // L .. v_new
  const double pass1 = fwd + 2 * C * K * V;                                             // + S'
  const double pass2 = fwd + 2 * tri * K                                                // + P
                       + 2 * C * C * V + 2 * C * K * V                                  // dv_new
                       + 4 * 2 * C * K * V + 2 * C * K * V                              // dKd, dS, dQg, dw_aux
                       + 2 * tri * V + 2 * tri * (K + V) + 2 * C * C * C                // dP, dA, dL
                       + 2 * C * C * (K + V) + 8 * tri * K;                             // [dE | du0], pairs
  return (pass1 + pass2) / C;
}

/// Largest relative RMS difference over the gradients that both define.
double max_rel_rms(const ref::RecurrentGrads<float>& a, const ref::RecurrentGrads<float>& b) {
  double worst = 0;
  auto one = [&](const Tensor<float>& x, const Tensor<float>& y) {
    if (x.defined() && y.defined()) worst = std::max(worst, rel_rms(x, y));
  };
  one(a.dq, b.dq), one(a.dk, b.dk), one(a.dv, b.dv), one(a.dg, b.dg), one(a.dbeta, b.dbeta);
  one(a.db, b.db), one(a.dw, b.dw), one(a.dh0, b.dh0);
  return worst;
}

}  // namespace

int main(int argc, char** argv) try {
  Config cfg;
  cfg.Ts = {1024, 4096};
  parse_args(argc, argv, cfg, [](const std::string& a, const std::function<std::string()>& next) {
    if (a != "--clock") return false;
    const std::string c = next();
    if (c != "wall" && c != "cpu") fail("bench_cpu_backward", a, "wall or cpu", "'" + c + "'");
    g_cpu_clock = c == "cpu";
    return true;
  });
  const int threads = print_banner("bench_cpu_backward", cfg);
  const double gemm_rate = gemm_ceiling(1024, std::max(cfg.min_time, 0.3), g_cpu_clock, threads);
  std::printf("- B = 1, H = %ld, K = V = d, dht given; best of >= 3 runs on the %s clock; GFLOP/s "
              "and %%GEMM are the backward's alone\n", long(cfg.H),
              g_cpu_clock ? "process CPU-time" : "wall");

  for (Op op : cfg.ops) {
    std::printf("\n## %s\n\n", short_name(op));
    std::printf("| T | d | kernel | forward (ms) | backward (ms) | fwd + bwd (ms) | fwd + bwd tokens/s "
                "| backward GFLOP/s | %%GEMM | bwd / fwd |\n");
    std::printf("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    std::vector<std::string> checks;
    for (index_t d : cfg.ds) {
      {  // correctness at a small T: chunked backward vs the reference backward, both float32
        const Inputs small = make_inputs(op, cfg.naive_T, cfg.H, d, d, 7 + d, true);
        ref::RecurrentOptions<float> ro;
        const auto want = run_naive_backward(op, small, ro);
        for (index_t C : cfg.chunks) {
          cpu::ChunkOptions<float> co;
          co.chunk_size = C;
          const auto got = cpu::chunk_backward(op, small.q, small.k, small.v, small.gates, small.do_,
                                               small.dht, co);
          char line[160];
          std::snprintf(line, sizeof line, "d = %ld, C = %ld, T = %ld: %.1e", long(d), long(C),
                        long(cfg.naive_T), max_rel_rms(got, want));
          checks.push_back(line);
        }
      }
      for (index_t T : cfg.Ts) {
        const Inputs in = make_inputs(op, T, cfg.H, d, d, 1234 + T + d, true);
        const double th = double(T) * cfg.H;
        auto row = [&](const std::string& name, double tf, double tb, double flops_per_tok) {
          const double gf = flops_per_tok * th / tb / 1e9;
          std::printf("| %ld | %ld | %s | %.3f | %.3f | %.3f | %.3g | %.1f | %.0f%% | %.2f |\n",
                      long(T), long(d), name.c_str(), tf * 1e3, tb * 1e3, (tf + tb) * 1e3,
                      double(T) / (tf + tb), gf, 100 * gf / gemm_rate, tb / tf);
        };
        if (cfg.naive) {
          const Inputs small = make_inputs(op, cfg.naive_T, cfg.H, d, d, 99, true);
          ref::RecurrentOptions<float> ro;
          ro.output_final_state = true;
          const double s = double(T) / double(cfg.naive_T);
          const double tf = best_time([&] { run_naive(op, small, ro); }, 0.0, g_cpu_clock) * s;
          const double tb =
              best_time([&] { run_naive_backward(op, small, ro); }, 0.0, g_cpu_clock) * s;
          row("naive reference (extrap.)", tf, tb, reference_backward_flops(d, d));
        }
        for (index_t C : cfg.chunks) {
          cpu::ChunkOptions<float> co;
          co.output_final_state = true;
          co.chunk_size = C;
          const double tf = best_time(
              [&] { cpu::chunk_forward(op, in.q, in.k, in.v, in.gates, co); }, cfg.min_time,
              g_cpu_clock);
          const double tb = best_time(
              [&] { cpu::chunk_backward(op, in.q, in.k, in.v, in.gates, in.do_, in.dht, co); },
              cfg.min_time, g_cpu_clock);
          row("chunked C=" + std::to_string(C), tf, tb, chunk_backward_flops(d, d, C));
        }
        std::fflush(stdout);
      }
    }
    std::printf("\nCheck, chunked backward vs reference backward (float32, largest relative RMS "
                "over the gradients):");
    for (const auto& c : checks) std::printf(" %s;", c.c_str());
    std::printf("\n");
  }
  std::printf("\n\"bwd / fwd\" = backward time / forward time of the same kernel.\n");
  return 0;
} catch (...) {  // a bad option or size (linattn::Error, std::bad_alloc): the message, exit status 2
  return cli::report_error("bench_cpu_backward", "lower --T, --d or --H");
}
