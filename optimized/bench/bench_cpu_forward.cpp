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
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "optimized/cpu/chunk.hpp"
#include "optimized/cpu/fused_recurrent.hpp"
#include "optimized/cpu/gemm.hpp"
#include "optimized/cpu/simd_level.hpp"
#include "reference/recurrent.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace linattn;
using ref::Op;

namespace {

struct Config {
  std::vector<index_t> Ts{1024, 4096, 16384}, ds{64, 128}, chunks{16, 32, 64};
  std::vector<Op> ops{Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2};
  index_t H = 4, naive_T = 64;
  double min_time = 0.3;
  bool naive = true;
};

std::vector<index_t> parse_list(const std::string& s) {
  std::vector<index_t> r;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) r.push_back(std::stoll(x));
  return r;
}

const char* short_name(Op op) {
  switch (op) {
    case Op::delta_rule: return "DeltaNet";
    case Op::gated_delta_rule: return "GDN";
    case Op::kda: return "KDA";
    case Op::gdn2: return "GDN2";
    default: return "?";
  }
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

/// Best wall time of fn() over runs totalling at least min_time seconds (after one warm-up).
double best_time(const std::function<void()>& fn, double min_time) {
  using clock = std::chrono::steady_clock;
  fn();
  double best = 1e30, total = 0;
  for (int runs = 0; runs < 3 || total < min_time; ++runs) {
    const auto t0 = clock::now();
    fn();
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::min(best, s), total += s;
    if (runs >= 200) break;
  }
  return best;
}

/// Random inputs as a model makes them: unit keys, log-decays log(sigmoid(N(2.5, 1.5))) (most
/// decays in 0.8..1), gates in [0, 1].
struct Inputs {
  Tensor<float> q, k, v;
  ref::Gates<float> gates;
};
Inputs make_inputs(Op op, index_t T, index_t H, index_t K, index_t V, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  auto normal = [&](std::vector<index_t> shape) {
    Tensor<float> t(std::move(shape));
    for (float& x : t) x = nd(rng);
    return t;
  };
  Inputs in;
  in.q = normal({1, T, H, K}), in.k = normal({1, T, H, K}), in.v = normal({1, T, H, V});
  for (index_t i = 0; i < T * H; ++i) {
    float* kr = in.k.data() + i * K;
    float ss = 0;
    for (index_t d = 0; d < K; ++d) ss += kr[d] * kr[d];
    for (index_t d = 0; d < K; ++d) kr[d] /= std::sqrt(ss);
  }
  auto log_gate = [&] { return -std::log1p(std::exp(-(2.5f + 1.5f * nd(rng)))); };
  if (op == Op::gated_delta_rule) in.gates.g = Tensor<float>({1, T, H});
  if (op == Op::kda || op == Op::gdn2) in.gates.g = Tensor<float>({1, T, H, K});
  for (float& x : in.gates.g) x = log_gate();
  if (op != Op::gdn2) {
    in.gates.beta = Tensor<float>({1, T, H});
    for (float& x : in.gates.beta) x = ud(rng);
  } else {
    in.gates.b = Tensor<float>({1, T, H, K});
    in.gates.w = Tensor<float>({1, T, H, V});
    for (float& x : in.gates.b) x = ud(rng);
    for (float& x : in.gates.w) x = ud(rng);
  }
  return in;
}

ref::RecurrentOutput<float> run_naive(Op op, const Inputs& in, const ref::RecurrentOptions<float>& o) {
  switch (op) {
    case Op::delta_rule: return ref::naive_recurrent_delta_rule(in.q, in.k, in.v, in.gates.beta, o);
    case Op::gated_delta_rule:
      return ref::naive_recurrent_gated_delta_rule(in.q, in.k, in.v, in.gates.g, in.gates.beta, o);
    case Op::kda: return ref::naive_recurrent_kda(in.q, in.k, in.v, in.gates.g, in.gates.beta, o);
    default: return ref::naive_recurrent_gdn2(in.q, in.k, in.v, in.gates.g, in.gates.b, in.gates.w, o);
  }
}

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

double rel_rms(const Tensor<float>& a, const Tensor<float>& b) {
  double num = 0, den = 0;
  for (index_t i = 0; i < a.numel(); ++i) {
    const double d = double(a.data()[i]) - b.data()[i];
    num += d * d, den += double(b.data()[i]) * b.data()[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  std::string cmdline;
  for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") cfg.Ts = {1024}, cfg.ds = {64}, cfg.chunks = {64}, cfg.min_time = 0.05;
    else if (a == "--T") cfg.Ts = parse_list(next());
    else if (a == "--d") cfg.ds = parse_list(next());
    else if (a == "--H") cfg.H = std::stoll(next());
    else if (a == "--chunks") cfg.chunks = parse_list(next());
    else if (a == "--naive-T") cfg.naive_T = std::stoll(next());
    else if (a == "--min-time") cfg.min_time = std::stod(next());
    else if (a == "--no-naive") cfg.naive = false;
    else if (a == "--simd") {
      const std::string l = next();
      cpu::set_simd_level(l == "baseline" ? cpu::SimdLevel::baseline
                          : l == "avx2"   ? cpu::SimdLevel::avx2
                                          : cpu::SimdLevel::avx512);
    }
    else if (a == "--ops") {
      cfg.ops.clear();
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) {
        if (x == "dn") cfg.ops.push_back(Op::delta_rule);
        else if (x == "gdn") cfg.ops.push_back(Op::gated_delta_rule);
        else if (x == "kda") cfg.ops.push_back(Op::kda);
        else if (x == "gdn2") cfg.ops.push_back(Op::gdn2);
        else { std::fprintf(stderr, "unknown op %s (dn, gdn, kda, gdn2)\n", x.c_str()); return 2; }
      }
    } else {
      std::fprintf(stderr, "unknown argument %s (see the comment at the top of the source)\n", a.c_str());
      return 2;
    }
  }
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  std::printf("# bench_cpu_forward\n\n");
  std::printf("- command: `%s`\n", cmdline.c_str());
  std::printf("- CPU: %s; %d logical CPUs; OpenMP threads: %d; kernels compiled for: %s\n",
              cpu_model().c_str(), static_cast<int>(std::thread::hardware_concurrency()), threads,
              cpu::simd_level_name());

  // The ceiling: our blocked SGEMM, 2048^3, same thread count.
  const index_t n = 2048;
  std::vector<float> A(n * n), Bm(n * n), Cm(n * n);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (float& x : A) x = nd(rng);
  for (float& x : Bm) x = nd(rng);
  const double tg = best_time([&] { cpu::sgemm(n, n, n, A.data(), n, Bm.data(), n, Cm.data(), n); },
                              std::max(cfg.min_time, 0.5));
  const double gemm_rate = 2.0 * n * n * n / tg / 1e9;
  std::printf("- float GEMM ceiling (cpu::sgemm, %ld^3, %d threads): %.1f GFLOP/s\n", long(n), threads,
              gemm_rate);
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
}
