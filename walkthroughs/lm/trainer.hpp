// walkthroughs/lm/trainer.hpp -- the training loop of walkthroughs/train_lm.cpp as a library:
// options (one table: name, default, help, parser), evaluation, CSV log, checkpoints and resume.
//
// Determinism: given the options (seed included) the run is a pure function of the data; the
// thread count does not change any number (walkthroughs/lm/common.hpp), and a run resumed from a
// checkpoint continues exactly as the uninterrupted run (proofs_tests/test_lm_train.cpp):
// batches depend only on (seed, step), and the checkpoint holds the parameters, the whole
// optimiser state and the running training-loss average.
//
// Evaluations (one CSV row each): at step 0, every eval_every steps, at the decay start (the
// saturation loss: validation loss just before the decay phase, SPEC section 5) and at the end
// (the final loss). `step` counts optimiser updates done.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "walkthroughs/lm/cli.hpp"
#include "walkthroughs/lm/data.hpp"
#include "walkthroughs/lm/model.hpp"
#include "walkthroughs/lm/optim.hpp"

namespace linattn::lm {

struct TrainOptions {
  ModelConfig model;
  OptimConfig optim;
  Schedule sched;
  index_t batch = 16, seq_len = 128;
  std::uint64_t seed = 1337;
  int threads = 0;  ///< 0: OpenMP default
  index_t eval_every = 100, eval_batches = 8, print_every = 10;
  std::string data_path;   ///< empty: default_data_path()
  std::string log_csv;     ///< empty: no CSV
  std::string ckpt_path;   ///< empty: no checkpoints
  index_t ckpt_every = 0;  ///< 0: only at the end / at stop_at
  std::string resume;      ///< checkpoint to resume from
  index_t stop_at = 0;     ///< > 0: stop after this many steps (save a checkpoint), for resuming later
  bool quiet = false;
};

/// One command-line option: --name VALUE. `run` options define the run (they must match on resume).
struct OptionSpec {
  std::string name, help;
  bool run;
  std::function<std::string(const TrainOptions&)> get;
  std::function<void(TrainOptions&, const std::string&)> set;
};

namespace detail {
inline index_t parse_int(const std::string& name, const std::string& s) {
  return static_cast<index_t>(cli::to_int("train_lm", "--" + name, s));
}
inline double parse_double(const std::string& name, const std::string& s) {
  return cli::to_double("train_lm", "--" + name, s);
}
inline bool parse_bool(const std::string& name, const std::string& s) {
  if (s == "1" || s == "true" || s == "on") return true;
  if (s == "0" || s == "false" || s == "off") return false;
  fail("train_lm", "--" + name, "0 or 1", "'" + s + "'");
}
/// Shortest decimal that reads back as exactly x.
inline std::string fmt(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), x);
  return std::string(buf, r.ptr);
}
inline MixerKind parse_mixer(const std::string& s) {
  for (MixerKind m : {MixerKind::deltanet, MixerKind::gdn, MixerKind::kda, MixerKind::gdn2})
    if (s == to_string(m)) return m;
  fail("train_lm", "--mixer", "deltanet, gdn, kda or gdn2", "'" + s + "'");
}
}  // namespace detail

