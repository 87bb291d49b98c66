// walkthroughs/paper/scales.hpp -- the two scales of the paper walkthroughs and the helpers that
// turn configurations into seeded runs and runs back into per-configuration statistics.
//
//   quick: d_model 32, 3 layers (hybrid: linear, linear, softmax), 4 x 32-byte sequences per
//          step, a few dozen steps. Runs in well under a second; only checks that the pipeline
//          produces every table with finite numbers and that training lowers the loss.
//   full:  d_model 96, 6 layers (hybrid: L L S L L S, SPEC section 5's 2:1 pattern), softmax 4
//          query heads / 2 KV heads (head dim 24), linear layers 2 key heads x 32 and 4 value heads
//          x 32 (GVA, as the 350M model's 4 x 64 / 8 x 64; DeltaNet too, where the 350M DeltaNet
//          has 4 heads with d_v 128 and no sharing: walkthroughs/lm/README.md, "Choices"),
//          8 x 128-byte sequences per step.
//          The paper's 350M model has 20 layers and d_model 1024, trained on 15B tokens: ours have
//          658,656 to 985,272 parameters (by mixer, stack and routing; the counts are in the full
//          runs' logs under walkthroughs/results/), 355-531x fewer, and see 150-450 steps of 1,024
//          tokens (153,600 to 460,800 tokens), 33,000-98,000x fewer.
// Schedule (both): WSD, warm-up 10% of the steps, 1 - sqrt decay over the last 20% to lr / 10.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "walkthroughs/paper/experiment.hpp"

