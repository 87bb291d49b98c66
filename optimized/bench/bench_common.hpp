// optimized/bench/bench_common.hpp -- what the CPU benchmark programs share: the command-line
// options common to them, the timer, the machine banner, the float GEMM ceiling, random inputs as
// a model makes them, the naive reference dispatch, and the relative RMS difference.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

#include "optimized/cpu/gemm.hpp"
#include "optimized/cpu/simd_level.hpp"
#include "reference/recurrent.hpp"
#include "walkthroughs/lm/cli.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace linattn::bench {

using ref::Op;

/// The options every benchmark takes (defaults are each program's own).
struct Config {
  std::vector<index_t> Ts, ds{64, 128}, chunks{16, 32, 64};
  std::vector<Op> ops{Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2};
  index_t H = 4, naive_T = 64;
  double min_time = 0.3;
  bool naive = true;
  std::string cmdline;  ///< argv joined by spaces, for the banner
};

/// Limits of the options: sizes beyond them are refused before anything is allocated (a larger
/// T x H x d still fails as std::bad_alloc, which the programs report).
inline constexpr long long kMaxT = 1 << 24, kMaxDim = 4096;

inline std::vector<index_t> parse_list(const std::string& prog, const std::string& flag, const std::string& s,
                                       long long hi) {
  const std::vector<long long> v = cli::to_int_list(prog, flag, s, 1, hi);
  return std::vector<index_t>(v.begin(), v.end());
}

/// Fills cfg from argv: --quick --T --d --H --chunks --naive-T --min-time --no-naive --ops, and
/// any program-specific option through extra(name, next) (true when it took the option; next()
/// returns the option's value). A missing or bad value or an unknown option is a linattn::Error
/// naming it (the programs print it and exit with status 2).
using ExtraOption = std::function<bool(const std::string&, const std::function<std::string()>&)>;
inline void parse_args(int argc, char** argv, Config& cfg, const ExtraOption& extra) {
  const std::string prog = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "bench";
  for (int i = 0; i < argc; ++i) {
    if (i) cfg.cmdline += ' ';
    cfg.cmdline += argv[i];
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::function<std::string()> next = [&]() -> std::string {
      if (i + 1 >= argc) fail(prog, a, "a value after it", "nothing");
      return argv[++i];
    };
    if (a == "--quick") cfg.Ts = {1024}, cfg.ds = {64}, cfg.chunks = {64}, cfg.min_time = 0.05;
    else if (a == "--T") cfg.Ts = parse_list(prog, a, next(), kMaxT);
    else if (a == "--d") cfg.ds = parse_list(prog, a, next(), kMaxDim);
    else if (a == "--H") cfg.H = cli::to_int(prog, a, next(), 1, kMaxDim);
    else if (a == "--chunks") cfg.chunks = parse_list(prog, a, next(), kMaxDim);
    else if (a == "--naive-T") cfg.naive_T = cli::to_int(prog, a, next(), 1, kMaxT);
    else if (a == "--min-time") cfg.min_time = cli::to_double(prog, a, next(), 0, 3600);
    else if (a == "--no-naive") cfg.naive = false;
    else if (a == "--ops") {
      cfg.ops.clear();
      for (const std::string& x : cli::split(prog, a, next())) {
        if (x == "dn") cfg.ops.push_back(Op::delta_rule);
        else if (x == "gdn") cfg.ops.push_back(Op::gated_delta_rule);
        else if (x == "kda") cfg.ops.push_back(Op::kda);
        else if (x == "gdn2") cfg.ops.push_back(Op::gdn2);
        else fail(prog, a, "a comma-separated list of dn, gdn, kda, gdn2", "'" + x + "'");
      }
    } else if (!extra || !extra(a, next)) {
      fail(prog, "argument " + std::to_string(i), "a known option (see the comment at the top of the source)",
           "'" + a + "'");
    }
  }
}

inline const char* short_name(Op op) {
  switch (op) {
    case Op::delta_rule: return "DeltaNet";
    case Op::gated_delta_rule: return "GDN";
    case Op::kda: return "KDA";
    case Op::gdn2: return "GDN2";
    default: return "?";
  }
}

inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

inline int omp_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// Prints the title, the command and the machine line; returns the OpenMP thread count.
inline int print_banner(const char* program, const Config& cfg) {
  const int threads = omp_threads();
  std::printf("# %s\n\n", program);
  std::printf("- command: `%s`\n", cfg.cmdline.c_str());
  std::printf("- CPU: %s; %d logical CPUs; OpenMP threads: %d; kernels compiled for: %s\n",
              cpu_model().c_str(), static_cast<int>(std::thread::hardware_concurrency()), threads,
              cpu::simd_level_name());
  return threads;
}

/// Seconds on the wall clock (steady), or on the process's CPU-time clock (summed over threads).
inline double now(bool cpu_clock) {
  if (cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Best time of fn() over runs totalling at least min_time seconds (after one warm-up), at least
/// 3 runs and at most 201.
inline double best_time(const std::function<void()>& fn, double min_time, bool cpu_clock = false) {
  fn();
  double best = 1e30, total = 0;
  for (int runs = 0; runs < 3 || total < min_time; ++runs) {
    const double t0 = now(cpu_clock);
    fn();
    const double s = now(cpu_clock) - t0;
    best = std::min(best, s), total += s;
    if (runs >= 200) break;
  }
  return best;
}

/// The ceiling: our blocked SGEMM on n x n x n, same thread count. Prints its line and returns
/// the rate in GFLOP/s.
inline double gemm_ceiling(index_t n, double min_time, bool cpu_clock, int threads) {
  std::vector<float> A(n * n), Bm(n * n), Cm(n * n);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (float& x : A) x = nd(rng);
  for (float& x : Bm) x = nd(rng);
  const double tg = best_time(
      [&] { cpu::sgemm(n, n, n, A.data(), n, Bm.data(), n, Cm.data(), n); }, min_time, cpu_clock);
  const double rate = 2.0 * n * n * n / tg / 1e9;
  std::printf("- float GEMM ceiling (cpu::sgemm, %ld^3, %d threads): %.1f GFLOP/s\n", long(n),
              threads, rate);
  return rate;
}

/// Random inputs as a model makes them: unit keys, log-decays log(sigmoid(N(2.5, 1.5))) (most
/// decays in 0.8..1), gates in [0, 1]; with grads, also do and dht standard normal.
struct Inputs {
  Tensor<float> q, k, v, do_, dht;
  ref::Gates<float> gates;
};
inline Inputs make_inputs(Op op, index_t T, index_t H, index_t K, index_t V, std::uint64_t seed,
                          bool grads = false) {
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
  if (grads) in.do_ = normal({1, T, H, V}), in.dht = normal({1, H, K, V});
  return in;
}

/// The naive reference forward (reference/recurrent.hpp) of `op` on `in`.
inline ref::RecurrentOutput<float> run_naive(Op op, const Inputs& in,
                                             const ref::RecurrentOptions<float>& o) {
  switch (op) {
    case Op::delta_rule: return ref::naive_recurrent_delta_rule(in.q, in.k, in.v, in.gates.beta, o);
    case Op::gated_delta_rule:
      return ref::naive_recurrent_gated_delta_rule(in.q, in.k, in.v, in.gates.g, in.gates.beta, o);
    case Op::kda: return ref::naive_recurrent_kda(in.q, in.k, in.v, in.gates.g, in.gates.beta, o);
    default: return ref::naive_recurrent_gdn2(in.q, in.k, in.v, in.gates.g, in.gates.b, in.gates.w, o);
  }
}

/// ||a - b|| / ||b|| over all entries.
inline double rel_rms(const Tensor<float>& a, const Tensor<float>& b) {
  double num = 0, den = 0;
  for (index_t i = 0; i < a.numel(); ++i) {
    const double d = double(a.data()[i]) - b.data()[i];
    num += d * d, den += double(b.data()[i]) * b.data()[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace linattn::bench
