// optimized/bench/bench_cpu_forward.cpp -- forward-pass timings of the CPU kernels: the naive
// reference, the tuned token-by-token kernel (fused recurrent) and the chunked kernel, for
// DeltaNet, GDN, KDA and GDN2, against the machine's own float GEMM rate measured in the same run.
//
// Usage: bench_cpu_forward [--quick] [--T 1024,4096,16384] [--d 64,128] [--H 4]
//                          [--chunks 16,32,64] [--ops dn,gdn,kda,gdn2] [--naive-T 64]
//                          [--min-time 0.3] [--no-naive] [--simd baseline|avx2|avx512]
// Threads: OpenMP's (set OMP_NUM_THREADS); every kernel and the GEMM use the same count.
// Output: a Markdown table per operator (paste into optimized/cpu/RESULTS.md). Each time is the
// best of several runs (after one warm-up run) totalling at least --min-time seconds.
//
// FLOP counts (multiply and add = 2; exponentials and gathers not counted), per token per head,
// K = d_k, V = d_v, C = chunk size:
//   recurrent (naive and fused): 6 K V (+ K V for the decay of GDN, KDA, GDN2): the state update,
//     the read o = S^T q and the error read e^T S, each K V multiply-adds.
//   chunked: the products the kernel actually performs per chunk, divided by C: L and the causal
//     scores P (C^2 K each, triangles), (I + L)^-1 (C^3 / 3), [w_aux | u] (C^2 (K + V)), v_new
//     and (q (.) e^G) S (2 C K V each), P v_new (C^2 V), S' (2 C K V + K V).
// The naive reference is far slower; it is timed at --naive-T tokens and its time is scaled
// linearly in T (it is exactly linear), and marked "extrapolated".
#include <cmath>
#include <cstdio>
#include <string>

#include "optimized/bench/bench_common.hpp"
#include "optimized/cpu/chunk.hpp"
#include "optimized/cpu/fused_recurrent.hpp"

using namespace linattn;
using namespace linattn::bench;

namespace {

double recurrent_flops(Op op, double K, double V) {
  return 6 * K * V + (op == Op::delta_rule ? 0 : K * V);
}
double chunk_flops(double K, double V, double C) {
  const double tri = C * (C + 1) / 2;  // entries of a C x C lower triangle (with the diagonal)
  const double per_chunk = 2 * tri * K * 2      // L and P
                           + C * C * C / 3      // (I + L)^-1
                           + 2 * tri * (K + V)  // [w_aux | u] = A [e e^G | u0]
                           + 2 * 2 * C * K * V  // v_new and (q e^G) S
                           + 2 * tri * V        // P v_new
                           + 2 * C * K * V + K * V;  // S'
  return per_chunk / C;
}

}  // namespace

int main(int argc, char** argv) try {
  Config cfg;
  cfg.Ts = {1024, 4096, 16384};
  parse_args(argc, argv, cfg, [](const std::string& a, const std::function<std::string()>& next) {
    if (a != "--simd") return false;
    const std::string l = next();
    if (l != "baseline" && l != "avx2" && l != "avx512")
      fail("bench_cpu_forward", a, "baseline, avx2 or avx512", "'" + l + "'");
    cpu::set_simd_level(l == "baseline" ? cpu::SimdLevel::baseline
                        : l == "avx2"   ? cpu::SimdLevel::avx2
                                        : cpu::SimdLevel::avx512);
    return true;
  });
  const int threads = print_banner("bench_cpu_forward", cfg);
  const double gemm_rate = gemm_ceiling(2048, std::max(cfg.min_time, 0.5), false, threads);
  std::printf("- B = 1, H = %ld, K = V = d; best of >= 3 runs; %%GEMM = GFLOP/s / ceiling\n",
              long(cfg.H));
  if (cfg.naive)
    std::printf("- naive: timed at T = %ld and scaled linearly (marked \"extrap.\")\n",
                long(cfg.naive_T));

  for (Op op : cfg.ops) {
    std::printf("\n## %s\n\n", short_name(op));
    std::printf("| T | d | kernel | time (ms) | tokens/s | GFLOP/s | %%GEMM | vs fused | rel. diff vs fused |\n");
    std::printf("|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for (index_t d : cfg.ds)
      for (index_t T : cfg.Ts) {
        const Inputs in = make_inputs(op, T, cfg.H, d, d, 1234 + T + d);
        ref::RecurrentOptions<float> ro;
        ro.output_final_state = true;
        const double tokens = double(T), th = double(T) * cfg.H;
        auto row = [&](const std::string& name, double secs, double flops_per_tok, double t_fused,
                       const std::string& diff) {
          const double gf = flops_per_tok * th / secs / 1e9;
          std::printf("| %ld | %ld | %s | %.3f | %.3g | %.1f | %.0f%% | %s | %s |\n", long(T), long(d),
                      name.c_str(), secs * 1e3, tokens / secs, gf, 100 * gf / gemm_rate,
                      t_fused > 0 ? (std::to_string(int(std::lround(100 * t_fused / secs))) + "%").c_str() : "-",
                      diff.c_str());
        };
        if (cfg.naive) {
          const Inputs small = make_inputs(op, cfg.naive_T, cfg.H, d, d, 99);
          const double tn = best_time([&] { run_naive(op, small, ro); }, 0.0) * double(T) / cfg.naive_T;
          row("naive reference (extrap.)", tn, recurrent_flops(op, d, d), -1, "-");
        }
        ref::RecurrentOutput<float> fused;
        const double tf = best_time(
            [&] { fused = cpu::fused_recurrent_forward(op, in.q, in.k, in.v, in.gates, ro); },
            cfg.min_time);
        row("fused recurrent", tf, recurrent_flops(op, d, d), tf, "-");
        for (index_t C : cfg.chunks) {
          cpu::ChunkOptions<float> co;
          co.output_final_state = true;
          co.chunk_size = C;
          ref::RecurrentOutput<float> ch;
          const double tc = best_time(
              [&] { ch = cpu::chunk_forward(op, in.q, in.k, in.v, in.gates, co); }, cfg.min_time);
          char diff[64];
          std::snprintf(diff, sizeof diff, "%.1e", rel_rms(ch.o, fused.o));
          row("chunked C=" + std::to_string(C), tc, chunk_flops(d, d, C), tf, diff);
        }
        std::fflush(stdout);
      }
  }
  std::printf("\n\"vs fused\" = fused-recurrent time / this kernel's time (> 100%%: faster than the "
              "fused recurrent kernel).\n");
  return 0;
} catch (...) {  // a bad option or size (linattn::Error, std::bad_alloc): the message, exit status 2
  return cli::report_error("bench_cpu_forward", "lower --T, --d or --H");
}
