// walkthroughs/check_your_kernel.cpp -- "check your kernel": linattn as ground truth from C++.
//
// A kernel author's loop, on real numbers: make inputs in the flash-linear-attention layout, run
// "your kernel" on them in float32, run the float64 reference (reference/recurrent.hpp) on the same
// values widened exactly, and let reference/compare.hpp give the verdict. Four kernels are checked:
//   1. a correct per-token Gated DeltaNet (Eqs.15-17 in the S = W^T layout), written here in plain
//      loops as a kernel author would;
//   2. linattn's own chunked CPU kernel (optimized/cpu/chunk.hpp) in float32;
//   3. kernel 1 with the error read from the state BEFORE the decay (the wrong GDN of SPEC section 2);
//   4. kernel 1 as a chunked kernel that forgets to carry the state from one 64-token chunk to the
//      next -- which passes at T = 64 and fails from T = 65: test lengths must cross chunk boundaries.
// Then the backward: linattn's chunked CPU backward in float32 against the float64 reference backward
// (reference/recurrent_backward.hpp) with ref::compare_gradients, and the same backward fed a wrong
// upstream gradient (the final state's term dropped), which the verdict must catch.
// The program exits 1 unless every verdict is the expected one, so running it is itself a check.
// Python kernels: linattn.testing does the same (docs/python.md).
// Usage: check_your_kernel [--T n]   (65 <= n <= 16384; default 130)

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "optimized/cpu/chunk.hpp"
#include "optimized/cpu/chunk_backward.hpp"
#include "reference/compare.hpp"
#include "reference/recurrent.hpp"
#include "reference/recurrent_backward.hpp"

namespace {

using linattn::index_t;
using linattn::Tensor;
namespace ref = linattn::ref;

// ---------------------------------------------------------------------------------------------
// 1. Inputs in fla's layout: q, k [B, T, H, K], v [B, T, H, V], g [B, T, H] = log alpha <= 0,
//    beta [B, T, H] in [0, 1], initial state h0 [B, H, K, V]. Keys L2-normalised, as models do.
// ---------------------------------------------------------------------------------------------
struct Inputs {
  Tensor<float> q, k, v, g, beta, h0;
  float scale;
};

Inputs make_inputs(index_t B, index_t T, index_t H, index_t K, index_t V, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.f, 1.f);
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  Inputs in{Tensor<float>({B, T, H, K}), Tensor<float>({B, T, H, K}), Tensor<float>({B, T, H, V}),
            Tensor<float>({B, T, H}),    Tensor<float>({B, T, H}),    Tensor<float>({B, H, K, V}),
            1.f / std::sqrt(static_cast<float>(K))};
  for (float& x : in.q) x = n01(rng);
  for (float& x : in.v) x = n01(rng);
  for (float& x : in.h0) x = 0.5f * n01(rng);
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < T; ++t)
      for (index_t h = 0; h < H; ++h) {
        float norm = 0;
        for (index_t i = 0; i < K; ++i) {
          const float x = n01(rng);
          in.k(b, t, h, i) = x;
          norm += x * x;
        }
        for (index_t i = 0; i < K; ++i) in.k(b, t, h, i) /= std::sqrt(norm);
        in.g(b, t, h) = std::log(1.f / (1.f + std::exp(-(2.5f + 1.5f * n01(rng)))));  // log sigmoid: alpha ~ 0.9
        in.beta(b, t, h) = u01(rng);
      }
  return in;
}

// ---------------------------------------------------------------------------------------------
// 2. "Your kernel": Gated DeltaNet one token at a time, float32 state S [K, V] per (sequence, head):
//      S~ = alpha_t S;  v_bar = S~^T k_t;  S = S~ + k_t (beta_t (v_t - v_bar))^T;  o_t = S^T (scale q_t)
//    (Eqs.15-17 with W = S^T). The bugs are switches, so that the harness has something to catch.
// ---------------------------------------------------------------------------------------------
enum class Bug { none, error_before_decay, state_lost_between_chunks };

struct KernelOut {
  Tensor<float> o, final_state;
};

