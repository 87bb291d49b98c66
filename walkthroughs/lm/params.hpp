// walkthroughs/lm/params.hpp -- the parameter store of the language model.
//
// All parameters live in one flat buffer (and their gradients in a second one of the same layout),
// so that the optimisers, the gradient-norm clipping and the checkpoints see one array. Each named
// parameter is a (rows x cols) slice with a kind that decides its optimiser (SPEC section 5):
//   matrix     2-D hidden weight matrix (projections, MLP): Muon when Muon is chosen, else AdamW
//   embedding  token embedding (vocab x d_model): Adam(W)
//   head       untied LM head (vocab x d_model): Adam(W)
//   vector     everything else (norm weights, conv weights, A_log, dt_bias, Gamma): Adam, no decay
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reference/check.hpp"

namespace linattn::lm {

enum class ParamKind { matrix, embedding, head, vector };

inline const char* to_string(ParamKind k) {
  switch (k) {
    case ParamKind::matrix: return "matrix";
    case ParamKind::embedding: return "embedding";
    case ParamKind::head: return "head";
    case ParamKind::vector: return "vector";
  }
  return "?";
}

/// How a parameter is initialised: N(0, std^2) when std > 0, else the constant `value`; or
/// log_uniform: log(A) with A ~ U(lo, hi) (the A_log of the GDN-family decays, SPEC section 5);
/// or uniform: U(lo, hi) (PyTorch's default for the short-convolution weights).
struct Init {
  double std = 0;     ///< > 0: normal(0, std)
  double value = 0;   ///< std == 0: every element = value
  enum class Custom { none, log_uniform, uniform } custom = Custom::none;
  double lo = 0, hi = 0;  ///< range of log_uniform / uniform
  /// Draw from a generator of this parameter's own (seeded with the seed and the name) instead of
  /// the shared one, so that adding the parameter leaves every other parameter's values unchanged
  /// (the random factor of a low-rank routing P: the routed model stays matched to its baseline).
  bool own_stream = false;
};

struct ParamSpec {
  std::string name;
  index_t offset = 0, rows = 0, cols = 0;
  ParamKind kind = ParamKind::vector;
  Init init;
  index_t numel() const { return rows * cols; }
};

/// Flat parameter + gradient storage with a table of named slices.
template <class T>
struct ParamStore {
  /// FNV-1a of a name (fixed, unlike std::hash, so initialisations are the same everywhere).
  static std::uint64_t name_hash(const std::string& name) {
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
    return h;
  }
  std::vector<ParamSpec> specs;
  std::vector<T> data, grad;

  /// Register a (rows x cols) parameter; returns its id. Call before allocate().
  int add(const std::string& name, index_t rows, index_t cols, ParamKind kind, Init init) {
    check_positive("ParamStore::add", name + ".rows", rows);
    check_positive("ParamStore::add", name + ".cols", cols);
    ParamSpec s;
    s.name = name;
    s.offset = specs.empty() ? 0 : specs.back().offset + specs.back().numel();
    s.rows = rows, s.cols = cols, s.kind = kind, s.init = init;
    specs.push_back(s);
    return static_cast<int>(specs.size()) - 1;
  }
  index_t size() const { return specs.empty() ? 0 : specs.back().offset + specs.back().numel(); }
  void allocate() {
    data.assign(static_cast<size_t>(size()), T(0));
    grad.assign(static_cast<size_t>(size()), T(0));
  }
  T* p(int id) { return data.data() + specs[static_cast<size_t>(id)].offset; }
  T* g(int id) { return grad.data() + specs[static_cast<size_t>(id)].offset; }
  const ParamSpec& spec(int id) const { return specs[static_cast<size_t>(id)]; }
  void zero_grad() { std::fill(grad.begin(), grad.end(), T(0)); }

  /// Draw every parameter from its Init with one generator, in registration order (parameters
  /// with Init::own_stream from a generator of their own, seeded by the seed and the name).
  void initialise(std::uint64_t seed) {
    std::mt19937_64 shared(seed);
    for (const ParamSpec& s : specs) {
      std::mt19937_64 own(seed ^ name_hash(s.name));
      std::mt19937_64& rng = s.init.own_stream ? own : shared;
      T* x = data.data() + s.offset;
      const index_t n = s.numel();
      switch (s.init.custom) {
        case Init::Custom::none:
          if (s.init.std > 0) {
            std::normal_distribution<double> nd(0.0, s.init.std);
            for (index_t i = 0; i < n; ++i) x[i] = static_cast<T>(nd(rng));
          } else {
            for (index_t i = 0; i < n; ++i) x[i] = static_cast<T>(s.init.value);
          }
          break;
        case Init::Custom::uniform: {
          std::uniform_real_distribution<double> u(s.init.lo, s.init.hi);
          for (index_t i = 0; i < n; ++i) x[i] = static_cast<T>(u(rng));
          break;
        }
        case Init::Custom::log_uniform: {  // A_log = log(A), A ~ U(lo, hi)
          std::uniform_real_distribution<double> u(s.init.lo, s.init.hi);
          for (index_t i = 0; i < n; ++i) x[i] = static_cast<T>(std::log(u(rng)));
          break;
        }
      }
    }
  }
};

}  // namespace linattn::lm
