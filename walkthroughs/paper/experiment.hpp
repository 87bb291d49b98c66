// walkthroughs/paper/experiment.hpp -- the experiment driver shared by the paper walkthroughs
// (table2_mixers, lr_sweep, fig6_iteration_time, table6_cler, table7_routing).
//
// An experiment is a list of Runs. One Run = one configuration x one seed = one deterministic
// training of walkthroughs/lm (lm::train) = one process writing its own CSV
// (<out>/runs/<name>.csv, the trainer's format: the run signature as '#' lines, then one row per
// evaluation) and its own log (<out>/logs/<name>.log). The driver
//   * starts each pending run as a child process of the same program (`<prog> <same args> --only
//     <name>`), at most --jobs at a time, each with --threads OpenMP threads;
//   * skips a run whose CSV is complete (a "final" row) and was written with the same run
//     signature, so an interrupted or split-up full run continues where it stopped and runs made
//     on another machine can be copied in (--force re-runs everything);
//   * reads every CSV back into a Result (initial, saturation and final validation loss, curve).
// Timing (Table 2's throughput, Fig.6) is measured separately, in the driver process, one
// configuration at a time (time_iterations), never while training runs are going.
//
// Numbers do not depend on --jobs or --threads (the trainer's determinism rule); wall-clock
// columns do.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "walkthroughs/lm/cli.hpp"
#include "walkthroughs/lm/trainer.hpp"
#include "walkthroughs/paper/json.hpp"
#include "walkthroughs/paper/report.hpp"

extern char** environ;

