// walkthroughs/delta_rule_by_hand.cpp -- "the delta rule by hand": the first walkthrough.
//
// A program that teaches, in the style of a deal.II tutorial step: one attention head with a tiny
// memory W (d_v = 2 rows, d_phi = 3 columns) goes through three tokens under each of the five
// fast-weight rules of arXiv 2607.07953 (linear attention, DeltaNet, GDN, KDA, GDN2), and every
// number printed comes from the functions of reference/ -- nothing here re-implements the maths.
// Where an identity is shown, its second side is computed here, explicitly and visibly, and the
// two sides are compared; the program exits with status 1 if any identity fails (max |difference|
// above 1e-12), so running it is itself a check. See docs/walkthrough-delta-rule-by-hand.md.
//
// Sections: 0 introduction; 1 three tokens through each rule; 2 the worked example 2 -> 5 = 3.5;
// 3 the reductions of SPEC section 2; 4 the order of the read (Eq.3) and decay before error
// (Eq.15); 5 the kernel-library layout S = W^T.   Usage: delta_rule_by_hand [--section N]

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "reference/delta_rules.hpp"
#include "reference/linear_attention.hpp"
#include "reference/recurrent.hpp"

namespace {

using linattn::Error;
using linattn::index_t;
using Mat = linattn::Tensor<double>;
using Vec = std::vector<double>;
namespace ref = linattn::ref;

constexpr double kTol = 1e-12;  // an identity holds if the max |difference| is at most this

// ---------------------------------------------------------------------------------------------
// Printing: numbers rounded to 4 decimals, trailing zeros dropped, right-aligned in columns.
// ---------------------------------------------------------------------------------------------

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", x);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string pad_left(const std::string& s, size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}
std::string pad_right(const std::string& s, size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

/// "[      1    0.5 ]": every entry in a 7-character column, so vectors and matrix rows align.
std::string vec_str(const Vec& v) {
  std::string s = "[";
  for (double x : v) s += pad_left(num(x), 7);
  return s + " ]";
}
Vec row_of(const Mat& M, index_t i) {
  Vec r(static_cast<size_t>(M.size(1)));
  for (index_t j = 0; j < M.size(1); ++j) r[j] = M(i, j);
  return r;
}
/// One string per row of M.
std::vector<std::string> mat_rows(const Mat& M) {
  std::vector<std::string> rows;
  for (index_t i = 0; i < M.size(0); ++i) rows.push_back(vec_str(row_of(M, i)));
  return rows;
}

std::string diff_str(double d) {
  if (d == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", d);
  return buf;
}

/// "[1 0.5 0]": compact, for the inputs of a token.
std::string vec_short(const Vec& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ' ';
    s += num(v[i]);
  }
  return s + "]";
}

/// "    label         value          Eq.N": label, value and equation in fixed columns (a long
/// label or value pushes the next column right, always keeping two spaces).
void line(const std::string& label, const std::string& value, const std::string& eq = "") {
  std::string s = pad_right("    " + label + "  ", 44) + value;
  if (!eq.empty()) s = pad_right(s + "  ", 74) + eq;
  std::printf("%s\n", s.c_str());
}
/// A matrix under a label: the first row beside the label (with the equation), the rest below.
void mat_line(const std::string& label, const Mat& M, const std::string& eq = "") {
  const auto rows = mat_rows(M);
  for (size_t i = 0; i < rows.size(); ++i) line(i ? "" : label, rows[i], i ? "" : eq);
}
/// Two matrices side by side: "left-label  A-row   right-label  B-row".
void two_mats(const std::string& la, const Mat& A, const std::string& lb, const Mat& B) {
  const auto ra = mat_rows(A), rb = mat_rows(B);
  const size_t n = std::max(ra.size(), rb.size());
  for (size_t i = 0; i < n; ++i) {
    std::string s = pad_right("    " + (i ? std::string() : la) + "  ", 20) +
                    pad_right(i < ra.size() ? ra[i] : "", 28) +
                    pad_right(i ? std::string() : lb + "  ", 14) + (i < rb.size() ? rb[i] : "");
    std::printf("%s\n", s.c_str());
  }
}

void heading(int n, const std::string& title) {
  const std::string h = std::to_string(n) + ". " + title;
  std::printf("\n%s\n%s\n", h.c_str(), std::string(h.size(), '-').c_str());
}
void text(const char* s) { std::printf("%s\n", s); }

// ---------------------------------------------------------------------------------------------
// Checks: every demonstrated identity goes through here; a failure makes the exit status 1.
// ---------------------------------------------------------------------------------------------

int g_checks = 0, g_failed = 0;

double max_abs_diff(const Mat& A, const Mat& B) {
  double d = 0;
  for (index_t i = 0; i < A.numel(); ++i) d = std::max(d, std::fabs(A.data()[i] - B.data()[i]));
  return d;
}
double max_abs_diff(const Vec& a, const Vec& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

/// Prints "max |difference| = d   holds" (or FAILS) and records the outcome.
void check_equal(const std::string& what, double d) {
  ++g_checks;
  const bool ok = d <= kTol;
  if (!ok) ++g_failed;
  line(what, "max |difference| = " + diff_str(d), ok ? "holds" : "FAILS (> 1e-12)");
}
/// The opposite: two things that must NOT agree (a wrong recurrence must be detectably wrong).
void check_differ(const std::string& what, double d) {
  ++g_checks;
  const bool ok = d > kTol;
  if (!ok) ++g_failed;
  line(what, "max |difference| = " + diff_str(d), ok ? "differ, as they must" : "FAILS (equal)");
}

// ---------------------------------------------------------------------------------------------
// The example: one head, three tokens, d_phi = 3 key features, d_v = 2 value entries.
// ---------------------------------------------------------------------------------------------

constexpr index_t d_phi = 3, d_v = 2;

struct Token {
  Vec kappa;  // phi(k) in R^3 (unit vectors, as after L2 normalisation)
  Vec v;      // value in R^2
  Vec q;      // a query (only used for reads in sections 4 and 5)
};

const std::vector<Token> kTokens = {
    {{1, 0, 0}, {1, 2}, {1, 0, 0}},
    {{0, 0.6, 0.8}, {2, -1}, {0, 1, 0}},
    {{0.6, 0.8, 0}, {3, 1}, {1, 1, 1}},
};

/// The gates of one token. Which ones a rule uses depends on the rule.
struct Gate {
  double alpha = 1;                // GDN: scalar decay in (0, 1]
  Vec alpha_vec = {1, 1, 1};       // KDA, GDN2: per key feature decay in (0, 1]^{d_phi}
  double beta = 0.5;               // DeltaNet, GDN, KDA: write strength in [0, 1]
  Vec b = {1, 1, 1};               // GDN2: erase gate per key feature
  Vec w = {1, 1};                  // GDN2: write gate per value entry
};

/// The gates used in section 1, the same for every token.
Gate section1_gate() {
  Gate g;
  g.alpha = 0.5;
  g.alpha_vec = {0.5, 1, 0.5};
  g.beta = 0.5;
  g.b = {0.5, 0.25, 1};
  g.w = {1, 0.5};
  return g;
}

enum class Rule { linear_attention, deltanet, gdn, kda, gdn2 };

/// One token of `rule`: a direct call of the reference step (reference/delta_rules.hpp).
ref::StepTrace<double> step(Rule rule, const Mat& W, const Token& t, const Gate& g) {
  switch (rule) {
    case Rule::linear_attention: return ref::linear_attention_step(W, t.kappa, t.v);
    case Rule::deltanet: return ref::deltanet_step(W, t.kappa, t.v, g.beta);
    case Rule::gdn: return ref::gdn_step(W, t.kappa, t.v, g.alpha, g.beta);
    case Rule::kda: return ref::kda_step(W, t.kappa, t.v, g.alpha_vec, g.beta);
    case Rule::gdn2: return ref::gdn2_step(W, t.kappa, t.v, g.alpha_vec, g.b, g.w);
  }
  throw Error("step: unknown rule");
}

/// Run all tokens from W0 (not modified); returns W after each token and each step's trace.
struct Run {
  std::vector<Mat> W;                           // W[t] = memory after token t+1
  std::vector<ref::StepTrace<double>> trace;
};
Run run(Rule rule, const Mat& W0, const std::vector<Token>& toks, const Gate& g) {
  Run out;
  Mat W = W0.clone();
  for (const Token& t : toks) {
    out.trace.push_back(step(rule, W, t, g));
    out.W.push_back(W.clone());
  }
  return out;
}

/// Max |difference| over every W_t and every traced vector of two runs.
double max_abs_diff(const Run& a, const Run& b) {
  double d = 0;
  for (size_t t = 0; t < a.W.size(); ++t) {
    d = std::max(d, max_abs_diff(a.W[t], b.W[t]));
    d = std::max(d, max_abs_diff(a.trace[t].v_bar, b.trace[t].v_bar));
    d = std::max(d, max_abs_diff(a.trace[t].r, b.trace[t].r));
    d = std::max(d, max_abs_diff(a.trace[t].written, b.trace[t].written));
  }
  return d;
}

/// A non-empty starting memory for sections 3 and 4, so decays act from the first token.
Mat start_memory() { return Mat::from({d_v, d_phi}, {1, -1, 0.5, 0, 2, 1}); }

// ---------------------------------------------------------------------------------------------
// Section 0: what this is.
// ---------------------------------------------------------------------------------------------

void section0() {
  text("The delta rule by hand -- a walkthrough of linattn's reference implementation");
  text("=============================================================================");
  text("One head of linear attention keeps a memory W in R^{d_v x d_phi} that maps key features to");
  text("values. Token t brings a key feature vector kappa = phi(k), a value v and some gates. The");
  text("memory first (maybe) decays, W~ = decay(W_{t-1}); it reads itself with the key,");
  text("v_bar = W~ kappa (Eq.9); the error is r = v - v_bar (Eq.10); and it writes along kappa,");
  text("W_t = W~ + written kappa^T. The five rules differ only in the decay and in what is written:");
  text("  linear attention  W~ = W_{t-1}             written = v                   Eqs.4-5");
  text("  DeltaNet          W~ = W_{t-1}             written = beta r              Eq.14");
  text("  GDN               W~ = alpha W_{t-1}       written = beta r              Eqs.15-17");
  text("  KDA               W~ = W_{t-1} Diag(a)     written = beta r              Eqs.18-20");
  text("  GDN2              W~ = W_{t-1} Diag(a)     written = w.v - W~ (b.kappa)  Eqs.21-24");
  text("(x.y is the elementwise product.) Here d_phi = 3 and d_v = 2: W is 2 x 3, a read W x takes");
  text("x in R^3 and gives a vector in R^2. Every number below comes from reference/ (delta_rules.hpp,");
  text("linear_attention.hpp, recurrent.hpp); numbers are shown rounded to 4 decimals. Each identity");
  text("is checked on the exact doubles, and the program exits with status 1 if one fails.");
}

// ---------------------------------------------------------------------------------------------
// Section 1: three tokens through each rule.
// ---------------------------------------------------------------------------------------------

struct RuleText {
  Rule rule;
  const char* title;
  const char* v_bar, *v_bar_eq;       // labels and equation numbers of the traced vectors
  const char* r_eq;
  const char* written, *written_eq;
  const char* W, *W_eq;
};

/// Prints one rule's three tokens; returns max over tokens of |W_t kappa_t - (v_bar + written)|.
double print_rule(const RuleText& rt, int sub, const Gate& g) {
  const Run R = run(rt.rule, Mat({d_v, d_phi}), kTokens, g);
  std::printf("\n1.%d %s\n", sub, rt.title);
  for (size_t t = 0; t < kTokens.size(); ++t) {
    const Token& tok = kTokens[t];
    const std::string tt = std::to_string(t + 1), tp = std::to_string(t);
    std::string gates;
    switch (rt.rule) {
      case Rule::linear_attention: gates = "no decay, no gate"; break;
      case Rule::deltanet: gates = "no decay  beta = " + num(g.beta); break;
      case Rule::gdn: gates = "alpha = " + num(g.alpha) + "  beta = " + num(g.beta); break;
      case Rule::kda: gates = "a = " + vec_short(g.alpha_vec) + "  beta = " + num(g.beta); break;
      case Rule::gdn2:
        gates = "a = " + vec_short(g.alpha_vec) + "  b = " + vec_short(g.b) + "  w = " + vec_short(g.w);
        break;
    }
    std::printf("  token %s   kappa = %s   v = %s   %s\n", tt.c_str(), vec_short(tok.kappa).c_str(),
                vec_short(tok.v).c_str(), gates.c_str());
    auto sub_t = [&](std::string s) {  // "W_{t-1}" -> "W_0" etc. in the labels
      for (size_t p; (p = s.find("W_{t-1}")) != std::string::npos;) s.replace(p, 7, "W_" + tp);
      for (size_t p; (p = s.find("W_t")) != std::string::npos;) s.replace(p, 3, "W_" + tt);
      return s;
    };
    line(sub_t(rt.v_bar), vec_str(R.trace[t].v_bar), rt.v_bar_eq);
    line("r       = v - v_bar", vec_str(R.trace[t].r), rt.r_eq);
    line(rt.written, vec_str(R.trace[t].written), rt.written_eq);
    mat_line(sub_t(rt.W), R.W[t], rt.W_eq);
  }
  // What the memory now answers for the last key, next to what that token stored.
  const Vec y = ref::read(R.W.back(), kTokens.back().kappa);
  line("answer to the last key: W_3 kappa_3", vec_str(y), "(v_3 = " + vec_short(kTokens.back().v) + ")");
  // Every rule writes along kappa, so with a unit key W_t kappa_t = v_bar + written (kappa^T kappa = 1).
  double d = 0;
  for (size_t t = 0; t < kTokens.size(); ++t) {
    const Vec yt = ref::read(R.W[t], kTokens[t].kappa);
    for (size_t i = 0; i < yt.size(); ++i)
      d = std::max(d, std::fabs(yt[i] - (R.trace[t].v_bar[i] + R.trace[t].written[i])));
  }
  return d;
}

void section1() {
  heading(1, "Three tokens through each rule (W_0 = 0)");
  text("The same three tokens go through every rule. Keys are unit vectors; token 3's key overlaps");
  text("token 1's (kappa_1 . kappa_3 = 0.6) and token 2's (0.48), so reads see earlier writes.");
  const Gate g = section1_gate();
  const RuleText rules[] = {
      {Rule::linear_attention, "Linear attention: add v kappa^T, never correct (Eqs.4-5)",
       "v_bar   = W_{t-1} kappa   (unused)", "Eq.9", "Eq.10", "written = v", "Eq.5",
       "W_t     = W_{t-1} + v kappa^T", "Eq.5"},
      {Rule::deltanet, "DeltaNet: write only the error, scaled by beta (Eq.14)",
       "v_bar   = W_{t-1} kappa", "Eq.9", "Eq.10", "written = beta r", "Eq.14",
       "W_t     = W_{t-1} + beta r kappa^T", "Eq.14"},
      {Rule::gdn, "Gated DeltaNet (GDN): decay by alpha first, then the error (Eqs.15-17)",
       "v_bar   = alpha W_{t-1} kappa", "Eq.15", "Eq.16", "written = beta r", "Eq.17",
       "W_t     = alpha W_{t-1} + beta r kappa^T", "Eq.17"},
      {Rule::kda, "Kimi Delta Attention (KDA): one decay per key feature, D = Diag(a) (Eqs.18-20)",
       "v_bar   = W_{t-1} D kappa", "Eq.18", "Eq.19", "written = beta r", "Eq.20",
       "W_t     = W_{t-1} D + beta r kappa^T", "Eq.20"},
      {Rule::gdn2, "Gated DeltaNet-2 (GDN2): erase along b.kappa, write w.v (Eqs.21-24)",
       "v_bar   = W~ kappa,  W~ = W_{t-1} D", "Eqs.21,25", "Eq.26", "written = w.v - W~ (b.kappa)",
       "Eqs.22-23", "W_t     = W~ + written kappa^T", "Eq.24"},
  };
  int sub = 1;
  double d = 0;
  for (const RuleText& rt : rules) d = std::max(d, print_rule(rt, sub++, g));
  text("");
  text("Linear attention only adds, so its answer to key 3 piles up every overlapping value; the delta");
  text("rules write the error, so theirs moves towards v_3. Decays shrink W before the read (GDN all of");
  text("it, KDA and GDN2 the columns with a < 1). GDN2 writes w.v - W~ (b.kappa), not beta r. Every rule");
  text("writes along kappa, so for a unit key the new answer is W_t kappa_t = v_bar + written:");
  check_equal("W_t kappa_t vs v_bar + written (all)", d);
}

// ---------------------------------------------------------------------------------------------
// Section 2: the worked example.
// ---------------------------------------------------------------------------------------------

void section2() {
  heading(2, "The worked example: prediction 2, target 5, beta 0.5 -> 3.5 (Eq.14)");
  text("DeltaNet is one step of gradient descent, learning rate beta, on L(W) = 1/2 ||W kappa - v||^2.");
  text("Its gradient is dL/dW = (W kappa - v) kappa^T = -r kappa^T, so W - beta dL/dW = W + beta r kappa^T.");
  text("With a unit key, kappa^T kappa = 1 and the new prediction is W_1 kappa = W_0 kappa + beta r =");
  text("(1 - beta) old + beta target: the memory moves a fraction beta of the way to the target.");
  text("Here d_v = 1 (W is 1 x 3) so the prediction is one number.");
  const Mat W0 = Mat::from({1, d_phi}, {2, 1, 4});
  const Vec kappa = {0.6, 0.8, 0}, v = {5};
  const double beta = 0.5;
  const Vec u = {0.8, -0.6, 0};  // a direction orthogonal to kappa: kappa . u = 0
  mat_line("W_0", W0);
  line("kappa (unit: 0.36 + 0.64 = 1)", vec_str(kappa));
  const Vec old = ref::read(W0, kappa);
  line("prediction  W_0 kappa", vec_str(old), "Eq.9");
  line("target      v", vec_str(v));
  Mat W1 = W0.clone();
  const auto tr = ref::deltanet_step(W1, kappa, v, beta);
  line("r = v - W_0 kappa", vec_str(tr.r), "Eq.10");
  mat_line("W_1 = W_0 + beta r kappa^T", W1, "Eq.14");
  const Vec now = ref::read(W1, kappa);
  line("new prediction  W_1 kappa", vec_str(now));
  // The second side, computed here: (1 - beta) old + beta target.
  const Vec mix = {(1 - beta) * old[0] + beta * v[0]};
  line("(1 - beta) old + beta target", vec_str(mix), "= 0.5*2 + 0.5*5");
  check_equal("W_1 kappa vs (1 - beta) old + beta v", max_abs_diff(now, mix));
  // The gradient step written out: grad = (W_0 kappa - v) kappa^T, W_gd = W_0 - beta grad.
  Mat grad({1, d_phi});
  ref::add_outer(grad, Vec{old[0] - v[0]}, kappa);
  Mat Wgd = W0.clone();
  for (index_t j = 0; j < d_phi; ++j) Wgd(0, j) -= beta * grad(0, j);
  mat_line("dL/dW = (W_0 kappa - v) kappa^T", grad);
  mat_line("W_0 - beta dL/dW", Wgd);
  check_equal("DeltaNet step vs gradient step", max_abs_diff(W1, Wgd));
  // A direction orthogonal to the key is not touched.
  line("u = [0.8 -0.6 0], kappa . u = 0:", "W_0 u = " + vec_str(ref::read(W0, u)) +
                                              "   W_1 u = " + vec_str(ref::read(W1, u)));
  check_equal("W_1 u vs W_0 u (orthogonal direction)", max_abs_diff(ref::read(W0, u), ref::read(W1, u)));
}

// ---------------------------------------------------------------------------------------------
// Section 3: the reductions of SPEC section 2.
// ---------------------------------------------------------------------------------------------

void section3() {
  heading(3, "The rules contain each other (SPEC section 2)");
  text("GDN2 contains KDA, which contains GDN, which contains DeltaNet; GDN2 also contains linear");
  text("attention. Each case runs the tokens of section 1 through both rules from the same non-empty");
  text("memory W_0 and compares W after every token and every traced vector (v_bar, r, written).");
  const Mat W0 = start_memory();
  mat_line("W_0", W0);
  const Gate g = section1_gate();

  text("\n(a) GDN2 with b = beta 1 and w = beta 1 is KDA                     (Eqs.21-24 -> 18-20)");
  Gate ga = g;
  ga.b = Vec(d_phi, g.beta);
  ga.w = Vec(d_v, g.beta);
  const Run gdn2_a = run(Rule::gdn2, W0, kTokens, ga), kda_a = run(Rule::kda, W0, kTokens, g);
  two_mats("GDN2", gdn2_a.W.back(), "KDA", kda_a.W.back());
  check_equal("GDN2(b = w = 0.5) vs KDA(beta = 0.5)", max_abs_diff(gdn2_a, kda_a));

  text("\n(b) KDA with a = alpha 1 is GDN                                     (Eqs.18-20 -> 15-17)");
  Gate gb = g;
  gb.alpha_vec = Vec(d_phi, g.alpha);
  const Run kda_b = run(Rule::kda, W0, kTokens, gb), gdn_b = run(Rule::gdn, W0, kTokens, g);
  two_mats("KDA", kda_b.W.back(), "GDN", gdn_b.W.back());
  check_equal("KDA(a = 0.5 1) vs GDN(alpha = 0.5)", max_abs_diff(kda_b, gdn_b));

  text("\n(c) GDN with alpha = 1 is DeltaNet                                  (Eqs.15-17 -> 14)");
  Gate gc = g;
  gc.alpha = 1;
  const Run gdn_c = run(Rule::gdn, W0, kTokens, gc), dn_c = run(Rule::deltanet, W0, kTokens, g);
  two_mats("GDN", gdn_c.W.back(), "DeltaNet", dn_c.W.back());
  check_equal("GDN(alpha = 1) vs DeltaNet", max_abs_diff(gdn_c, dn_c));

  text("\n(d) GDN2 with b = 0, w = 1, a = 1 is linear attention               (Eqs.21-24 -> 4-5)");
  Gate gd = g;
  gd.alpha_vec = Vec(d_phi, 1);
  gd.b = Vec(d_phi, 0);
  gd.w = Vec(d_v, 1);
  const Run gdn2_d = run(Rule::gdn2, W0, kTokens, gd), la_d = run(Rule::linear_attention, W0, kTokens, g);
  two_mats("GDN2", gdn2_d.W.back(), "lin. attn", la_d.W.back());
  check_equal("GDN2(b = 0, w = 1, a = 1) vs lin. attn", max_abs_diff(gdn2_d, la_d));

  text("\n(e) beta = 0 (GDN2: b = w = 0) and no decay leave W unchanged (linear attention has no gate)");
  Gate ge;  // alpha = 1, a = 1 by default
  ge.beta = 0;
  ge.b = Vec(d_phi, 0);
  ge.w = Vec(d_v, 0);
  const std::pair<Rule, const char*> frozen[] = {
      {Rule::deltanet, "DeltaNet"}, {Rule::gdn, "GDN"}, {Rule::kda, "KDA"}, {Rule::gdn2, "GDN2"}};
  for (const auto& [rule, name] : frozen) {
    const Run R = run(rule, W0, kTokens, ge);
    double d = 0;
    for (const Mat& Wt : R.W) d = std::max(d, max_abs_diff(Wt, W0));
    check_equal(std::string(name) + ": W_1, W_2, W_3 vs W_0", d);
  }
}

// ---------------------------------------------------------------------------------------------
// Section 4: the order of the read, and decay before error.
// ---------------------------------------------------------------------------------------------

void section4() {
  heading(4, "The order of the read (Eq.3) and decay before error (Eq.15)");
  text("(a) The read is y = W phi(q): (2 x 3) times (3) gives a vector in R^2 = R^{d_v}. The PDF's Eq.3");
  text("prints phi(q)^T W, a (1 x 3) row times a (2 x 3) matrix: inner sizes 3 and 2 do not match, so it");
  text("does not type-check (SPEC section 7, erratum 1). Asking the reference for it says so:");
  const Run la = run(Rule::linear_attention, Mat({d_v, d_phi}), kTokens, Gate{});
  const Mat& W3 = la.W.back();
  const Vec& q3 = kTokens.back().q;
  mat_line("W_3 (linear attention, 1.1)", W3);
  line("phi(q_3)", vec_str(q3));
  line("y_3 = W_3 phi(q_3)", vec_str(ref::read(W3, q3)), "Eq.5/8");
  ++g_checks;  // phi(q)^T W = (W^T phi(q))^T would need phi(q) in R^{d_v} = R^2: must be refused
  try {
    ref::read(ref::transpose(W3), q3);
    line("phi(q_3)^T W_3", "was accepted -- it should not be", "FAILS");
    ++g_failed;
  } catch (const Error& e) {
    std::printf("    phi(q_3)^T W_3 = (W_3^T phi(q_3))^T is refused:\n      linattn::Error: %s\n", e.what());
  }
  text("The only product with phi(q) on the left that type-checks is phi(q)^T W^T = (W phi(q))^T: the");
  text("same numbers read from S = W^T, the kernels' layout (section 5).");
  text("The recurrent read equals the parallel form y_i = sum_{j<=i} (phi(q_i) . kappa_j) v_j (Eq.3 fixed):");
  Mat q({3, d_phi}), k({3, d_phi}), v({3, d_v});
  for (index_t t = 0; t < 3; ++t) {
    for (index_t j = 0; j < d_phi; ++j) q(t, j) = kTokens[t].q[j], k(t, j) = kTokens[t].kappa[j];
    for (index_t j = 0; j < d_v; ++j) v(t, j) = kTokens[t].v[j];
  }
  const Mat y_rec = ref::linear_attention_recurrent(q, k, v), y_par = ref::linear_attention_parallel(q, k, v);
  two_mats("recurrent", y_rec, "parallel", y_par);
  check_equal("y_1..y_3: recurrent vs parallel", max_abs_diff(y_rec, y_par));

  text("\n(b) GDN decays first and measures the error against the decayed memory (Eq.15):");
  text("v_bar = alpha W_0 kappa. Measuring it against the undecayed W_0 and decaying afterwards is a");
  text("different recurrence; one step shows it, from W_0 with kappa_3, v_3, alpha = 0.5, beta = 0.5.");
  const Mat W0 = start_memory();
  const Token& tok = kTokens.back();
  const double alpha = 0.5, beta = 0.5;
  Mat Wr = W0.clone(), Ww = W0.clone();
  const auto tr_right = ref::gdn_step(Wr, tok.kappa, tok.v, alpha, beta);
  const auto tr_wrong = ref::gdn_step_decay_after_error(Ww, tok.kappa, tok.v, alpha, beta);
  mat_line("W_0", W0);
  line("right: v_bar = alpha W_0 kappa", vec_str(tr_right.v_bar), "Eq.15");
  line("wrong: v_bar = W_0 kappa", vec_str(tr_wrong.v_bar));
  two_mats("right W_1", Wr, "wrong W_1", Ww);
  check_differ("right vs wrong W_1 (alpha = 0.5)", max_abs_diff(Wr, Ww));
  // The difference predicted by hand: W_wrong - W_right = beta (r_wrong - r_right) kappa^T
  //   = -beta (1 - alpha) (W_0 kappa) kappa^T.
  const Vec W0k = ref::read(W0, tok.kappa);
  Mat predicted({d_v, d_phi}), actual({d_v, d_phi});
  Vec coef(d_v);
  for (index_t i = 0; i < d_v; ++i) coef[i] = -beta * (1 - alpha) * W0k[i];
  ref::add_outer(predicted, coef, tok.kappa);
  for (index_t i = 0; i < actual.numel(); ++i) actual.data()[i] = Ww.data()[i] - Wr.data()[i];
  text("By hand: W_wrong - W_right = beta (r_wrong - r_right) kappa^T");
  text("                          = -beta (1 - alpha) (W_0 kappa) kappa^T.");
  two_mats("wrong - right", actual, "by hand", predicted);
  check_equal("wrong - right vs by hand", max_abs_diff(actual, predicted));
  Mat Wr1 = W0.clone(), Ww1 = W0.clone();
  ref::gdn_step(Wr1, tok.kappa, tok.v, 1.0, beta);
  ref::gdn_step_decay_after_error(Ww1, tok.kappa, tok.v, 1.0, beta);
  check_equal("with alpha = 1 the two agree", max_abs_diff(Wr1, Ww1));
  text("With a unit key the right rule's new prediction is (1 - beta) alpha W_0 kappa + beta v, a blend");
  text("of the decayed memory and the target; the wrong one's is (alpha - beta) W_0 kappa + beta v, which");
  text("here (alpha = beta) forgets the memory's answer entirely:");
  Vec blend(d_v), wrong_blend(d_v);
  for (index_t i = 0; i < d_v; ++i) {
    blend[i] = (1 - beta) * alpha * W0k[i] + beta * tok.v[i];
    wrong_blend[i] = (alpha - beta) * W0k[i] + beta * tok.v[i];
  }
  line("right W_1 kappa   by hand", vec_str(ref::read(Wr, tok.kappa)) + "   " + vec_str(blend));
  line("wrong W_1 kappa   by hand", vec_str(ref::read(Ww, tok.kappa)) + "   " + vec_str(wrong_blend));
  check_equal("right: W_1 kappa vs by hand", max_abs_diff(ref::read(Wr, tok.kappa), blend));
  check_equal("wrong: W_1 kappa vs by hand", max_abs_diff(ref::read(Ww, tok.kappa), wrong_blend));
}

// ---------------------------------------------------------------------------------------------
// Section 5: the kernel-library layout S = W^T.
// ---------------------------------------------------------------------------------------------

void section5() {
  heading(5, "The kernel-library layout S = W^T (fla)");
  text("Kernel libraries store S = W^T in R^{K x V} (K = d_phi = 3, V = d_v = 2) and read o = S^T q.");
  text("Same numbers, transposed. naive_recurrent_gated_delta_rule takes q, k [B,T,H,K], v [B,T,H,V],");
  text("log-decays g = log alpha [B,T,H], beta [B,T,H] and returns the state [N,H,K,V]; run it on");
  text("section 1's GDN tokens (B = H = 1, scale = 1) and compare with W_3^T from the per-token steps.");
  const Gate g = section1_gate();
  const Run gdn = run(Rule::gdn, Mat({d_v, d_phi}), kTokens, g);
  const index_t T = static_cast<index_t>(kTokens.size());
  Mat q({1, T, 1, d_phi}), k({1, T, 1, d_phi}), v({1, T, 1, d_v}), lg({1, T, 1}), beta({1, T, 1});
  for (index_t t = 0; t < T; ++t) {
    for (index_t j = 0; j < d_phi; ++j) q(0, t, 0, j) = kTokens[t].q[j], k(0, t, 0, j) = kTokens[t].kappa[j];
    for (index_t j = 0; j < d_v; ++j) v(0, t, 0, j) = kTokens[t].v[j];
    lg(0, t, 0) = std::log(g.alpha);
    beta(0, t, 0) = g.beta;
  }
  ref::RecurrentOptions<double> opt;
  opt.scale = 1.0;
  opt.output_final_state = true;
  const auto out = ref::naive_recurrent_gated_delta_rule(q, k, v, lg, beta, opt);
  const Mat S = out.final_state.reshape({d_phi, d_v});
  two_mats("W_3 (2 x 3)", gdn.W.back(), "S (3 x 2)", S);
  check_equal("S (fla layout) vs W_3^T", max_abs_diff(S, ref::W_to_S(gdn.W.back())));
  // o_t = S_t^T q_t (the kernel's read) against W_t q_t (the paper's read), every token.
  double d = 0;
  for (index_t t = 0; t < T; ++t) {
    const Vec y = ref::read(gdn.W[t], kTokens[t].q);
    for (index_t j = 0; j < d_v; ++j) d = std::max(d, std::fabs(out.o(0, t, 0, j) - y[j]));
  }
  check_equal("o_t = S_t^T q_t vs W_t q_t (t = 1..3)", d);
  text("GDN2 as kernels write it, S_t = (I - k (b.k)^T) Diag(a) S_{t-1} + k (w.v)^T (Eq.24 transposed),");
  text("is a separate code path (gdn2_step_S); it agrees with the per-token gdn2_step:");
  const Run gdn2 = run(Rule::gdn2, Mat({d_v, d_phi}), kTokens, g);
  Mat S2({d_phi, d_v});
  for (const Token& tok : kTokens) ref::gdn2_step_S(S2, tok.kappa, tok.v, g.alpha_vec, g.b, g.w);
  two_mats("GDN2 W_3", gdn2.W.back(), "S_3", S2);
  check_equal("gdn2_step_S vs gdn2_step transposed", max_abs_diff(ref::S_to_W(S2), gdn2.W.back()));
}

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: delta_rule_by_hand [--section N] [--no-color] [--help]\n"
               "  Walks one attention head through the delta rules of arXiv 2607.07953, using only\n"
               "  linattn's reference/, and checks every identity it shows (exit 1 if one fails).\n"
               "  --section N  print only section N: 0 introduction, 1 three tokens through each rule,\n"
               "               2 the worked example, 3 the reductions, 4 the order of the read and\n"
               "               decay before error, 5 the S = W^T layout\n"
               "  --no-color   plain output (the default; there is no colour)\n"
               "  --help       this text\n");
}

}  // namespace