/// Every option of train_lm, with its default (taken from a default TrainOptions) and help.
inline const std::vector<OptionSpec>& option_table() {
  using namespace detail;
  using O = TrainOptions;
  static const std::vector<OptionSpec> table = {
      {"data", "corpus path (else env LINATTN_DATA, else $LINATTN_SHARED/data/tinyshakespeare.txt, else <root>/../shared/data/tinyshakespeare.txt)", false,
       [](const O& o) { return o.data_path.empty() ? default_data_path() : o.data_path; },
       [](O& o, const std::string& s) { o.data_path = s; }},
      {"seed", "seed of the initialisation and of the batch order", true,
       [](const O& o) { return std::to_string(o.seed); },
       [](O& o, const std::string& s) { o.seed = static_cast<std::uint64_t>(parse_int("seed", s)); }},
      {"threads", "OpenMP threads (0: all cores); results do not depend on it", false,
       [](const O& o) { return std::to_string(o.threads); },
       [](O& o, const std::string& s) { o.threads = static_cast<int>(cli::to_int("train_lm", "--threads", s, 0, cli::kMaxThreads)); }},
      {"steps", "optimiser steps", true, [](const O& o) { return std::to_string(o.sched.steps); },
       [](O& o, const std::string& s) { o.sched.steps = parse_int("steps", s); }},
      {"batch", "sequences per step", true, [](const O& o) { return std::to_string(o.batch); },
       [](O& o, const std::string& s) { o.batch = parse_int("batch", s); }},
      {"seq-len", "context length T (tokens = bytes)", true, [](const O& o) { return std::to_string(o.seq_len); },
       [](O& o, const std::string& s) { o.seq_len = parse_int("seq-len", s); }},
      {"d-model", "model width", true, [](const O& o) { return std::to_string(o.model.d_model); },
       [](O& o, const std::string& s) { o.model.d_model = parse_int("d-model", s); }},
      {"layers", "number of blocks", true, [](const O& o) { return std::to_string(o.model.n_layer); },
       [](O& o, const std::string& s) { o.model.n_layer = parse_int("layers", s); }},
      {"heads", "softmax query heads", true, [](const O& o) { return std::to_string(o.model.n_head); },
       [](O& o, const std::string& s) { o.model.n_head = parse_int("heads", s); }},
      {"kv-heads", "softmax key/value heads (GQA groups)", true,
       [](const O& o) { return std::to_string(o.model.n_kv_head); },
       [](O& o, const std::string& s) { o.model.n_kv_head = parse_int("kv-heads", s); }},
      {"mlp-hidden", "SwiGLU hidden width (0: 8/3 d-model rounded up to 32)", true,
       [](const O& o) { return std::to_string(o.model.mlp_hidden); },
       [](O& o, const std::string& s) { o.model.mlp_hidden = parse_int("mlp-hidden", s); }},
      {"attn-gate", "sigmoid output gate on softmax attention (0/1)", true,
       [](const O& o) { return std::to_string(int(o.model.attn_gate)); },
       [](O& o, const std::string& s) { o.model.attn_gate = parse_bool("attn-gate", s); }},
      {"stack", "dense (all softmax) | pure (all linear) | hybrid (layer i softmax iff (i+1)%3==0)", true,
       [](const O& o) { return o.model.stack; }, [](O& o, const std::string& s) { o.model.stack = s; }},
      {"mixer", "linear mixer of pure/hybrid stacks: deltanet | gdn | kda | gdn2", true,
       [](const O& o) { return std::string(to_string(o.model.linear_mixer)); },
       [](O& o, const std::string& s) { o.model.linear_mixer = parse_mixer(s); }},
      {"lin-heads", "linear mixers: query/key heads", true, [](const O& o) { return std::to_string(o.model.lin_heads); },
       [](O& o, const std::string& s) { o.model.lin_heads = parse_int("lin-heads", s); }},
      {"lin-v-heads", "linear mixers: value heads (a multiple of --lin-heads)", true,
       [](const O& o) { return std::to_string(o.model.lin_v_heads); },
       [](O& o, const std::string& s) { o.model.lin_v_heads = parse_int("lin-v-heads", s); }},
      {"lin-dk", "linear mixers: key head dimension", true, [](const O& o) { return std::to_string(o.model.lin_dk); },
       [](O& o, const std::string& s) { o.model.lin_dk = parse_int("lin-dk", s); }},
      {"lin-dv", "linear mixers: value head dimension", true, [](const O& o) { return std::to_string(o.model.lin_dv); },
       [](O& o, const std::string& s) { o.model.lin_dv = parse_int("lin-dv", s); }},
      {"core", "recurrence core: recurrent (lm/delta_core.hpp) | chunk (optimized/cpu) | reference (naive)", true,
       [](const O& o) { return o.model.core; }, [](O& o, const std::string& s) { o.model.core = s; }},
      {"routing", "cross-layer routing: none | cler | cler-h | clvr | clvr-gate | clvr-concat (the last two: Sec.6.6 controls)", true,
       [](const O& o) { return o.model.routing; }, [](O& o, const std::string& s) { o.model.routing = s; }},
      {"routed-error", "what CLER / CLER-H route: paper (r = v - v_bar) | written (beta r, the kernel's)", true,
       [](const O& o) { return o.model.routed_error; }, [](O& o, const std::string& s) { o.model.routed_error = s; }},
      {"rho", "CLER's rho: identity | rms", true, [](const O& o) { return o.model.rho; },
       [](O& o, const std::string& s) { o.model.rho = s; }},
      {"route-rank", "CLER-H / CLVR: rank r of P_l = U_l D_l (U_l zero-initialised); 0: full P_l", true,
       [](const O& o) { return std::to_string(o.model.route_rank); },
       [](O& o, const std::string& s) { o.model.route_rank = parse_int("route-rank", s); }},
      {"optimizer", "adamw | muon (Muon for hidden matrices, Adam for the rest)", true,
       [](const O& o) { return o.optim.name; }, [](O& o, const std::string& s) { o.optim.name = s; }},
      {"lr", "peak learning rate (AdamW: all; Muon: hidden matrices)", true,
       [](const O& o) { return fmt(o.optim.lr); },
       [](O& o, const std::string& s) { o.optim.lr = parse_double("lr", s); }},
      {"adam-lr", "Muon mode: constant learning rate of the Adam group (after warm-up)", true,
       [](const O& o) { return fmt(o.optim.adam_lr); },
       [](O& o, const std::string& s) { o.optim.adam_lr = parse_double("adam-lr", s); }},
      {"wd", "decoupled weight decay", true, [](const O& o) { return fmt(o.optim.weight_decay); },
       [](O& o, const std::string& s) { o.optim.weight_decay = parse_double("wd", s); }},
      {"clip", "global gradient-norm clip (0: off)", true, [](const O& o) { return fmt(o.optim.clip); },
       [](O& o, const std::string& s) { o.optim.clip = parse_double("clip", s); }},
      {"warmup", "linear warm-up steps", true, [](const O& o) { return std::to_string(o.sched.warmup); },
       [](O& o, const std::string& s) { o.sched.warmup = parse_int("warmup", s); }},
      {"decay-frac", "fraction of steps in the final 1-sqrt decay to lr/10", true,
       [](const O& o) { return fmt(o.sched.decay_frac); },
       [](O& o, const std::string& s) { o.sched.decay_frac = parse_double("decay-frac", s); }},
      {"eval-every", "evaluate every this many steps", true,
       [](const O& o) { return std::to_string(o.eval_every); },
       [](O& o, const std::string& s) { o.eval_every = parse_int("eval-every", s); }},
      {"eval-batches", "validation batches (of --batch fixed windows each) per evaluation", true,
       [](const O& o) { return std::to_string(o.eval_batches); },
       [](O& o, const std::string& s) { o.eval_batches = parse_int("eval-batches", s); }},
      {"print-every", "progress line every this many steps", false,
       [](const O& o) { return std::to_string(o.print_every); },
       [](O& o, const std::string& s) { o.print_every = parse_int("print-every", s); }},
      {"log", "CSV of every evaluation (empty: none)", false, [](const O& o) { return o.log_csv; },
       [](O& o, const std::string& s) { o.log_csv = s; }},
      {"ckpt", "checkpoint file written at the end, at --stop-at and every --ckpt-every (empty: none)", false,
       [](const O& o) { return o.ckpt_path; }, [](O& o, const std::string& s) { o.ckpt_path = s; }},
      {"ckpt-every", "also checkpoint every this many steps (0: never)", false,
       [](const O& o) { return std::to_string(o.ckpt_every); },
       [](O& o, const std::string& s) { o.ckpt_every = parse_int("ckpt-every", s); }},
      {"resume", "continue from this checkpoint (give the same run options as the original run)", false,
       [](const O& o) { return o.resume; }, [](O& o, const std::string& s) { o.resume = s; }},
      {"stop-at", "stop after this many steps and checkpoint (0: run to --steps)", false,
       [](const O& o) { return std::to_string(o.stop_at); },
       [](O& o, const std::string& s) { o.stop_at = parse_int("stop-at", s); }},
  };
  return table;
}