namespace linattn::paper {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Paths: the project root, the shared directory (data, paper tables)
// ---------------------------------------------------------------------------------------------

/// The project root: this header lives in <root>/walkthroughs/paper/ (the compiler gives its
/// absolute path); otherwise the current directory.
inline std::string project_root() {
  const std::string f = __FILE__;
  const auto pos = f.rfind("/walkthroughs/paper/");
  if (pos != std::string::npos && fs::exists(f.substr(0, pos) + "/walkthroughs")) return f.substr(0, pos);
  return ".";
}

/// The shared directory: env LINATTN_SHARED, else <root>/../shared (where the data lives).
inline std::string shared_dir() {
  if (const char* e = std::getenv("LINATTN_SHARED"); e && *e) return e;
  return project_root() + "/../shared";
}

/// The corpus: --data, else the trainer's default (env LINATTN_DATA, else <shared>/data/tinyshakespeare.txt,
/// lm::default_data_path: one definition of the order for train_lm and these programs).
inline std::string corpus_path(const std::string& given) { return given.empty() ? lm::default_data_path() : given; }

inline std::string read_text(const std::string& path, const std::string& what) {
  return lm::read_file("read_text", what, "a readable file", path);
}

/// The paper's tables (<shared>/paper/tables.json, or env LINATTN_PAPER_TABLES).
inline Json load_paper_tables() {
  const char* e = std::getenv("LINATTN_PAPER_TABLES");
  const std::string path = e && *e ? std::string(e) : shared_dir() + "/paper/tables.json";
  return parse_json(read_text(path, "paper tables"));
}

/// Rows of one paper table whose leading columns equal `key` (strings), e.g. {"gdn", "adamw"}.
inline const Json* paper_row(const Json& table, const std::vector<std::string>& key) {
  for (const Json& row : table.at("rows").arr) {
    bool match = row.kind == Json::Kind::array && row.arr.size() >= key.size();
    for (size_t i = 0; match && i < key.size(); ++i) match = row[i].is_string() && row[i].str == key[i];
    if (match) return &row;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Command line shared by the walkthroughs
// ---------------------------------------------------------------------------------------------

/// A program-specific option (--name value) with its default and help.
struct ExtraOption {
  std::string name, value, help;
};

/// The most seeds per configuration and timed iterations per configuration the programs accept.
inline constexpr long long kMaxSeeds = 1000, kMaxTimingSteps = 1000000;

struct Cli {
  std::string prog;        ///< the program's name (in error messages)
  bool quick = false;      ///< tiny model, few steps: the CI mode
  bool force = false;      ///< re-run runs whose CSV is complete
  bool list = false;       ///< print the runs and exit
  bool report_only = false;  ///< train nothing: tables from the complete runs (missing ones listed)
  std::string clock = "wall";  ///< timing clock: wall | cpu (process CPU time: robust on a loaded machine with 1 thread)
  int jobs = 1;            ///< runs at once
  int threads = 0;         ///< OpenMP threads per run (0: 1 if jobs > 1, else all)
  index_t seeds = 0;       ///< seeds per configuration (0: the program's default for the mode)
  index_t timing_steps = -1;  ///< timed iterations per configuration (-1: the program's default; 0: skip)
  std::string out;         ///< output directory
  std::string only;        ///< run this one run in this process (what the driver's children do)
  std::string data;        ///< corpus path
  std::vector<ExtraOption> extra;
  std::vector<std::string> argv;  ///< the original arguments (for the children)

  const std::string& get(const std::string& name) const {
    for (const ExtraOption& e : extra)
      if (e.name == name) return e.value;
    fail("Cli::get", "name", "a declared option", "'" + name + "'");
  }
  /// A program option read whole as an integer in [lo, hi] (Error naming --name otherwise).
  index_t get_int(const std::string& name, long long lo, long long hi = cli::kNoMax) const {
    return static_cast<index_t>(cli::to_int(prog, "--" + name, get(name), lo, hi));
  }
  /// A program option as a comma-separated list (no empty items).
  std::vector<std::string> get_list(const std::string& name) const { return cli::split(prog, "--" + name, get(name)); }
  int run_threads() const { return threads > 0 ? threads : (jobs > 1 ? 1 : 0); }
};

/// Parse the shared options and the program's `extra` ones (given with their defaults).
/// `results` names the item's directory: --out defaults to walkthroughs/results/<results>, or
/// <results>_quick with --quick. Prints the help and exits on --help.
inline Cli parse_cli(int argc, char** argv, const std::string& prog, const std::string& results,
                     std::vector<ExtraOption> extra) {
  Cli c;
  c.prog = prog;
  c.extra = std::move(extra);
  for (int i = 0; i < argc; ++i) c.argv.emplace_back(argv[i]);
  // An empty value is refused: the programs read "" as "not given" (--out "" would write into the
  // committed walkthroughs/results).
  auto need = [&](int& i, const std::string& a) -> std::string {
    if (i + 1 >= argc) fail(prog, a, "a value after it", "nothing");
    if (argv[i + 1][0] == '\0') fail(prog, a, "a non-empty value", "''");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << prog << " [options]\n"
                << "  --quick            tiny model, few steps (CI mode; checks every table is finite and the loss falls)\n"
                << "  --out DIR          output directory [walkthroughs/results/" << results << ", or " << results
                << "_quick with --quick]\n"
                << "  --jobs N           runs at once, each a child process [1]\n"
                << "  --threads T        OpenMP threads per run [1 when --jobs > 1, else all]\n"
                << "  --seeds N          seeds per configuration [program default]\n"
                << "  --timing-steps N   timed iterations per configuration (table2_mixers: 0 keeps the existing\n"
                << "                     timing.csv; fig6_iteration_time: 0 = its default; the others time nothing)\n"
                << "  --force            re-run runs whose CSV is already complete\n"
                << "  --report-only      train nothing: make the tables from the complete runs, list the missing\n"
                << "  --clock C          timing clock: wall, or cpu (process CPU time; with --threads 1 it is the\n"
                << "                     program's own cost even on a loaded machine) [wall]\n"
                << "  --list             print the runs and exit\n"
                << "  --only NAME        run one run in this process (what the driver's children do)\n"
                << "  --data PATH        corpus [env LINATTN_DATA, else <shared>/data/tinyshakespeare.txt; <shared> = env LINATTN_SHARED, else <root>/../shared]\n";
      for (const ExtraOption& e : c.extra) {
        std::string left = "  --" + e.name + " V";
        if (left.size() < 21) left.resize(21, ' ');
        std::cout << left << e.help << " [" << e.value << "]\n";
      }
      std::exit(0);
    }
    if (a == "--quick") c.quick = true;
    else if (a == "--force") c.force = true;
    else if (a == "--list") c.list = true;
    else if (a == "--report-only") c.report_only = true;
    else if (a == "--clock") c.clock = need(i, a);
    else if (a == "--out") c.out = need(i, a);
    else if (a == "--only") c.only = need(i, a);
    else if (a == "--data") c.data = need(i, a);
    else if (a == "--jobs") c.jobs = static_cast<int>(cli::to_int(prog, a, need(i, a), 1, cli::kMaxThreads));
    else if (a == "--threads") c.threads = static_cast<int>(cli::to_int(prog, a, need(i, a), 0, cli::kMaxThreads));
    else if (a == "--seeds") c.seeds = cli::to_int(prog, a, need(i, a), 0, kMaxSeeds);
    else if (a == "--timing-steps") c.timing_steps = cli::to_int(prog, a, need(i, a), 0, kMaxTimingSteps);
    else {
      bool found = false;
      for (ExtraOption& e : c.extra)
        if (a == "--" + e.name) e.value = need(i, a), found = true;
      if (!found) fail(prog, "argument " + std::to_string(i), "a known option (see --help)", "'" + a + "'");
    }
  }
  if (c.clock != "wall" && c.clock != "cpu") fail(prog, "--clock", "wall or cpu", "'" + c.clock + "'");
  if (c.out.empty()) c.out = project_root() + "/walkthroughs/results/" + results + (c.quick ? "_quick" : "");
  return c;
}

/// OpenMP's default wait policy spins at barriers, which is several times slower on a shared
/// machine (walkthroughs/train_lm.cpp measured 5.8x). libgomp reads the policy when it loads, so
/// unless the user chose one, restart once with OMP_WAIT_POLICY=passive (children inherit it).
inline void prefer_passive_openmp_wait(char** argv) {
#if defined(__linux__) && defined(_OPENMP)
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then carry on
  }
#else
  (void)argv;
#endif
}

// ---------------------------------------------------------------------------------------------
// Runs
// ---------------------------------------------------------------------------------------------

/// One configuration x seed.
struct Run {
  std::string name;   ///< unique file stem, e.g. "gdn-adamw-hybrid-s2"
  std::string group;  ///< the configuration without the seed, e.g. "gdn-adamw-hybrid"
  std::map<std::string, std::string> tags;  ///< what the tables group by (arch, optimizer, stack, ...)
  lm::TrainOptions opt;
  std::string tag(const std::string& k) const {
    const auto it = tags.find(k);
    return it == tags.end() ? std::string() : it->second;
  }
};

/// Set trainer options by their command-line names: {{"stack", "hybrid"}, {"lr", "1e-3"}}.
inline void set_options(lm::TrainOptions& o, const std::vector<std::pair<std::string, std::string>>& kv) {
  for (const auto& [name, value] : kv) {
    const lm::OptionSpec* spec = nullptr;
    for (const lm::OptionSpec& s : lm::option_table())
      if (s.name == name) spec = &s;
    if (!spec) fail("set_options", "name", "a train_lm option", "'" + name + "'");
    spec->set(o, value);
  }
}

inline std::string runs_dir(const Cli& c) { return c.out + "/runs"; }
inline std::string csv_path(const Cli& c, const Run& r) { return runs_dir(c) + "/" + r.name + ".csv"; }
inline std::string log_path(const Cli& c, const Run& r) { return c.out + "/logs/" + r.name + ".log"; }

/// One training run's outcome, read back from its CSV.
struct Result {
  const Run* run = nullptr;
  bool complete = false;
  double init_loss = NAN;   ///< validation loss at step 0
  double saturation = NAN;  ///< validation loss just before the decay phase
  double final_loss = NAN;  ///< validation loss at the end
  double elapsed_s = NAN, tokens_per_s = NAN;
  std::vector<lm::EvalRow> curve;
};

/// Read a trainer CSV; `complete` iff it was written with `r`'s signature and has a final row.
inline Result read_result(const Cli& c, const Run& r) {
  Result res;
  res.run = &r;
  std::ifstream f(csv_path(c, r));
  if (!f) return res;
  std::string sig;
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      sig += line.substr(line.size() > 1 ? 2 : 1) + "\n";
      continue;
    }
    if (line.rfind("step,", 0) == 0) continue;
    std::vector<std::string> col;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) col.push_back(x);
    if (col.size() < 9) return res;  // a truncated line: incomplete
    lm::EvalRow e;
    auto num = [](const std::string& s) {
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      return end == s.c_str() ? NAN : v;
    };
    e.step = static_cast<index_t>(num(col[0]));
    e.lr = num(col[2]), e.train_loss = num(col[3]), e.val_loss = num(col[4]), e.grad_norm = num(col[5]);
    e.phase = col[6], e.elapsed_s = num(col[7]), e.tokens_per_s = num(col[8]);
    res.curve.push_back(e);
  }
  if (sig != lm::run_signature(r.opt)) {  // written by a different configuration: not this run's
    Result none;
    none.run = &r;
    return none;
  }
  for (const lm::EvalRow& e : res.curve) {
    if (e.step == 0) res.init_loss = e.val_loss;
    if (e.phase == "saturation") res.saturation = e.val_loss;
    if (e.phase == "diverged") res.complete = true, res.final_loss = res.saturation = NAN;
    if (e.phase == "final") {
      res.final_loss = e.val_loss, res.complete = true, res.elapsed_s = e.elapsed_s, res.tokens_per_s = e.tokens_per_s;
      if (r.opt.sched.decay_steps() == 0) res.saturation = e.val_loss;
    }
  }
  return res;
}