KernelOut my_gdn(const Inputs& in, Bug bug) {
  const index_t B = in.q.size(0), T = in.q.size(1), H = in.q.size(2), K = in.q.size(3), V = in.v.size(3);
  KernelOut out{Tensor<float>({B, T, H, V}), Tensor<float>({B, H, K, V})};
  std::vector<float> S(static_cast<size_t>(K * V)), vbar(static_cast<size_t>(V));
  for (index_t b = 0; b < B; ++b)
    for (index_t h = 0; h < H; ++h) {
      for (index_t i = 0; i < K; ++i)
        for (index_t j = 0; j < V; ++j) S[i * V + j] = in.h0(b, h, i, j);
      for (index_t t = 0; t < T; ++t) {
        if (bug == Bug::state_lost_between_chunks && t > 0 && t % 64 == 0) std::fill(S.begin(), S.end(), 0.f);
        const float alpha = std::exp(in.g(b, t, h));
        if (bug != Bug::error_before_decay)
          for (float& s : S) s *= alpha;  // decay first (Eq.15) ...
        for (index_t j = 0; j < V; ++j) {  // ... then read along k (Eq.16)
          vbar[j] = 0;
          for (index_t i = 0; i < K; ++i) vbar[j] += S[i * V + j] * in.k(b, t, h, i);
        }
        if (bug == Bug::error_before_decay)
          for (float& s : S) s *= alpha;  // the bug: the error was read from the undecayed state
        for (index_t i = 0; i < K; ++i)  // write (Eq.17)
          for (index_t j = 0; j < V; ++j)
            S[i * V + j] += in.k(b, t, h, i) * in.beta(b, t, h) * (in.v(b, t, h, j) - vbar[j]);
        for (index_t j = 0; j < V; ++j) {  // read the new state with the query (Eq.8)
          float o = 0;
          for (index_t i = 0; i < K; ++i) o += S[i * V + j] * in.scale * in.q(b, t, h, i);
          out.o(b, t, h, j) = o;
        }
      }
      for (index_t i = 0; i < K; ++i)
        for (index_t j = 0; j < V; ++j) out.final_state(b, h, i, j) = S[i * V + j];
    }
  return out;
}

// ---------------------------------------------------------------------------------------------
// 3. The ground truth: the naive reference in float64 on the same values, widened exactly.
// ---------------------------------------------------------------------------------------------
ref::RecurrentOptions<double> options64(const Inputs& in) {  // the kernel's scale and initial state, widened
  ref::RecurrentOptions<double> opt;
  opt.scale = static_cast<double>(in.scale);
  opt.initial_state = ref::widen(in.h0);
  return opt;
}

ref::RecurrentOutput<double> reference(const Inputs& in) {
  ref::RecurrentOptions<double> opt = options64(in);
  opt.output_final_state = true;
  return ref::naive_recurrent_gated_delta_rule(ref::widen(in.q), ref::widen(in.k), ref::widen(in.v),
                                               ref::widen(in.g), ref::widen(in.beta), opt);
}

// One verdict: print every comparison, then PASS or FAIL; true when it is the expected one.
bool verdict(const char* title, const std::vector<ref::Comparison>& comps, bool expect_pass) {
  std::printf("\n%s\n", title);
  for (const auto& c : comps) std::printf("  %s\n", c.report().c_str());
  const bool pass = ref::all_ok(comps);
  std::printf("  VERDICT: %s (expected %s)\n", pass ? "PASS" : "FAIL", expect_pass ? "PASS" : "FAIL");
  return pass == expect_pass;
}

constexpr long long kMinT = 65, kMaxT = 16384;  // the chunk bug shows from T = 65; 16384 runs in seconds
constexpr const char* kUsage = "usage: check_your_kernel [--T n]   (65 <= n <= 16384, default 130)\n";

// --T's value: a whole number in [kMinT, kMaxT], or a linattn::Error that names what came.
index_t parse_T(const char* s) {
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno == ERANGE || n < kMinT || n > kMaxT)
    throw linattn::Error("check_your_kernel: argument '--T' expected a whole number from " + std::to_string(kMinT) +
                         " to " + std::to_string(kMaxT) + " but got '" + s + "'");
  return static_cast<index_t>(n);
}