namespace linattn::paper {

/// The model and schedule of a scale (the program sets optimizer, lr, stack, mixer, routing).
inline lm::TrainOptions base_options(bool quick, index_t steps) {
  lm::TrainOptions o;
  if (quick) {
    set_options(o, {{"d-model", "32"}, {"layers", "3"}, {"heads", "2"}, {"kv-heads", "1"}, {"lin-heads", "1"},
                    {"lin-v-heads", "2"}, {"lin-dk", "16"}, {"lin-dv", "16"}, {"batch", "4"}, {"seq-len", "32"},
                    {"eval-batches", "2"}});
  } else {
    set_options(o, {{"d-model", "96"}, {"layers", "6"}, {"heads", "4"}, {"kv-heads", "2"}, {"lin-heads", "2"},
                    {"lin-v-heads", "4"}, {"lin-dk", "32"}, {"lin-dv", "32"}, {"batch", "8"}, {"seq-len", "128"},
                    {"eval-batches", "8"}});
  }
  o.sched.steps = steps;
  o.sched.warmup = std::max<index_t>(1, steps / 10);
  o.sched.decay_frac = 0.2;
  o.eval_every = std::max<index_t>(1, steps / 10);
  o.print_every = std::max<index_t>(1, steps / 10);
  return o;
}

/// The seeds used: 1, 2, ..., n (the seed sets the initialisation and the batch order).
inline std::vector<std::uint64_t> seed_list(index_t n) {
  std::vector<std::uint64_t> s;
  for (index_t i = 1; i <= n; ++i) s.push_back(static_cast<std::uint64_t>(i));
  return s;
}

/// Append one run per seed of configuration `group` (name = group + "-s" + seed).
inline void add_seeded(std::vector<Run>& runs, const std::string& group, std::map<std::string, std::string> tags,
                       lm::TrainOptions o, index_t seeds) {
  lm::validate(o);  // a bad option (--core foo) is refused now, not in every run's child process
  for (std::uint64_t s : seed_list(seeds)) {
    Run r;
    r.group = group;
    r.name = group + "-s" + std::to_string(s);
    r.tags = tags;
    r.tags["seed"] = std::to_string(s);
    o.seed = s;
    r.opt = o;
    runs.push_back(r);
  }
}

/// Results of one configuration, in seed order.
inline std::vector<const Result*> of_group(const std::vector<Result>& rs, const std::string& group) {
  std::vector<const Result*> out;
  for (const Result& r : rs)
    if (r.run->group == group) out.push_back(&r);
  return out;
}

/// Statistic of a field over the seeds of a configuration (runs that are not complete, e.g. with
/// --report-only, are left out; a diverged run is complete and contributes its non-finite value).
template <class F>
Stat group_stat(const std::vector<Result>& rs, const std::string& group, F field) {
  std::vector<double> xs;
  for (const Result* r : of_group(rs, group))
    if (r->complete) xs.push_back(field(*r));
  return stats_of(xs);
}

/// Seed-paired differences field(b) - field(a) of two configurations (same seeds = same
/// initialisation of the shared parameters and the same batches); pairs with a run that is not
/// complete are left out.
template <class F>
Stat paired_delta(const std::vector<Result>& rs, const std::string& a, const std::string& b, F field) {
  const auto ra = of_group(rs, a), rb = of_group(rs, b);
  std::vector<double> d;
  for (size_t i = 0; i < std::min(ra.size(), rb.size()); ++i)
    if (ra[i]->complete && rb[i]->complete) d.push_back(field(*rb[i]) - field(*ra[i]));
  return stats_of(d);
}

inline double final_of(const Result& r) { return r.final_loss; }
inline double saturation_of(const Result& r) { return r.saturation; }

/// The checks every walkthrough makes on its training runs: complete, finite, and the final
/// validation loss below the loss at step 0.
inline void check_runs(Checks& ck, const std::vector<Result>& rs) {
  for (const Result& r : rs) {
    ck.expect(r.complete, r.run->name + " completed");
    ck.finite(r.final_loss, r.run->name + " final loss");
    ck.finite(r.saturation, r.run->name + " saturation loss");
    ck.expect(r.final_loss < r.init_loss,
              r.run->name + " lowered the validation loss (" + fixed(r.init_loss) + " -> " + fixed(r.final_loss) + ")");
  }
}

/// Matched runs (routed vs baseline, same seed) must be the same function at step 0: Gamma_l = 0
/// and P_l = 0 change nothing, and zero-initialised parameters draw no random numbers, so every
/// shared parameter starts equal. Checks that their validation losses at step 0 are equal.
inline void check_matched(Checks& ck, const std::vector<Result>& rs, const std::string& base, const std::string& routed) {
  const auto a = of_group(rs, base), b = of_group(rs, routed);
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i]->complete && b[i]->complete)
      ck.expect(a[i]->init_loss == b[i]->init_loss, b[i]->run->name + " starts as its baseline (loss at step 0 " +
                                                        fixed(b[i]->init_loss, 6) + " vs " + fixed(a[i]->init_loss, 6) + ")");
}

/// Write every run's outcome to <out>/runs.csv (one row per run).
inline void write_runs_csv(const Cli& c, const std::vector<Result>& rs) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : rs.front().run->tags) keys.push_back(k);
  std::vector<std::string> head{"name", "group"};
  head.insert(head.end(), keys.begin(), keys.end());
  head.insert(head.end(), {"init_loss", "saturation_loss", "final_loss", "train_elapsed_s", "train_steps", "tokens_per_step"});
  CsvFile f(c.out + "/runs.csv", head);
  for (const Result& r : rs) {
    std::vector<std::string> row{r.run->name, r.run->group};
    for (const std::string& k : keys) row.push_back(r.run->tag(k));
    row.insert(row.end(), {fixed(r.init_loss, 6), fixed(r.saturation, 6), fixed(r.final_loss, 6), fixed(r.elapsed_s, 2),
                           std::to_string(r.run->opt.sched.steps),
                           std::to_string(r.run->opt.batch * r.run->opt.seq_len)});
    f.row(row);
  }
}

/// Write `text` to <out>/<name> and print it.
inline void emit(const Cli& c, const std::string& name, const std::string& text) {
  const std::string path = c.out + "/" + name;
  std::ofstream f(path, std::ios::trunc);
  if (!f) fail("emit", "path", "a writable file", cli::unwritable(path));
  f << text;
  std::cout << text << std::flush;
}

}  // namespace linattn::paper