/// Train run `r` on `data` in this process, writing its CSV (<out>/runs/<name>.csv); progress
/// goes to `log`. A run whose loss becomes non-finite (too large a learning rate) is a result: it
/// gets a "diverged" row, which read_result counts as complete with a non-finite final loss.
inline void train_run(const Cli& c, const Run& r, const lm::Dataset& data, std::ostream& log) {
  fs::create_directories(runs_dir(c));
  lm::TrainOptions o = r.opt;
  o.log_csv = csv_path(c, r);
  o.threads = c.run_threads();
  {
    const lm::Model<float> probe(o.model);
    log << "run " << r.name << ": " << probe.num_params() << " parameters, " << o.sched.steps << " steps x " << o.batch
        << " x " << o.seq_len << " tokens, " << (o.threads > 0 ? o.threads : lm::num_threads()) << " threads\n"
        << lm::run_signature(o) << std::flush;
  }
  try {
    const lm::TrainResult tr = lm::train(o, data, log);
    log << "done: saturation " << fixed(tr.state.saturation) << " final " << fixed(tr.state.final_loss) << " in "
        << fixed(tr.state.elapsed_s, 1) << " s\n";
  } catch (const linattn::Error& e) {
    if (std::string(e.what()).find("a finite loss") == std::string::npos) throw;
    log << "diverged: " << e.what() << '\n';
    std::ofstream(o.log_csv, std::ios::app) << o.sched.steps << ",0,0,nan,nan,nan,diverged,0,0\n";
  }
}