int main(int argc, char** argv) {
  int only = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--no-color") {
      // plain output is the only output
    } else if (a == "--section") {
      char* end = nullptr;
      const long n = i + 1 < argc ? std::strtol(argv[++i], &end, 10) : -1;
      if (!end || end == argv[i] || *end != '\0' || n < 0 || n > 5) {
        std::fprintf(stderr, "delta_rule_by_hand: --section expects a number 0..5 but got '%s'\n",
                     end ? argv[i] : "nothing");
        return 2;
      }
      only = static_cast<int>(n);
    } else {
      std::fprintf(stderr, "delta_rule_by_hand: unknown argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  void (*sections[])() = {section0, section1, section2, section3, section4, section5};
  try {
    for (int s = 0; s <= 5; ++s)
      if (only < 0 || only == s) sections[s]();
  } catch (const Error& e) {
    std::printf("\nunexpected linattn::Error: %s\n", e.what());
    return 1;
  }
  if (g_checks > 0) {
    const std::string n = std::to_string(g_checks);
    if (g_failed == 0)
      std::printf("\nAll %s checks above hold (identities to max |difference| <= 1e-12).\n", n.c_str());
    else
      std::printf("\n%d of %s checks above FAIL: exit status 1.\n", g_failed, n.c_str());
  }
  return g_failed == 0 ? 0 : 1;
}
