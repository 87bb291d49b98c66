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

#include <time.h>

#include "optimized/cpu/chunk.hpp"
#include "optimized/cpu/chunk_backward.hpp"
#include "optimized/cpu/gemm.hpp"
#include "optimized/cpu/simd_level.hpp"
#include "reference/recurrent.hpp"
#include "reference/recurrent_backward.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace linattn;
using ref::Op;

namespace {

struct Config {
  std::vector<index_t> Ts{1024, 4096}, ds{64, 128}, chunks{16, 32, 64};
  std::vector<Op> ops{Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2};
  index_t H = 4, naive_T = 64;
  double min_time = 0.3;
  bool naive = true;
  bool cpu_clock = false;
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

bool g_cpu_clock = false;  // --clock cpu

/// Seconds on the chosen clock: wall (steady) or the process's CPU time.
double now() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Best time of fn() over runs totalling at least min_time seconds (after one warm-up).
double best_time(const std::function<void()>& fn, double min_time) {
  fn();
  double best = 1e30, total = 0;
  for (int runs = 0; runs < 3 || total < min_time; ++runs) {
    const double t0 = now();
    fn();
    const double s = now() - t0;
    best = std::min(best, s), total += s;
    if (runs >= 200) break;
  }
  return best;
}

/// Random inputs as a model makes them: unit keys, log-decays log(sigmoid(N(2.5, 1.5))) (most
/// decays in 0.8..1), gates in [0, 1]; do and dht standard normal.
struct Inputs {
  Tensor<float> q, k, v, do_, dht;
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
  in.do_ = normal({1, T, H, V}), in.dht = normal({1, H, K, V});
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
    if (!x.defined() || !y.defined()) return;
    double num = 0, den = 0;
    for (index_t i = 0; i < x.numel(); ++i) {
      const double d = double(x.data()[i]) - y.data()[i];
      num += d * d, den += double(y.data()[i]) * y.data()[i];
    }
    worst = std::max(worst, std::sqrt(num / std::max(den, 1e-300)));
  };
  one(a.dq, b.dq), one(a.dk, b.dk), one(a.dv, b.dv), one(a.dg, b.dg), one(a.dbeta, b.dbeta);
  one(a.db, b.db), one(a.dw, b.dw), one(a.dh0, b.dh0);
  return worst;
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
    else if (a == "--clock") {
      const std::string c = next();
      if (c != "wall" && c != "cpu") { std::fprintf(stderr, "--clock wall or cpu, not %s\n", c.c_str()); return 2; }
      cfg.cpu_clock = c == "cpu";
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
  g_cpu_clock = cfg.cpu_clock;
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  std::printf("# bench_cpu_backward\n\n");
  std::printf("- command: `%s`\n", cmdline.c_str());
  std::printf("- CPU: %s; %d logical CPUs; OpenMP threads: %d; kernels compiled for: %s\n",
              cpu_model().c_str(), static_cast<int>(std::thread::hardware_concurrency()), threads,
              cpu::simd_level_name());
  const index_t n = 1024;  // the ceiling: our blocked SGEMM, same thread count
  std::vector<float> A(n * n), Bm(n * n), Cm(n * n);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (float& x : A) x = nd(rng);
  for (float& x : Bm) x = nd(rng);
  const double tg = best_time([&] { cpu::sgemm(n, n, n, A.data(), n, Bm.data(), n, Cm.data(), n); },
                              std::max(cfg.min_time, 0.3));
  const double gemm_rate = 2.0 * n * n * n / tg / 1e9;
  std::printf("- float GEMM ceiling (cpu::sgemm, %ld^3, %d threads): %.1f GFLOP/s\n", long(n),
              threads, gemm_rate);
  std::printf("- B = 1, H = %ld, K = V = d, dht given; best of >= 3 runs on the %s clock; GFLOP/s "
              "and %%GEMM are the backward's alone\n", long(cfg.H),
              cfg.cpu_clock ? "process CPU-time" : "wall");

  for (Op op : cfg.ops) {
    std::printf("\n## %s\n\n", short_name(op));
    std::printf("| T | d | kernel | forward (ms) | backward (ms) | fwd + bwd (ms) | fwd + bwd tokens/s "
                "| backward GFLOP/s | %%GEMM | bwd / fwd |\n");
    std::printf("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    std::vector<std::string> checks;
    for (index_t d : cfg.ds) {
      {  // correctness at a small T: chunked backward vs the reference backward, both float32
        const Inputs small = make_inputs(op, cfg.naive_T, cfg.H, d, d, 7 + d);
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
        const Inputs in = make_inputs(op, T, cfg.H, d, d, 1234 + T + d);
        const double th = double(T) * cfg.H;
        auto row = [&](const std::string& name, double tf, double tb, double flops_per_tok) {
          const double gf = flops_per_tok * th / tb / 1e9;
          std::printf("| %ld | %ld | %s | %.3f | %.3f | %.3f | %.3g | %.1f | %.0f%% | %.2f |\n",
                      long(T), long(d), name.c_str(), tf * 1e3, tb * 1e3, (tf + tb) * 1e3,
                      double(T) / (tf + tb), gf, 100 * gf / gemm_rate, tb / tf);
        };
        if (cfg.naive) {
          const Inputs small = make_inputs(op, cfg.naive_T, cfg.H, d, d, 99);
          ref::RecurrentOptions<float> ro;
          ro.output_final_state = true;
          const double s = double(T) / double(cfg.naive_T);
          const double tf = best_time([&] { run_naive(op, small, ro); }, 0.0) * s;
          const double tb = best_time([&] { run_naive_backward(op, small, ro); }, 0.0) * s;
          row("naive reference (extrap.)", tf, tb, reference_backward_flops(d, d));
        }
        for (index_t C : cfg.chunks) {
          cpu::ChunkOptions<float> co;
          co.output_final_state = true;
          co.chunk_size = C;
          const double tf = best_time(
              [&] { cpu::chunk_forward(op, in.q, in.k, in.v, in.gates, co); }, cfg.min_time);
          const double tb = best_time(
              [&] { cpu::chunk_backward(op, in.q, in.k, in.v, in.gates, in.do_, in.dht, co); },
              cfg.min_time);
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
}