/// The run-defining options as "name=value" lines (stored in checkpoints and the CSV header).
inline std::string run_signature(const TrainOptions& o) {
  std::string s;
  for (const OptionSpec& spec : option_table())
    if (spec.run) s += spec.name + "=" + spec.get(o) + "\n";
  return s;
}

/// Check the option values that the pieces do not check themselves.
inline void validate(const TrainOptions& o) {
  const std::string fn = "train_lm";
  o.model.validate();
  o.optim.validate();
  o.sched.validate();
  if (o.model.vocab != 256) fail(fn, "vocab", "256 (byte-level)", std::to_string(o.model.vocab));
  check_positive(fn, "--batch", o.batch);
  check_positive(fn, "--seq-len", o.seq_len);
  if (o.batch > kMaxTokens / o.seq_len)  // (the product itself could overflow)
    fail(fn, "--batch x --seq-len", "at most " + std::to_string(kMaxTokens) + " tokens per step",
         std::to_string(o.batch) + " x " + std::to_string(o.seq_len));
  if (!(o.optim.clip >= 0)) fail(fn, "--clip", "0 (off) or a positive gradient norm", num_str(o.optim.clip));
  check_positive(fn, "--eval-every", o.eval_every);
  check_positive(fn, "--eval-batches", o.eval_batches);
  check_positive(fn, "--print-every", o.print_every);
  if (o.threads < 0) fail(fn, "--threads", "0 (all cores) or a positive count", std::to_string(o.threads));
  if (o.ckpt_every < 0) fail(fn, "--ckpt-every", "a non-negative step count", std::to_string(o.ckpt_every));
  if (o.stop_at < 0 || o.stop_at > o.sched.steps)
    fail(fn, "--stop-at", "a step in [0, --steps = " + std::to_string(o.sched.steps) + "]", std::to_string(o.stop_at));
  if ((o.stop_at > 0 || o.ckpt_every > 0) && o.ckpt_path.empty())
    fail(fn, "--ckpt", "a checkpoint path when --stop-at or --ckpt-every is given", "none");
}