/// What a driver's child does: load the corpus and train one run.
inline int run_in_process(const Cli& c, const Run& r) {
  const lm::Dataset data = lm::load_tinyshakespeare(corpus_path(c.data));
  train_run(c, r, data, std::cout);
  return 0;
}

/// Run every pending run (not complete, or all with --force) as child processes, --jobs at a
/// time. Returns the number of runs that failed (non-zero exit or no complete CSV).
inline int execute_runs(const Cli& c, const std::vector<Run>& runs) {
  fs::create_directories(runs_dir(c));
  fs::create_directories(c.out + "/logs");
  std::vector<const Run*> pending;
  for (const Run& r : runs)
    if (c.force || !read_result(c, r).complete) pending.push_back(&r);
  std::cout << runs.size() << " runs, " << runs.size() - pending.size() << " already complete in " << runs_dir(c)
            << ", " << pending.size() << " to run (" << c.jobs << " at a time, " << c.run_threads()
            << " threads each; 0 = all)\n";
  if (pending.empty())  // e.g. --quick over the committed walkthroughs/results/<name>_quick: nothing trains
    std::cout << "Nothing to train: the report below is read from the CSVs already there. To train again, add --force "
                 "(overwrites them) or --out DIR (a new folder).\n";
  std::cout << std::flush;
  std::vector<std::string> base;  // the children's arguments: ours minus --jobs/--only/--force/--list
  for (size_t i = 1; i < c.argv.size(); ++i) {
    const std::string& a = c.argv[i];
    if (a == "--jobs" || a == "--only") { ++i; continue; }
    if (a == "--force" || a == "--list" || a == "--report-only") continue;
    base.push_back(a);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::map<pid_t, const Run*> live;
  size_t next = 0, done = 0;
  int failed = 0;
  auto start = [&](const Run& r) {
    std::vector<std::string> args{c.argv[0]};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), {"--only", r.name});
    if (c.threads == 0 && c.jobs > 1) args.insert(args.end(), {"--threads", "1"});
    std::vector<char*> av;
    for (std::string& s : args) av.push_back(s.data());
    av.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string log = log_path(c, r);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, av.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) fail("execute_runs", "posix_spawn", "a started child", "error " + std::to_string(rc));
    live[pid] = &r;
  };
  while (next < pending.size() || !live.empty()) {
    while (next < pending.size() && live.size() < static_cast<size_t>(c.jobs)) start(*pending[next++]);
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    const auto it = live.find(pid);
    if (it == live.end()) continue;
    const Run& r = *it->second;
    live.erase(it);
    ++done;
    const Result res = read_result(c, r);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && res.complete;
    if (!ok) ++failed;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[%zu/%zu %6.0f s] %-36s %s", done, pending.size(), t, r.name.c_str(), ok ? "final" : "FAILED");
    if (ok) std::printf(" %.4f (%.0f s)", res.final_loss, res.elapsed_s);
    else std::printf(" (see %s)", log_path(c, r).c_str());
    std::printf("\n");
    std::fflush(stdout);
  }
  return failed;
}

