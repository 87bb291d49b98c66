// proofs_tests/test_bad_input.cpp -- every public function of reference/ refuses bad input loudly.
//
// Issue 2, item 5. For the tensor type, the per-token steps, the sequence functions, softmax and
// linear attention and the feature maps: wrong ranks and shapes, wrong vector lengths, NaN and Inf,
// log-gates > 0 (or -inf), beta / b / w / alpha outside [0, 1], bad cu_seqlens offsets, a wrong
// initial-state shape, a non-finite scale. Each call must throw linattn::Error (not some other
// exception, not a crash) whose message has the form
//   "<function>: argument '<name>' expected <what was wanted> but got <what came>"
// and must leave every input exactly as it was (compared bit for bit after the throw).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "generators.hpp"
#include "reference/delta_rules.hpp"
#include "reference/feature_maps.hpp"
#include "reference/linear_attention.hpp"
#include "reference/recurrent.hpp"
#include "reference/softmax_attention.hpp"

using namespace linattn;
using namespace linattn::testing;
using Catch::Matchers::Contains;
using ref::Vec;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

/// `call` must throw linattn::Error with "<fn>: argument '<arg>' expected <expected> but got <got>"
/// (each part checked as a substring).
void require_error(const std::function<void()>& call, const std::string& fn, const std::string& arg,
                   const std::string& expected, const std::string& got) {
  INFO("function " << fn << ", argument " << arg);
  REQUIRE_THROWS_AS(call(), Error);
  REQUIRE_THROWS_WITH(call(), Contains(fn + ": argument '" + arg + "'") &&
                                  Contains("expected " + expected) && Contains("but got " + got));
}

/// Bit-for-bit equality (NaN equals NaN), shapes included.
bool same_bits(const Tensor<double>& a, const Tensor<double>& b) {
  if (a.shape() != b.shape() || a.defined() != b.defined()) return false;
  return a.numel() == 0 ||
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.numel())) == 0;
}

/// Deep copies of all tensors of a problem, to check nothing was touched by a failing call.
struct Snapshot {
  std::vector<Tensor<double>> before;
  std::vector<Tensor<double>> live;
  explicit Snapshot(const Problem<double>& p)
      : live{p.q, p.k, p.v, p.gates.g, p.gates.beta, p.gates.b, p.gates.w, p.opt.initial_state} {
    for (const auto& t : live) before.push_back(t.defined() ? t.clone() : Tensor<double>());
  }
  bool unchanged() const {
    for (size_t i = 0; i < live.size(); ++i)
      if (!same_bits(live[i], before[i])) return false;
    return true;
  }
};

/// A valid problem: B = 2, T = 5, H = 2, K = 3, V = 4 (d_k != d_v), initial state given.
Problem<double> valid_problem(Op op) {
  Case c;
  c.B = 2, c.T = 5, c.H = 2, c.K = 3, c.V = 4;
  c.initial_state = true;
  c.seed = 7;
  return make_problem<double>(op, c);
}

/// A valid packed problem: B = 1, T = 5, cu_seqlens = {0, 2, 5}.
Problem<double> valid_packed_problem(Op op) {
  Case c;
  c.B = 1, c.T = 5, c.H = 2, c.K = 3, c.V = 4;
  c.cu_seqlens = {0, 2, 5};
  c.initial_state = true;
  c.seed = 8;
  return make_problem<double>(op, c);
}

const std::string fn_of(Op op) { return std::string("naive_recurrent_") + ref::op_name(op); }

/// Runs the sequence function of p.op on p; requires the error and that p is left unmodified.
void require_seq_error(const Problem<double>& p, const std::string& arg, const std::string& expected,
                       const std::string& got) {
  const Snapshot snap(p);
  require_error([&] { run_reference(p); }, fn_of(p.op), arg, expected, got);
  REQUIRE(snap.unchanged());
}

constexpr Op kOps[] = {Op::linear_attn, Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2};
constexpr Op kGated[] = {Op::gated_delta_rule, Op::kda, Op::gdn2};

}  // namespace

// =================================================================================================
// The tensor type.
// =================================================================================================