/// Error unless the files of `o` can be used: --resume readable, --ckpt and --log writable (an
/// existing file is left as it is; one created by the check is removed). train_lm checks them
/// before loading the data, train() before training, so that a bad path loses no run.
inline void check_files(const TrainOptions& o) {
  if (!o.resume.empty()) check_readable("load_checkpoint", "--resume", "a readable checkpoint file", o.resume);
  for (const auto& [flag, path] : {std::pair<std::string, std::string>{"--ckpt", o.ckpt_path}, {"--log", o.log_csv}}) {
    if (path.empty()) continue;
    std::error_code ec;
    const bool existed = std::filesystem::exists(path, ec);
    if (!std::ofstream(path, std::ios::app)) fail("train_lm", flag, "a writable file", cli::unwritable(path));
    if (!existed) std::filesystem::remove(path, ec);
  }
}

/// One evaluation (one CSV row).
struct EvalRow {
  index_t step = 0;
  double lr = 0, train_loss = NAN, val_loss = NAN, grad_norm = NAN, elapsed_s = 0, tokens_per_s = 0;
  std::string phase;
};

/// Everything a resumed run needs besides the options.
struct TrainState {
  index_t step = 0;
  double loss_sum = 0;   ///< sum of training losses since the last evaluation
  index_t loss_n = 0;
  double last_grad_norm = NAN;
  double saturation = NAN, final_loss = NAN;
  double elapsed_s = 0;  ///< wall time of the earlier segments (reporting only)
};

struct TrainResult {
  TrainState state;
  std::vector<EvalRow> evals;  ///< the evaluations of this invocation
  index_t num_params = 0;
  std::vector<float> params;   ///< the parameters at the end
};

// ---------------------------------------------------------------------------------------------
// Checkpoints: "LINATTN-LM-CKPT 1\n", the run signature, "end\n", then binary sections, then a
// sha256 of everything before it (a truncated or damaged file is refused with a clear error).
// ---------------------------------------------------------------------------------------------