/// Print the runs (--list).
inline void list_runs(const std::vector<Run>& runs) {
  for (const Run& r : runs) {
    std::cout << r.name;
    for (const auto& [k, v] : r.tags) std::cout << ' ' << k << '=' << v;
    std::cout << '\n';
  }
}

/// The whole driver: --list, --only, or run everything pending; then read every result.
/// Returns false when a child failed. In --only mode it trains and exits the process.
inline bool drive(const Cli& c, const std::vector<Run>& runs, std::vector<Result>& results) {
  if (c.list) {
    list_runs(runs);
    std::exit(0);
  }
  if (!c.only.empty()) {
    for (const Run& r : runs)
      if (r.name == c.only) std::exit(run_in_process(c, r));
    fail("drive", "--only", "the name of a run (see --list)", "'" + c.only + "'");
  }
  std::error_code ec;
  if (c.report_only && !fs::is_directory(c.out, ec))
    fail(c.prog, "--out", "the directory of the runs to report (--report-only trains nothing)",
         "'" + c.out + "' (" + (fs::exists(c.out, ec) ? "not a directory" : "the directory does not exist") + ")");
  const int failed = c.report_only ? 0 : execute_runs(c, runs);
  results.clear();
  int missing = 0;
  for (const Run& r : runs) {
    results.push_back(read_result(c, r));
    if (!results.back().complete) {
      if (c.report_only) std::cout << "missing (not complete in " << runs_dir(c) << "): " << r.name << '\n';
      ++missing;
    }
  }
  if (c.report_only)
    std::cout << "report only: " << runs.size() - size_t(missing) << " of " << runs.size() << " runs complete\n";
  return failed == 0 && missing == 0;
}

// ---------------------------------------------------------------------------------------------
// Timing: seconds per training iteration (forward + backward + optimiser step)
// ---------------------------------------------------------------------------------------------

struct Timing {
  double median_s = NAN, min_s = NAN, max_s = NAN;
  index_t tokens = 0;  ///< tokens per iteration
  index_t iters = 0;
  double tokens_per_s() const { return double(tokens) / median_s; }
};

/// Seconds on the wall clock, or of CPU time used by this process (all its threads).
inline double clock_seconds(bool cpu) {
  if (cpu) {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Time `iters` training iterations of configuration `o` after `warm` untimed ones, in this
/// process with `threads` threads (0: all), on the wall clock or (cpu_clock) as CPU time of the
/// process. Batches are real training batches.
inline Timing time_iterations(const lm::TrainOptions& o, const lm::Dataset& data, index_t warm, index_t iters,
                              int threads, bool cpu_clock = false) {
  lm::validate(o);
  if (threads > 0) lm::set_num_threads(threads);
  lm::Model<float> model(o.model);
  model.init(o.seed);
  lm::Optimizer<float> opt(o.optim, o.sched, model.ps);
  const index_t B = o.batch, Tn = o.seq_len;
  std::vector<int> x(static_cast<size_t>(B * Tn)), y(static_cast<size_t>(B * Tn));
  std::vector<double> dt;
  for (index_t s = 0; s < warm + iters; ++s) {
    lm::train_batch(data.train, B, Tn, o.seed, s, x.data(), y.data());
    const double t0 = clock_seconds(cpu_clock);
    model.ps.zero_grad();
    model.forward(x.data(), y.data(), B, Tn);
    model.backward();
    opt.step(model.ps);
    const double t = clock_seconds(cpu_clock) - t0;
    if (s >= warm) dt.push_back(t);
  }
  Timing tm;
  tm.tokens = B * Tn;
  tm.iters = iters;
  if (dt.empty()) return tm;
  std::sort(dt.begin(), dt.end());
  tm.median_s = dt[dt.size() / 2];
  tm.min_s = dt.front(), tm.max_s = dt.back();
  return tm;
}

/// The CPU model (for the results' "machine" line).
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

/// A short header for results files: machine, date, command.
inline std::string provenance(const Cli& c) {
  std::ostringstream os;
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  os << "machine: " << cpu_model() << ", " << std::thread::hardware_concurrency() << " hardware threads; " << buf
     << "\ncommand:";
  for (const std::string& a : c.argv) os << ' ' << a;
  os << '\n';
  return os.str();
}

}  // namespace linattn::paper