int run(int argc, char** argv) {
  index_t T = 130;  // two chunk boundaries of 64 tokens, and a partial last chunk
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (!std::strcmp(argv[i], "--T")) {
      if (i + 1 == argc) throw linattn::Error("check_your_kernel: argument '--T' expected a value but got none");
      T = parse_T(argv[++i]);
    } else {
      std::fprintf(stderr, "check_your_kernel: unknown argument '%s'\n%s", argv[i], kUsage);
      return 2;
    }
  }
  const index_t B = 2, H = 2, K = 16, V = 12;
  std::printf("check_your_kernel: Gated DeltaNet, B=%ld T=%ld H=%ld K=%ld V=%ld, float32 kernels against the float64\n"
              "reference; tolerance for a float32 computation of %ld tokens: relative RMS %.1e (reference/compare.hpp)\n",
              static_cast<long>(B), static_cast<long>(T), static_cast<long>(H), static_cast<long>(K),
              static_cast<long>(V), static_cast<long>(T), ref::Tolerance::of<float>().for_length(T).rtol_rms);
  const Inputs in = make_inputs(B, T, H, K, V, 2607);
  const auto want = reference(in);
  const ref::RecurrentOptions<double> opt64 = options64(in);
  const Tensor<double> q64 = ref::widen(in.q), k64 = ref::widen(in.k), v64 = ref::widen(in.v);
  // The verdict on (o, final_state): the defaults for float32 outputs; q64, k64, v64 and opt64 are the reference's
  // inputs and options, which set the floors (the state's size S, counting one write k_t v_t^T, and o's natural
  // size scale ||q_t|| S) and the longest sequence.
  auto check = [&](const KernelOut& out) {
    return ref::compare_outputs(out.o, out.final_state, want, q64, k64, v64, opt64);
  };
  bool all_as_expected = true;

  const KernelOut good = my_gdn(in, Bug::none);
  all_as_expected &= verdict("1. a correct per-token kernel", check(good), true);

  linattn::cpu::ChunkOptions<float> copt;
  copt.scale = in.scale;
  copt.initial_state = in.h0;
  copt.output_final_state = true;
  const auto chunked = linattn::cpu::chunk_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, copt);
  all_as_expected &= verdict("2. linattn's chunked CPU kernel in float32 (optimized/cpu/chunk.hpp, C = 64)",
                             check({chunked.o, chunked.final_state}), true);

  const KernelOut early = my_gdn(in, Bug::error_before_decay);
  all_as_expected &= verdict("3. the error read before the decay (the wrong GDN of SPEC section 2)",
                             check(early), false);

  const KernelOut lost = my_gdn(in, Bug::state_lost_between_chunks);
  all_as_expected &= verdict("4. a chunked kernel that does not carry its state into the next 64-token chunk",
                             check(lost), false);

  // The same bug on 64 tokens: nothing crosses a chunk boundary, so nothing can show it.
  const Inputs in64 = make_inputs(B, 64, H, K, V, 2607);
  const KernelOut lost64 = my_gdn(in64, Bug::state_lost_between_chunks);
  all_as_expected &= verdict("4'. the same kernel at T = 64 passes: test lengths must cross chunk boundaries",
                             ref::compare_outputs(lost64.o, lost64.final_state, reference(in64), ref::widen(in64.q),
                                                  ref::widen(in64.k), ref::widen(in64.v), options64(in64)),
                             true);

  // 5. The backward. Upstream gradients do [B, T, H, V] and dht [N, H, K, V] of the loss
  //    sum(do * o) + sum(dht * final_state); the reference backward runs on everything widened.
  Tensor<float> dout({B, T, H, V}), dht({B, H, K, V});
  {
    std::mt19937 rng(7);
    std::normal_distribution<float> n01(0.f, 1.f);
    for (float& x : dout) x = n01(rng);
    for (float& x : dht) x = n01(rng);
  }
  const auto want_grads = ref::naive_recurrent_gated_delta_rule_backward(
      q64, k64, v64, ref::widen(in.g), ref::widen(in.beta), ref::widen(dout), ref::widen(dht), opt64);
  const auto grads = linattn::cpu::chunk_gated_delta_rule_backward(in.q, in.k, in.v, in.g, in.beta, dout, dht, copt);
  all_as_expected &= verdict("5. linattn's chunked CPU backward in float32 (gradients bound 1e-4 for float32)",
                             ref::compare_gradients(grads, want_grads, q64, k64, opt64), true);
  const auto no_dht = linattn::cpu::chunk_gated_delta_rule_backward(in.q, in.k, in.v, in.g, in.beta, dout,
                                                                    Tensor<float>(dht.shape()), copt);
  all_as_expected &= verdict("6. the same backward given dht = 0 (the final state's gradient dropped)",
                             ref::compare_gradients(no_dht, want_grads, q64, k64, opt64), false);

  std::printf("\n%s\n", all_as_expected ? "Every verdict is the expected one."
                                        : "SOME VERDICT IS NOT THE EXPECTED ONE (exit 1).");
  return all_as_expected ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a bad --T, or anything the kernels or the verdict throw
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