namespace detail {
template <class V>
void put(std::string& buf, const V& x) {
  buf.append(reinterpret_cast<const char*>(&x), sizeof(V));
}
template <class T>
void put_vec(std::string& buf, const std::vector<T>& v) {
  put(buf, static_cast<std::uint64_t>(v.size()));
  if (!v.empty()) buf.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
struct Reader {
  const std::string& buf;
  size_t pos;
  std::string path;
  template <class V>
  V get() {
    if (pos + sizeof(V) > buf.size()) fail("load_checkpoint", "file '" + path + "'", "a complete checkpoint", "a truncated file");
    V x;
    std::memcpy(&x, buf.data() + pos, sizeof(V));
    pos += sizeof(V);
    return x;
  }
  template <class T>
  void get_vec(std::vector<T>& v, const std::string& what) {
    const auto n = get<std::uint64_t>();
    if (n != v.size())
      fail("load_checkpoint", "file '" + path + "'", std::to_string(v.size()) + " values of " + what,
           std::to_string(n));
    if (pos + n * sizeof(T) > buf.size()) fail("load_checkpoint", "file '" + path + "'", "a complete checkpoint", "a truncated file");
    if (n) std::memcpy(v.data(), buf.data() + pos, n * sizeof(T));  // (v.data() may be null when n = 0)
    pos += n * sizeof(T);
  }
};
}  // namespace detail

inline constexpr const char* kCkptMagic = "LINATTN-LM-CKPT 1\n";

template <class T>
void save_checkpoint(const std::string& path, const TrainOptions& o, const TrainState& st,
                     const ParamStore<T>& ps, const Optimizer<T>& opt) {
  std::string buf = kCkptMagic;
  buf += run_signature(o) + "end\n";
  detail::put(buf, static_cast<std::uint32_t>(sizeof(T)));
  detail::put(buf, static_cast<std::int64_t>(st.step));
  detail::put(buf, st.loss_sum);
  detail::put(buf, static_cast<std::int64_t>(st.loss_n));
  detail::put(buf, st.last_grad_norm);
  detail::put(buf, st.saturation);
  detail::put(buf, st.final_loss);
  detail::put(buf, st.elapsed_s);
  detail::put(buf, static_cast<std::int64_t>(opt.t));
  detail::put_vec(buf, ps.data);
  detail::put_vec(buf, opt.m);
  detail::put_vec(buf, opt.v);
  detail::put_vec(buf, opt.mom);
  detail::put_vec(buf, opt.rowv);
  const std::string sha = sha256_hex(buf.data(), buf.size());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail("save_checkpoint", "path", "a writable file", "'" + path + "'");
    f << buf << sha;
    if (!f) fail("save_checkpoint", "path", "a writable file", "'" + path + "' (write failed)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)  // atomic replace: never a half-written checkpoint
    fail("save_checkpoint", "path", "a file that can be replaced", "'" + path + "'");
}

/// Load into ps/opt/st; the run signature must equal that of `o` (same run options).
template <class T>
void load_checkpoint(const std::string& path, const TrainOptions& o, TrainState& st,
                     ParamStore<T>& ps, Optimizer<T>& opt) {
  const std::string fn = "load_checkpoint";
  const std::string all = read_file(fn, "--resume", "a readable checkpoint file", path);
  const std::string magic = kCkptMagic;
  if (all.compare(0, magic.size(), magic) != 0 || all.size() < magic.size() + 64)
    fail(fn, "--resume", "a linattn LM checkpoint", "'" + path + "' (wrong header)");
  const std::string body = all.substr(0, all.size() - 64), sha = all.substr(all.size() - 64);
  if (sha256_hex(body.data(), body.size()) != sha)
    fail(fn, "--resume", "an intact checkpoint (sha256 of its contents)", "'" + path + "' (damaged or truncated)");
  const size_t end = body.find("end\n", magic.size());
  if (end == std::string::npos) fail(fn, "--resume", "a run signature", "'" + path + "' (none found)");
  const std::string saved = body.substr(magic.size(), end - magic.size()), now = run_signature(o);
  if (saved != now) {  // name the options that differ
    std::map<std::string, std::string> a, b;
    auto parse = [](const std::string& s, std::map<std::string, std::string>& m) {
      std::istringstream is(s);
      for (std::string line; std::getline(is, line);)
        if (auto eq = line.find('='); eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
    };
    parse(saved, a), parse(now, b);
    std::string diff;
    for (const auto& [k, v] : a)
      if (b[k] != v) diff += " --" + k + " " + v + " (given " + b[k] + ")";
    fail(fn, "--resume", "the run options of the checkpoint:" + diff, "different options");
  }
  detail::Reader r{body, end + 4, path};
  if (r.get<std::uint32_t>() != sizeof(T)) fail(fn, "--resume", "a checkpoint of this scalar type", "another");
  st.step = r.get<std::int64_t>();
  st.loss_sum = r.get<double>();
  st.loss_n = r.get<std::int64_t>();
  st.last_grad_norm = r.get<double>();
  st.saturation = r.get<double>();
  st.final_loss = r.get<double>();
  st.elapsed_s = r.get<double>();
  opt.t = r.get<std::int64_t>();
  r.get_vec(ps.data, "parameters");
  r.get_vec(opt.m, "Adam first moments");
  r.get_vec(opt.v, "Adam second moments");
  r.get_vec(opt.mom, "Muon momenta");
  r.get_vec(opt.rowv, "NorMuon row moments");
  if (r.pos != body.size()) fail(fn, "--resume", "no trailing data", std::to_string(body.size() - r.pos) + " extra bytes");
}

// ---------------------------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------------------------

inline constexpr const char* kCsvHeader = "step,tokens,lr,train_loss,val_loss,grad_norm,phase,elapsed_s,tokens_per_s";

inline std::string csv_row(const EvalRow& e, index_t tokens_per_step) {
  std::ostringstream os;
  os << e.step << ',' << e.step * tokens_per_step << ',' << std::setprecision(6) << e.lr << ','
     << std::setprecision(8) << e.train_loss << ',' << e.val_loss << ',' << std::setprecision(6)
     << e.grad_norm << ',' << e.phase << ',' << std::setprecision(4) << std::fixed << e.elapsed_s << ','
     << std::setprecision(1) << e.tokens_per_s;
  return os.str();
}

/// Start the CSV: a fresh file with the signature as comments and the header; or, when resuming,
/// keep the existing rows up to `step` (rows past it came from after the checkpoint) and append.
inline void open_csv(const std::string& path, const TrainOptions& o, index_t step, bool resuming) {
  if (path.empty()) return;
  std::vector<std::string> keep;
  if (resuming) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#' || line.rfind("step,", 0) == 0) {
        keep.push_back(line);
        continue;
      }
      index_t row_step = -1;
      try {
        row_step = std::stoll(line.substr(0, line.find(',')));
      } catch (const std::exception&) {
        fail("train_lm", "--log", "a CSV written by train_lm", "'" + path + "' (line '" + line + "')");
      }
      if (row_step <= step) keep.push_back(line);
    }
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) fail("train_lm", "--log", "a writable file", "'" + path + "'");
  if (keep.empty()) {
    std::istringstream sig(run_signature(o));
    for (std::string line; std::getline(sig, line);) out << "# " << line << '\n';
    out << kCsvHeader << '\n';
  }
  for (const std::string& l : keep) out << l << '\n';
}