TEST_CASE("Tensor from and reshape and indexing reject wrong sizes with linattn Error") {
  require_error([] { Tensor<double>::from({2, 3}, {1, 2, 3, 4, 5}); }, "Tensor::from", "values",
                "6 elements for shape [2, 3]", "5");
  const auto t = Tensor<double>::from({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor<double> keep = t.clone();
  require_error([&] { t.reshape({4, 2}); }, "Tensor::reshape", "shape", "6 elements", "[4, 2] with 8 elements");
  require_error([&] { t.reshape({-2, -3}); }, "Tensor::reshape", "shape",
                "non-negative dimensions", "[-2, -3]");
  REQUIRE(same_bits(t, keep));
  REQUIRE(t.shape() == std::vector<index_t>{2, 3});
  require_error([] { Tensor<double>({2, -1}); }, "Tensor", "shape", "non-negative dimensions", "[2, -1]");
  double buf[4] = {};
  require_error([&] { Tensor<double>::wrap(buf, {-4}); }, "Tensor::wrap", "shape",
                "non-negative dimensions", "[-4]");
  require_error([&] { t(0); }, "Tensor::operator()", "indices", "2 indices", "1");
  require_error([&] { t(1, 3); }, "Tensor::operator()", "indices", "an index in [0, 3) for dim 1", "3");
  require_error([&] { t(-1, 0); }, "Tensor::operator()", "indices", "an index in [0, 2) for dim 0", "-1");
}

// =================================================================================================
// Per-token steps (reference/delta_rules.hpp).
// =================================================================================================

namespace {

/// Arguments of one step with d_phi = 3, d_v = 2; every field valid until a test breaks one.
struct StepArgs {
  Tensor<double> W = Tensor<double>::from({2, 3}, {0.1, -0.2, 0.3, 0.4, 0.5, -0.6});
  Vec<double> kappa{0.6, 0.0, 0.8}, v{1.0, -1.0};
  double alpha = 0.9, beta = 0.5;
  Vec<double> alpha_vec{0.9, 0.8, 1.0}, b{0.5, 0.5, 0.5}, w{0.5, 1.0};
};

/// The steps with their name; each runs on a StepArgs.
struct Step {
  std::string name;
  std::function<void(const StepArgs&)> run;
  bool has_alpha, has_beta, has_alpha_vec, has_bw;
};

std::vector<Step> all_steps() {
  return {
      {"linear_attention_step", [](const StepArgs& a) { ref::linear_attention_step(a.W, a.kappa, a.v); },
       false, false, false, false},
      {"deltanet_step", [](const StepArgs& a) { ref::deltanet_step(a.W, a.kappa, a.v, a.beta); }, false,
       true, false, false},
      {"gdn_step", [](const StepArgs& a) { ref::gdn_step(a.W, a.kappa, a.v, a.alpha, a.beta); }, true, true,
       false, false},
      {"gdn_step_decay_after_error",
       [](const StepArgs& a) { ref::gdn_step_decay_after_error(a.W, a.kappa, a.v, a.alpha, a.beta); }, true,
       true, false, false},
      {"kda_step", [](const StepArgs& a) { ref::kda_step(a.W, a.kappa, a.v, a.alpha_vec, a.beta); }, false,
       true, true, false},
      {"gdn2_step", [](const StepArgs& a) { ref::gdn2_step(a.W, a.kappa, a.v, a.alpha_vec, a.b, a.w); },
       false, false, true, true},
  };
}

/// Runs `step` on `a` (after `corrupt`), requires the error, and that W is bit-for-bit unchanged.
void require_step_error(const Step& step, const std::function<void(StepArgs&)>& corrupt,
                        const std::string& arg, const std::string& expected, const std::string& got) {
  StepArgs a;
  corrupt(a);
  const Tensor<double> W0 = a.W.defined() ? a.W.clone() : Tensor<double>();
  require_error([&] { step.run(a); }, step.name, arg, expected, got);
  REQUIRE(same_bits(a.W, W0));
}

}  // namespace

TEST_CASE("Per-token steps reject wrong shapes and non-finite values and leave W unmodified") {
  for (const Step& s : all_steps()) {
    SECTION(s.name) {
      require_step_error(s, [](StepArgs& a) { a.W = Tensor<double>({2, 3, 1}); }, "W", "a 2-D tensor",
                         "3-D shape [2, 3, 1]");
      require_step_error(s, [](StepArgs& a) { a.W = Tensor<double>(); }, "W", "a 2-D tensor",
                         "an empty tensor");
      require_step_error(s, [](StepArgs& a) { a.W(1, 2) = kNaN; }, "W", "finite values", "nan at index [1, 2]");
      require_step_error(s, [](StepArgs& a) { a.W(0, 1) = -kInf; }, "W", "finite values", "-inf at index [0, 1]");
      require_step_error(s, [](StepArgs& a) { a.kappa = {1.0, 0.0}; }, "kappa", "length 3", "length 2");
      require_step_error(s, [](StepArgs& a) { a.kappa[2] = kInf; }, "kappa", "finite values", "inf at index 2");
      require_step_error(s, [](StepArgs& a) { a.v = {1.0, 2.0, 3.0}; }, "v", "length 2", "length 3");
      require_step_error(s, [](StepArgs& a) { a.v[0] = kNaN; }, "v", "finite values", "nan at index 0");
    }
  }
}

TEST_CASE("Per-token steps reject alpha and beta and b and w outside 0 to 1") {
  for (const Step& s : all_steps()) {
    SECTION(s.name) {
      if (s.has_beta) {
        require_step_error(s, [](StepArgs& a) { a.beta = 1.5; }, "beta", "a value in [0, 1]", "1.5");
        require_step_error(s, [](StepArgs& a) { a.beta = -0.5; }, "beta", "a value in [0, 1]", "-0.5");
        require_step_error(s, [](StepArgs& a) { a.beta = kNaN; }, "beta", "a value in [0, 1]", "nan");
      }
      if (s.has_alpha) {
        require_step_error(s, [](StepArgs& a) { a.alpha = 2.0; }, "alpha", "a value in [0, 1]", "2");
        require_step_error(s, [](StepArgs& a) { a.alpha = -0.25; }, "alpha", "a value in [0, 1]", "-0.25");
        require_step_error(s, [](StepArgs& a) { a.alpha = kInf; }, "alpha", "a value in [0, 1]", "inf");
      }
      if (s.has_alpha_vec) {
        require_step_error(s, [](StepArgs& a) { a.alpha_vec = {0.5, 0.5}; }, "alpha_vec", "length 3", "length 2");
        require_step_error(s, [](StepArgs& a) { a.alpha_vec[1] = 1.5; }, "alpha_vec", "values in [0, 1]",
                           "1.5 at index 1");
        require_step_error(s, [](StepArgs& a) { a.alpha_vec[0] = -0.5; }, "alpha_vec", "values in [0, 1]",
                           "-0.5 at index 0");
      }
      if (s.has_bw) {
        require_step_error(s, [](StepArgs& a) { a.b = {0.5, 0.5, 0.5, 0.5}; }, "b", "length 3", "length 4");
        require_step_error(s, [](StepArgs& a) { a.b[2] = 1.5; }, "b", "values in [0, 1]", "1.5 at index 2");
        require_step_error(s, [](StepArgs& a) { a.w = {0.5}; }, "w", "length 2", "length 1");
        require_step_error(s, [](StepArgs& a) { a.w[1] = -0.5; }, "w", "values in [0, 1]", "-0.5 at index 1");
        require_step_error(s, [](StepArgs& a) { a.w[0] = kNaN; }, "w", "finite values", "nan at index 0");
      }
    }
  }
}

TEST_CASE("gdn2_step_S and read and add_outer and the layout conversions reject bad input") {
  // gdn2_step_S on S (K x V = 3 x 2).
  const StepArgs a;
  const Tensor<double> S = ref::W_to_S(a.W);
  const Tensor<double> S0 = S.clone();
  auto stepS = [&](const Tensor<double>& s, const Vec<double>& k, const Vec<double>& v,
                   const Vec<double>& al, const Vec<double>& b, const Vec<double>& w) {
    return [=] { ref::gdn2_step_S(s, k, v, al, b, w); };
  };
  const std::string fS = "gdn2_step_S";
  require_error(stepS(Tensor<double>({6}), a.kappa, a.v, a.alpha_vec, a.b, a.w), fS, "S", "a 2-D tensor",
                "1-D shape [6]");
  Tensor<double> Sn = S.clone();
  Sn(2, 1) = kNaN;
  require_error(stepS(Sn, a.kappa, a.v, a.alpha_vec, a.b, a.w), fS, "S", "finite values", "nan at index [2, 1]");
  require_error(stepS(S, {1, 0}, a.v, a.alpha_vec, a.b, a.w), fS, "k", "length 3", "length 2");
  require_error(stepS(S, a.kappa, {1, 0, 0}, a.alpha_vec, a.b, a.w), fS, "v", "length 2", "length 3");
  require_error(stepS(S, a.kappa, a.v, {1, 1, 1.5}, a.b, a.w), fS, "alpha_vec", "values in [0, 1]", "1.5 at index 2");
  require_error(stepS(S, a.kappa, a.v, a.alpha_vec, {0, -1, 0}, a.w), fS, "b", "values in [0, 1]", "-1 at index 1");
  require_error(stepS(S, a.kappa, a.v, a.alpha_vec, a.b, {2, 0}), fS, "w", "values in [0, 1]", "2 at index 0");
  REQUIRE(same_bits(S, S0));

  // read(W, x): W d_v x d_phi = 2 x 3.
  require_error([&] { ref::read(Tensor<double>({3}), a.kappa); }, "read", "W", "a 2-D tensor", "1-D shape [3]");
  require_error([&] { ref::read<double>(a.W, {1, 2}); }, "read", "x", "length 3", "length 2");
  require_error([&] { ref::read<double>(a.W, {1, kNaN, 2}); }, "read", "x", "finite values", "nan at index 1");
  Tensor<double> Wn = a.W.clone();
  Wn(0, 0) = kInf;
  require_error([&] { ref::read(Wn, a.kappa); }, "read", "W", "finite values", "inf at index [0, 0]");

  // add_outer(W, a, b): a in R^{d_v}, b in R^{d_phi}.
  Tensor<double> W = a.W.clone();
  require_error([&] { ref::add_outer<double>(W, {1, 2, 3}, a.kappa); }, "add_outer", "a", "length 2", "length 3");
  require_error([&] { ref::add_outer<double>(W, a.v, {1, 2}); }, "add_outer", "b", "length 3", "length 2");
  require_error([&] { ref::add_outer<double>(W, {kNaN, 0}, a.kappa); }, "add_outer", "a", "finite values", "nan");
  REQUIRE(same_bits(W, a.W));

  // transpose / W_to_S / S_to_W need a matrix.
  require_error([] { ref::transpose(Tensor<double>({2, 2, 2})); }, "transpose", "M", "a 2-D tensor",
                "3-D shape [2, 2, 2]");
  require_error([] { ref::W_to_S(Tensor<double>({4})); }, "W_to_S", "W", "a 2-D tensor", "1-D shape [4]");
  require_error([] { ref::S_to_W(Tensor<double>()); }, "S_to_W", "S", "a 2-D tensor", "an empty tensor");
}

// =================================================================================================
// Sequence functions (reference/recurrent.hpp): B = 2, T = 5, H = 2, K = 3, V = 4.
// =================================================================================================

TEST_CASE("Sequence functions reject wrong shapes and non-finite inputs and leave inputs unmodified") {
  for (Op op : kOps) {
    SECTION(ref::op_name(op)) {
      {
        Problem<double> p = valid_problem(op);
        p.q = p.q.reshape({2, 5, 6});
        require_seq_error(p, "q", "a 4-D tensor", "3-D shape [2, 5, 6]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.q = Tensor<double>({2, 5, 0, 3});
        require_seq_error(p, "q.shape[2] (H)", "a positive size", "0");
      }
      {
        Problem<double> p = valid_problem(op);
        p.k = Tensor<double>({2, 5, 2, 4});
        require_seq_error(p, "k", "shape [2, 5, 2, 3]", "shape [2, 5, 2, 4]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.v = Tensor<double>({2, 6, 2, 4});
        require_seq_error(p, "v", "shape [2, 5, 2, *]", "shape [2, 6, 2, 4]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.v = Tensor<double>({2, 5, 2, 0});
        require_seq_error(p, "v.shape[3] (V)", "a positive size", "0");
      }
      {
        Problem<double> p = valid_problem(op);
        p.q(1, 2, 0, 1) = kNaN;
        require_seq_error(p, "q", "finite values", "nan at index [1, 2, 0, 1]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.k(0, 4, 1, 2) = kInf;
        require_seq_error(p, "k", "finite values", "inf at index [0, 4, 1, 2]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.v(1, 0, 1, 3) = -kInf;
        require_seq_error(p, "v", "finite values", "-inf at index [1, 0, 1, 3]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.opt.scale = kNaN;
        require_seq_error(p, "scale", "a finite value", "nan");
      }
      {
        Problem<double> p = valid_problem(op);
        p.opt.scale = kInf;
        require_seq_error(p, "scale", "a finite value", "inf");
      }
    }
  }
}

TEST_CASE("Sequence functions reject positive or infinite log-gates and gates outside 0 to 1") {
  for (Op op : kGated) {
    SECTION(std::string("g of ") + ref::op_name(op)) {
      const std::string g_shape = op == Op::gated_delta_rule ? "shape [2, 5, 2]" : "shape [2, 5, 2, 3]";
      {
        Problem<double> p = valid_problem(op);
        p.gates.g = op == Op::gated_delta_rule ? Tensor<double>({2, 5, 2, 3}) : Tensor<double>({2, 5, 2});
        require_seq_error(p, "g", g_shape, op == Op::gated_delta_rule ? "shape [2, 5, 2, 3]" : "shape [2, 5, 2]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.gates.g = Tensor<double>();
        require_seq_error(p, "g", "a tensor of " + g_shape, "an empty tensor");
      }
      {
        Problem<double> p = valid_problem(op);
        p.gates.g.data()[7] = 0.5;  // log alpha > 0 means alpha > 1
        require_seq_error(p, "g", "values in (-inf, 0]", "0.5 at index");
      }
      {
        Problem<double> p = valid_problem(op);
        p.gates.g.data()[3] = -kInf;
        require_seq_error(p, "g", "values in (-inf, 0]", "-inf at index");
      }
      {
        Problem<double> p = valid_problem(op);
        p.gates.g.data()[0] = kNaN;
        require_seq_error(p, "g", "values in (-inf, 0]", "nan at index");
      }
    }
  }
  for (Op op : {Op::delta_rule, Op::gated_delta_rule, Op::kda}) {
    SECTION(std::string("beta of ") + ref::op_name(op)) {
      {
        Problem<double> p = valid_problem(op);
        p.gates.beta = Tensor<double>({2, 5, 1});
        require_seq_error(p, "beta", "shape [2, 5, 2]", "shape [2, 5, 1]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.gates.beta(1, 3, 1) = 1.5;
        require_seq_error(p, "beta", "values in [0, 1]", "1.5 at index [1, 3, 1]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.gates.beta(0, 0, 0) = -0.5;
        require_seq_error(p, "beta", "values in [0, 1]", "-0.5 at index [0, 0, 0]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.gates.beta(0, 1, 0) = kNaN;
        require_seq_error(p, "beta", "values in [0, 1]", "nan at index [0, 1, 0]");
      }
    }
  }
  SECTION("b and w of gdn2") {
    {
      Problem<double> p = valid_problem(Op::gdn2);
      p.gates.b = Tensor<double>({2, 5, 2, 4});
      require_seq_error(p, "b", "shape [2, 5, 2, 3]", "shape [2, 5, 2, 4]");
    }
    {
      Problem<double> p = valid_problem(Op::gdn2);
      p.gates.b(1, 1, 1, 2) = 1.5;
      require_seq_error(p, "b", "values in [0, 1]", "1.5 at index [1, 1, 1, 2]");
    }
    {
      Problem<double> p = valid_problem(Op::gdn2);
      p.gates.w = Tensor<double>({2, 5, 2, 3});
      require_seq_error(p, "w", "shape [2, 5, 2, 4]", "shape [2, 5, 2, 3]");
    }
    {
      Problem<double> p = valid_problem(Op::gdn2);
      p.gates.w(0, 2, 0, 3) = -0.5;
      require_seq_error(p, "w", "values in [0, 1]", "-0.5 at index [0, 2, 0, 3]");
    }
    {
      Problem<double> p = valid_problem(Op::gdn2);
      p.gates.w(0, 2, 0, 3) = kInf;
      require_seq_error(p, "w", "values in [0, 1]", "inf at index [0, 2, 0, 3]");
    }
  }
}

TEST_CASE("Sequence functions reject cu_seqlens offsets that do not start at 0 or decrease or miss T") {
  for (Op op : kOps) {
    SECTION(ref::op_name(op)) {
      {
        Problem<double> p = valid_problem(op);  // B = 2
        p.opt.cu_seqlens = {0, 5};
        require_seq_error(p, "q", "batch size 1 when cu_seqlens is given", "B = 2");
      }
      auto packed = [&](std::vector<index_t> cu) {
        Problem<double> p = valid_packed_problem(op);
        p.opt.cu_seqlens = std::move(cu);
        p.opt.initial_state = Tensor<double>();
        return p;
      };
      require_seq_error(packed({1, 3, 5}), "cu_seqlens", "first offset 0", "1");
      require_seq_error(packed({0, 3, 2, 5}), "cu_seqlens", "non-decreasing offsets", "3 then 2 at position 2");
      require_seq_error(packed({0, 3, 4}), "cu_seqlens", "last offset equal to the packed length T = 5", "4");
      require_seq_error(packed({0, 3, 6}), "cu_seqlens", "last offset equal to the packed length T = 5", "6");
      require_seq_error(packed({0}), "cu_seqlens", "at least 2 offsets", "1");
      // And the valid packing runs.
      REQUIRE_NOTHROW(run_reference(packed({0, 2, 2, 5})));
    }
  }
}

TEST_CASE("Sequence functions reject an initial state of the wrong shape or with NaN") {
  for (Op op : kOps) {
    SECTION(ref::op_name(op)) {
      {
        Problem<double> p = valid_problem(op);
        p.opt.initial_state = Tensor<double>({2, 2, 4, 3});  // V x K instead of K x V
        require_seq_error(p, "initial_state", "shape [2, 2, 3, 4]", "shape [2, 2, 4, 3]");
      }
      {
        Problem<double> p = valid_packed_problem(op);  // 2 packed sequences need 2 states
        p.opt.initial_state = Tensor<double>({1, 2, 3, 4});
        require_seq_error(p, "initial_state", "shape [2, 2, 3, 4]", "shape [1, 2, 3, 4]");
      }
      {
        Problem<double> p = valid_problem(op);
        p.opt.initial_state(1, 0, 2, 3) = kNaN;
        require_seq_error(p, "initial_state", "finite values", "nan at index [1, 0, 2, 3]");
      }
    }
  }
}

// =================================================================================================
// Softmax attention, linear attention, feature maps.
// =================================================================================================

TEST_CASE("Softmax attention rejects bad shapes and non-finite values and bad masks") {
  const std::string fn = "naive_softmax_attn";
  Case c;
  c.B = 1, c.T = 4, c.H = 4, c.K = 3, c.V = 2, c.seed = 3;
  const Problem<double> p = make_problem<double>(Op::linear_attn, c);  // q k v [1, 4, 4, *]
  const Tensor<double> q = p.q, k = p.k, v = p.v;
  const Tensor<double> q0 = q.clone(), k0 = k.clone(), v0 = v.clone();
  auto call = [](Tensor<double> q_, Tensor<double> k_, Tensor<double> v_, ref::SoftmaxOptions<double> o = {}) {
    return [=] { ref::naive_softmax_attn(q_, k_, v_, o); };
  };
  require_error(call(q.reshape({4, 4, 3}), k, v), fn, "q", "a 4-D tensor", "3-D shape [4, 4, 3]");
  require_error(call(Tensor<double>({1, 4, 4, 0}), k, v), fn, "q.shape[3] (K)", "a positive size", "0");
  require_error(call(q, Tensor<double>({1, 4, 4, 2}), v), fn, "k", "shape [1, 4, *, 3]", "shape [1, 4, 4, 2]");
  require_error(call(q, Tensor<double>({1, 4, 3, 3}), Tensor<double>({1, 4, 3, 2})), fn, "k",
                "a head count dividing H = 4", "3");
  require_error(call(q, k, Tensor<double>({1, 4, 2, 2})), fn, "v", "shape [1, 4, 4, *]", "shape [1, 4, 2, 2]");
  Tensor<double> qn = q.clone(), kn = k.clone(), vn = v.clone();
  qn(0, 3, 2, 1) = kNaN, kn(0, 0, 0, 0) = kInf, vn(0, 1, 3, 1) = -kInf;
  require_error(call(qn, k, v), fn, "q", "finite values", "nan at index [0, 3, 2, 1]");
  require_error(call(q, kn, v), fn, "k", "finite values", "inf at index [0, 0, 0, 0]");
  require_error(call(q, k, vn), fn, "v", "finite values", "-inf at index [0, 1, 3, 1]");
  ref::SoftmaxOptions<double> o;
  o.mask = Tensor<double>({4, 3});
  require_error(call(q, k, v, o), fn, "mask", "shape [4, 4]", "shape [4, 3]");
  o.mask = Tensor<double>({4, 4});
  o.mask(2, 1) = kNaN;
  require_error(call(q, k, v, o), fn, "mask", "finite values or -inf", "nan");
  o.mask(2, 1) = kInf;
  require_error(call(q, k, v, o), fn, "mask", "finite values or -inf", "inf");
  o.mask(2, 1) = 0;
  o.mask(0, 0) = -kInf;  // query 0 sees only key 0 (causal): nothing left
  require_error(call(q, k, v, o), fn, "mask", "at least one unmasked key per query", "query 0 fully masked");
  ref::SoftmaxOptions<double> s;
  s.scale = kNaN;
  require_error(call(q, k, v, s), fn, "scale", "a finite value", "nan");
  REQUIRE(same_bits(q, q0));
  REQUIRE(same_bits(k, k0));
  REQUIRE(same_bits(v, v0));
}

TEST_CASE("Linear attention and feature maps reject bad shapes and non-finite values") {
  const auto q = Tensor<double>::from({3, 2}, {1, 2, 3, 4, 5, 6});
  const auto v = Tensor<double>::from({3, 1}, {1, 2, 3});
  const Tensor<double> q0 = q.clone(), v0 = v.clone();
  using Fn = Tensor<double> (*)(const Tensor<double>&, const Tensor<double>&, const Tensor<double>&,
                                const ref::LinearAttnOptions<double>&);
  const std::pair<std::string, Fn> fns[] = {
      {"linear_attention_recurrent", &ref::linear_attention_recurrent<double>},
      {"linear_attention_parallel", &ref::linear_attention_parallel<double>}};
  for (const auto& [fn, f] : fns) {
    SECTION(fn) {
      const ref::LinearAttnOptions<double> o;
      require_error([&] { f(q.reshape({6}), q, v, o); }, fn, "q", "a 2-D tensor", "1-D shape [6]");
      require_error([&] { f(q, q.reshape({2, 3}), v, o); }, fn, "k", "shape [3, 2]", "shape [2, 3]");
      require_error([&] { f(q, q, Tensor<double>({4, 1}), o); }, fn, "v", "shape [3, *]", "shape [4, 1]");
      Tensor<double> bad = q.clone();
      bad(2, 0) = kNaN;
      require_error([&] { f(bad, q, v, o); }, fn, "q", "finite values", "nan at index [2, 0]");
      require_error([&] { f(q, bad, v, o); }, fn, "k", "finite values", "nan at index [2, 0]");
      ref::LinearAttnOptions<double> neg;
      neg.normalize = true;
      neg.eps = -1e-3;
      require_error([&] { f(q, q, v, neg); }, fn, "eps", "a value in [0, inf]", "-0.001");
      REQUIRE(same_bits(q, q0));
      REQUIRE(same_bits(v, v0));
    }
  }
  SECTION("feature_map and l2_normalize") {
    for (ref::FeatureMap phi : {ref::FeatureMap::identity, ref::FeatureMap::l2norm,
                                ref::FeatureMap::elu_plus_one, ref::FeatureMap::relu}) {
      INFO(ref::to_string(phi));
      require_error([&] { ref::feature_map<double>(phi, {1.0, kNaN}); }, "feature_map", "x", "finite values",
                    "nan at index 1");
      require_error([&] { ref::feature_map<double>(phi, {kInf}); }, "feature_map", "x", "finite values",
                    "inf at index 0");
    }
    require_error([] { ref::l2_normalize<double>({0.0, kNaN}); }, "l2_normalize", "x", "finite values",
                  "nan at index 1");
    require_error([] { ref::l2_normalize<double>({1.0, 2.0}, -1.0); }, "l2_normalize", "eps",
                  "a value in [0, inf]", "-1");
  }
}
