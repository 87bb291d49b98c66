// walkthroughs/train_lm.cpp -- train a small byte-level language model on tiny Shakespeare, on the
// CPU, with the model, optimisers and schedule of SPEC section 5 (walkthroughs/lm/).
//
// What it is: the small-scale counterpart of the paper's training runs -- a pre-norm decoder
// (embedding, [RMSNorm, mixer, residual, RMSNorm, SwiGLU, residual] x L, RMSNorm, untied head)
// with softmax and/or linear mixers (DeltaNet, GDN, KDA, GDN2; --stack dense|pure|hybrid) and
// optional cross-layer routing (--routing cler|cler-h|clvr, the Sec.6.6 controls clvr-gate|clvr-concat;
// --route-rank r for a low-rank P_l),
// AdamW or Muon (NorMuon flavour), WSD schedule, float32, OpenMP. Deterministic: the same options
// give the same numbers on any thread count; a run stopped with --stop-at and continued with
// --resume gives exactly the numbers of the uninterrupted run.
// What it is not: fast. It is a readable reference trainer; a 1M-parameter model trains at a few
// thousand tokens per second on two cores.
//
//   train_lm --help                                   every option and its default
//   train_lm --steps 600 --log run.csv                train; CSV row per evaluation
//   train_lm --steps 600 --stop-at 300 --ckpt a.ckpt  ... stop half way with a checkpoint
//   train_lm --steps 600 --resume a.ckpt              ... and continue (same run options)
//
// Output: a progress line every --print-every steps (step, loss, lr, tokens/s, ETA), an evaluation
// line every --eval-every steps, the saturation loss (validation loss just before the decay
// phase) and the final loss, in nats per character (= per byte: the corpus is ASCII).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#ifdef __linux__
#include <unistd.h>
#endif

#include "walkthroughs/lm/trainer.hpp"

using namespace linattn;
using namespace linattn::lm;

namespace {

/// OpenMP's default wait policy spins at every barrier. On a machine shared with other jobs (the
/// project's 2-core build box) that was measured 5.8x slower (774 vs 4456 tokens/s, 2 threads,
/// load average ~8). libgomp reads the policy when it loads, before main, so unless the user chose
/// a policy we restart once with OMP_WAIT_POLICY=passive. Numbers do not depend on the policy.
void prefer_passive_openmp_wait(char** argv) {
#if defined(__linux__) && defined(_OPENMP)
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then carry on as we are
  }
#else
  (void)argv;
#endif
}

void print_help(const TrainOptions& defaults) {
  std::cout << "train_lm -- train a byte-level language model on tiny Shakespeare (SPEC section 5)\n\n"
               "usage: train_lm [--option value]...\n\n"
               "options (default in brackets; * = defines the run: must be the same when resuming):\n";
  for (const OptionSpec& s : option_table()) {
    std::string left = "  --" + s.name + (s.run ? " *" : "");
    if (left.size() < 20) left.resize(20, ' ');
    std::cout << left << s.help << " [" << s.get(defaults) << "]\n";
  }
  std::cout << "  --help            this text\n\n"
               "Model: byte vocabulary 256, untied head, RoPE theta 10000, RMSNorm eps 1e-6, init std 0.02.\n"
               "AdamW: betas 0.9/0.95, eps 1e-8. Muon: Nesterov 0.95, 5 quintic Newton-Schulz steps, scale\n"
               "sqrt(max(m,n)), NorMuon row normalisation (beta2 0.95, eps 1e-8). WSD: linear warm-up, constant,\n"
               "1 - sqrt decay over the last --decay-frac of the steps to lr/10.\n";
}

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_wait(argv);
  TrainOptions o;
  const TrainOptions defaults = o;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        print_help(defaults);
        return 0;
      }
      if (arg.rfind("--", 0) != 0)
        fail("train_lm", "argument " + std::to_string(i), "an option --name (see --help)", "'" + arg + "'");
      const std::string name = arg.substr(2);
      const OptionSpec* spec = nullptr;
      for (const OptionSpec& s : option_table())
        if (s.name == name) spec = &s;
      if (!spec) fail("train_lm", arg, "a known option (see --help)", "an unknown option");
      if (i + 1 >= argc) fail("train_lm", arg, "a value after it", "nothing");
      spec->set(o, argv[++i]);
    }
    validate(o);
    check_files(o);  // before the data and the model: an unusable --resume/--ckpt/--log loses no run
    const std::string path = o.data_path.empty() ? default_data_path() : o.data_path;
    const Dataset data = load_tinyshakespeare(path);
    if (o.threads > 0) set_num_threads(o.threads);
    {
      const Model<float> probe(o.model);
      std::cout << "data: " << path << " (" << data.train.size() << " train / " << data.val.size()
                << " val bytes, sha256 ok)\n"
                << "model: " << o.model.stack << " stack, " << o.model.n_layer << " layers, d_model "
                << o.model.d_model << ", " << o.model.n_head << " heads / " << o.model.n_kv_head
                << " kv heads, MLP " << o.model.hidden() << ", " << probe.num_params() << " parameters\n";
      if (o.model.stack != "dense")
        std::cout << "linear layers: " << to_string(o.model.linear_mixer) << ", " << o.model.lin_heads << " q/k heads x "
                  << o.model.lin_dk << ", " << o.model.lin_v_heads << " value heads x " << o.model.lin_dv << ", core "
                  << o.model.core << ", routing " << o.model.routing
                  << (o.model.needs_trace() ? " (" + o.model.routed_error + " error)" : "")
                  << (o.model.route_rank > 0 ? ", P_l of rank " + std::to_string(o.model.route_rank) : "")
                  << '\n';
      std::cout << "train: " << o.sched.steps << " steps x " << o.batch << " x " << o.seq_len << " tokens, "
                << o.optim.name << " lr " << o.optim.lr << ", warm-up " << o.sched.warmup
                << ", decay from step " << o.sched.decay_start() << ", " << num_threads() << " threads\n"
                << std::flush;
    }
    const TrainResult r = train(o, data, std::cout);
    const TrainState& st = r.state;
    std::cout << "done: step " << st.step << "/" << o.sched.steps << " in " << hms(st.elapsed_s)
              << " (all segments)\n";
    if (std::isfinite(st.saturation)) std::printf("saturation loss (val, before decay): %.4f nats/char\n", st.saturation);
    if (std::isfinite(st.final_loss)) std::printf("final loss (val): %.4f nats/char\n", st.final_loss);
    if (!o.log_csv.empty()) std::cout << "log: " << o.log_csv << '\n';
  } catch (...) {
    return cli::report_error("train_lm", "lower --d-model, --layers, --mlp-hidden, --batch or --seq-len");
  }
  return 0;
}