inline void append_csv(const std::string& path, const EvalRow& e, index_t tokens_per_step) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::app);
  out << csv_row(e, tokens_per_step) << '\n';
}

// ---------------------------------------------------------------------------------------------
// Training
// ---------------------------------------------------------------------------------------------

/// Mean validation loss over o.eval_batches fixed batches (nats per token).
template <class T>
double evaluate(Model<T>& model, const std::vector<unsigned char>& val, const TrainOptions& o) {
  const index_t B = o.batch, Tn = o.seq_len;
  std::vector<int> x(B * Tn), y(B * Tn);
  double sum = 0;
  for (index_t k = 0; k < o.eval_batches; ++k) {
    val_batch(val, B, Tn, k, o.eval_batches, x.data(), y.data());
    sum += model.forward(x.data(), y.data(), B, Tn);
  }
  return sum / double(o.eval_batches);
}

inline std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  std::ostringstream os;
  if (t >= 3600) os << t / 3600 << 'h';
  if (t >= 60) os << (t / 60) % 60 << 'm';
  os << t % 60 << 's';
  return os.str();
}

/// Train (float32) on `data` with options `o`; progress lines go to `log`.
inline TrainResult train(const TrainOptions& o, const Dataset& data, std::ostream& log) {
  validate(o);
  check_files(o);
  if (o.threads > 0) set_num_threads(o.threads);
  using T = float;
  const index_t B = o.batch, Tn = o.seq_len, tokens_per_step = B * Tn;
  const index_t split = static_cast<index_t>(std::min(data.train.size(), data.val.size()));
  if (split < Tn + 1)
    fail("train_lm", "--seq-len", "at most the smaller split's size - 1 = " + std::to_string(split - 1) + " (train " +
         std::to_string(data.train.size()) + ", validation " + std::to_string(data.val.size()) + " bytes)",
         std::to_string(Tn));
  Model<T> model(o.model);
  model.init(o.seed);
  Optimizer<T> opt(o.optim, o.sched, model.ps);
  TrainResult res;
  res.num_params = model.num_params();
  TrainState& st = res.state;
  if (!o.resume.empty()) load_checkpoint(o.resume, o, st, model.ps, opt);
  open_csv(o.log_csv, o, st.step, !o.resume.empty());
  const index_t N = o.sched.steps, stop = o.stop_at > 0 ? o.stop_at : N, ds = o.sched.decay_start();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return st.elapsed_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const index_t step0 = st.step;
  auto phase = [&](index_t s) { return s < o.sched.warmup ? "warmup" : s < ds ? "stable" : "decay"; };

  auto do_eval = [&] {
    EvalRow e;
    e.step = st.step;
    e.lr = o.optim.lr * o.sched.wsd(std::max<index_t>(st.step - 1, 0));  // lr of the last update
    e.train_loss = st.loss_n ? st.loss_sum / double(st.loss_n) : NAN;
    e.val_loss = evaluate(model, data.val, o);
    e.grad_norm = st.last_grad_norm;
    e.phase = st.step == N ? "final" : st.step == ds ? "saturation" : phase(st.step);
    e.elapsed_s = elapsed();
    const double dt = elapsed() - st.elapsed_s;
    e.tokens_per_s = dt > 0 ? double((st.step - step0) * tokens_per_step) / dt : 0;
    st.loss_sum = 0, st.loss_n = 0;
    if (st.step == ds) st.saturation = e.val_loss;
    if (st.step == N) st.final_loss = e.val_loss;
    append_csv(o.log_csv, e, tokens_per_step);
    res.evals.push_back(e);
    if (!o.quiet)
      log << "eval  step " << std::setw(6) << e.step << " | val loss " << std::fixed << std::setprecision(4)
          << e.val_loss << " nats/char" << (st.step == ds ? "  (saturation: last step before the decay)" : "")
          << (st.step == N ? "  (final)" : "") << std::defaultfloat << '\n'
          << std::flush;
  };
  auto save = [&] {
    TrainState s2 = st;
    s2.elapsed_s = elapsed();
    save_checkpoint(o.ckpt_path, o, s2, model.ps, opt);
    if (!o.quiet) log << "checkpoint: step " << st.step << " -> " << o.ckpt_path << '\n';
  };

  if (st.step == 0) do_eval();
  std::vector<int> x(B * Tn), y(B * Tn);
  while (st.step < stop) {
    train_batch(data.train, B, Tn, o.seed, st.step, x.data(), y.data());
    model.ps.zero_grad();
    const double loss = model.forward(x.data(), y.data(), B, Tn);
    if (!std::isfinite(loss))
      fail("train_lm", "training", "a finite loss", "loss " + num_str(loss) + " at step " + std::to_string(st.step) + " (lower --lr?)");
    model.backward();
    st.last_grad_norm = opt.step(model.ps);
    ++st.step;
    st.loss_sum += loss, ++st.loss_n;
    if (!o.quiet && (st.step % o.print_every == 0 || st.step == stop)) {
      const double el = elapsed() - st.elapsed_s;
      const double tps = double((st.step - step0) * tokens_per_step) / std::max(el, 1e-9);
      log << "step " << std::setw(6) << st.step << "/" << N << " | loss " << std::fixed << std::setprecision(4)
          << loss << " | lr " << std::scientific << std::setprecision(2) << o.optim.lr * o.sched.wsd(st.step - 1)
          << std::fixed << " | " << std::setprecision(0) << tps << " tok/s | ETA "
          << hms(double((stop - st.step) * tokens_per_step) / tps) << std::defaultfloat << '\n'
          << std::flush;
    }
    if (st.step % o.eval_every == 0 || st.step == ds || st.step == N) do_eval();
    if (o.ckpt_every > 0 && st.step % o.ckpt_every == 0 && st.step < stop) save();
  }
  st.elapsed_s = elapsed();
  if (!o.ckpt_path.empty()) save();
  res.params = model.ps.data;
  return res;
}

}  // namespace linattn::lm
