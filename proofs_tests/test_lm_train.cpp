// proofs_tests/test_lm_train.cpp -- the trainer's data, checkpoints and determinism
// (walkthroughs/lm/data.hpp, walkthroughs/lm/trainer.hpp):
//  * SHA-256 against the published FIPS 180-4 test vectors, and the corpus check;
//  * batches: deterministic in (seed, step), targets are the next bytes;
//  * a run is the same for any thread count, and a run stopped and resumed from its checkpoint
//    equals the uninterrupted run (parameters bit for bit, every logged loss, the CSV);
//  * bad options, mismatched or damaged checkpoints, unusable files fail with errors naming what is wrong;
//    command-line values are read whole (walkthroughs/lm/cli.hpp).
// Runs use a tiny model on a synthetic corpus, so the file takes well under a second.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>

#include "walkthroughs/lm/trainer.hpp"

using namespace linattn;
using namespace linattn::lm;

namespace {

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("linattn_test_lm_" + name)).string();
}

/// A learnable synthetic corpus: a random order-1 Markov chain over 12 letters, each letter with
/// 2 likely successors.
Dataset synthetic_corpus(size_t n = 20000) {
  std::mt19937_64 rng(3);
  std::vector<unsigned char> bytes(n);
  int c = 0;
  for (size_t i = 0; i < n; ++i) {
    bytes[i] = static_cast<unsigned char>('a' + c);
    const int r = static_cast<int>(rng() % 10);
    c = r < 6 ? (c * 5 + 1) % 12 : r < 9 ? (c + 7) % 12 : static_cast<int>(rng() % 12);
  }
  return split_dataset(bytes);
}

TrainOptions tiny_options() {
  TrainOptions o;
  o.model.d_model = 32, o.model.n_layer = 2, o.model.n_head = 2, o.model.n_kv_head = 1;
  o.model.mlp_hidden = 64;
  o.batch = 4, o.seq_len = 32;
  o.sched.steps = 12, o.sched.warmup = 2, o.sched.decay_frac = 0.25;
  o.optim.lr = 1e-2, o.optim.adam_lr = 1e-2;
  o.eval_every = 4, o.eval_batches = 2;
  o.quiet = true;
  return o;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// The CSV without the wall-clock columns (elapsed_s, tokens_per_s), which differ between runs.
std::string csv_without_times(const std::string& csv) {
  std::istringstream is(csv);
  std::string out;
  for (std::string line; std::getline(is, line);) {
    if (!line.empty() && line[0] != '#') {
      size_t cut = line.size();
      for (int k = 0; k < 2; ++k) cut = line.rfind(',', cut - 1);
      line = line.substr(0, cut);
    }
    out += line + '\n';
  }
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const linattn::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("LM SHA-256 gives the published FIPS 180-4 digests") {
  CHECK(sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(sha256_hex(two_blocks.data(), two_blocks.size()) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(sha256_hex(million.data(), million.size()) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("LM SHA-256 fed in pieces equals SHA-256 of the whole message") {
  rc::prop("incremental sha256", [](const std::string& msg, std::vector<unsigned char> cuts) {
    Sha256 h;
    size_t pos = 0;
    for (unsigned char c : cuts) {
      const size_t n = std::min(msg.size() - pos, size_t(c));
      h.update(msg.data() + pos, n);
      pos += n;
    }
    h.update(msg.data() + pos, msg.size() - pos);
    RC_ASSERT(h.hex() == sha256_hex(msg.data(), msg.size()));
  });
}

TEST_CASE("LM corpus loader accepts tiny Shakespeare and refuses missing or altered files") {
  const std::string missing = tmp_path("missing.txt");
  std::remove(missing.c_str());
  const std::string e1 = error_of([&] { load_tinyshakespeare(missing); });
  CHECK(e1.find(missing) != std::string::npos);
  CHECK(e1.find("LINATTN_DATA") != std::string::npos);
  const std::string small = tmp_path("small.txt");
  std::ofstream(small) << "To be, or not to be";
  CHECK(error_of([&] { load_tinyshakespeare(small); }).find("1115394 bytes") != std::string::npos);
  const std::string path = default_data_path();
  if (!std::ifstream(path)) {
    WARN("corpus not found at " << path << ": the check of the real file is skipped");
    return;
  }
  const Dataset d = load_tinyshakespeare(path);
  CHECK(d.train.size() == 1003854);  // floor(0.9 * 1115394)
  CHECK(d.val.size() == 111540);
  std::vector<unsigned char> bytes = read_bytes(path);  // one byte changed, same size
  bytes[500000] ^= 1;
  const std::string altered = tmp_path("altered.txt");
  std::ofstream(altered, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  CHECK(error_of([&] { load_tinyshakespeare(altered); }).find("sha256 86c4e6aa") != std::string::npos);
  std::remove(altered.c_str());
  std::remove(small.c_str());
}

TEST_CASE("LM default corpus path is LINATTN_DATA, else LINATTN_SHARED/data, else the project's ../shared/data") {
  // Save and restore both variables: other tests in this process read them.
  auto saved = [](const char* name) -> std::optional<std::string> {
    const char* e = std::getenv(name);
    return e ? std::optional<std::string>(e) : std::nullopt;
  };
  const auto data0 = saved("LINATTN_DATA"), shared0 = saved("LINATTN_SHARED");
  const auto restore = [](const char* name, const std::optional<std::string>& v) {
    if (v) ::setenv(name, v->c_str(), 1); else ::unsetenv(name);
  };
  ::unsetenv("LINATTN_DATA");
  ::unsetenv("LINATTN_SHARED");
  const std::string root_default = default_data_path();
  CHECK(root_default == std::string(LINATTN_PROJECT_ROOT) + "/../shared/data/tinyshakespeare.txt");
  ::setenv("LINATTN_SHARED", "/elsewhere/shared", 1);
  CHECK(default_data_path() == "/elsewhere/shared/data/tinyshakespeare.txt");
  ::setenv("LINATTN_DATA", "/my/corpus.txt", 1);  // the file itself wins over the folder
  CHECK(default_data_path() == "/my/corpus.txt");
  ::setenv("LINATTN_DATA", "", 1);                 // empty counts as unset
  CHECK(default_data_path() == "/elsewhere/shared/data/tinyshakespeare.txt");
  restore("LINATTN_DATA", data0);
  restore("LINATTN_SHARED", shared0);
}

TEST_CASE("LM training batches depend only on seed and step and target the next byte") {
  rc::prop("batches", [] {
    const Dataset d = synthetic_corpus(3000);
    const index_t B = *rc::gen::inRange<index_t>(1, 5), T = *rc::gen::inRange<index_t>(1, 50);
    const auto seed = *rc::gen::arbitrary<std::uint64_t>();
    const index_t step = *rc::gen::inRange<index_t>(0, 100000);
    std::vector<int> x1(B * T), y1(B * T), x2(B * T), y2(B * T);
    train_batch(d.train, B, T, seed, step, x1.data(), y1.data());
    train_batch(d.train, B, T, seed, step, x2.data(), y2.data());
    RC_ASSERT(x1 == x2);
    RC_ASSERT(y1 == y2);
    for (index_t b = 0; b < B; ++b)
      for (index_t t = 0; t + 1 < T; ++t) RC_ASSERT(y1[b * T + t] == x1[b * T + t + 1]);
    train_batch(d.train, B, T, seed, step + 1, x2.data(), y2.data());
    if (B * T >= 8) RC_ASSERT(x1 != x2);  // (a coincidence has probability ~ 12^-8 or less)
  });
}

TEST_CASE("LM validation windows are fixed and span the validation split from its start to its end") {
  const Dataset d = synthetic_corpus(3000);
  const index_t B = 3, T = 10, nb = 4, len = static_cast<index_t>(d.val.size());
  std::vector<int> x(B * T), y(B * T);
  val_batch(d.val, B, T, 0, nb, x.data(), y.data());
  for (index_t t = 0; t < T; ++t) CHECK(x[t] == d.val[t]);  // first window at offset 0
  val_batch(d.val, B, T, nb - 1, nb, x.data(), y.data());
  for (index_t t = 0; t < T; ++t) CHECK(y[(B - 1) * T + t] == d.val[len - T + t]);  // last ends at the end
}

TEST_CASE("LM training gives the same parameters for one and two threads") {
  const Dataset d = synthetic_corpus();
  TrainOptions o = tiny_options();  // big enough that the matmuls and attention run in parallel
  o.model.d_model = 64, o.model.mlp_hidden = 128, o.batch = 8, o.seq_len = 128;
  o.sched.steps = 1, o.sched.warmup = 0, o.sched.decay_frac = 0, o.eval_batches = 1;  // one full step
  o.optim.name = "muon";
  const int before = num_threads();
  std::vector<float> ref;
  for (int threads : {1, 2}) {
    o.threads = threads;
    const TrainResult r = train(o, d, std::cout);
    if (ref.empty()) ref = r.params;
    size_t differ = 0;
    for (size_t i = 0; i < ref.size(); ++i) differ += r.params[i] != ref[i];
    INFO("threads=" << threads << ": " << differ << " of " << ref.size() << " parameters differ");
    CHECK(r.params.size() == ref.size());
    CHECK(differ == 0);
  }
  set_num_threads(before);
}

TEST_CASE("LM training lowers the validation loss of a learnable corpus below its initial log 256") {
  const Dataset d = synthetic_corpus();
  TrainOptions o = tiny_options();
  o.sched.steps = 40, o.sched.warmup = 4, o.eval_every = 40;
  const TrainResult r = train(o, d, std::cout);
  REQUIRE(r.evals.size() == 3);  // step 0, saturation (step 30 = 40 - 10 decay steps), final
  CHECK(r.evals.front().val_loss == Approx(std::log(256.0)).epsilon(0.02));
  CHECK(r.evals.back().val_loss < 2.0);  // the chain's entropy is about 1.3 nats; log 12 = 2.48
  CHECK(r.state.saturation == r.evals[1].val_loss);
  CHECK(r.evals[1].step == 30);
  CHECK(r.state.final_loss == r.evals.back().val_loss);
}

TEST_CASE("LM training stopped at a checkpoint and resumed equals the uninterrupted run") {
  const Dataset d = synthetic_corpus();
  for (const char* optimizer : {"adamw", "muon"}) {
    TrainOptions o = tiny_options();
    o.optim.name = optimizer;
    o.log_csv = tmp_path("full.csv");
    o.ckpt_path = tmp_path("full.ckpt");
    const TrainResult full = train(o, d, std::cout);

    TrainOptions a = o;  // stop after 5 steps (mid eval interval, training-loss average pending)
    a.log_csv = tmp_path("part.csv"), a.ckpt_path = tmp_path("part.ckpt"), a.stop_at = 5;
    train(a, d, std::cout);
    TrainOptions more = a;  // pretend the first process ran further and died after logging
    more.stop_at = 9, more.ckpt_path = tmp_path("ignored.ckpt");
    train(more, d, std::cout);
    TrainOptions b = a;
    b.stop_at = 0, b.resume = a.ckpt_path;
    const TrainResult resumed = train(b, d, std::cout);

    INFO("optimizer " << optimizer);
    CHECK(resumed.params == full.params);
    CHECK(resumed.state.final_loss == full.state.final_loss);
    CHECK(resumed.state.saturation == full.state.saturation);
    REQUIRE(resumed.evals.size() == 3);  // steps 8, 9 (saturation: decay starts at 12 - 3) and 12
    CHECK(resumed.evals.back().train_loss == full.evals.back().train_loss);
    CHECK(csv_without_times(slurp(b.log_csv)) == csv_without_times(slurp(o.log_csv)));
    for (const std::string& f : {o.log_csv, o.ckpt_path, a.log_csv, a.ckpt_path, more.ckpt_path})
      std::remove(f.c_str());
  }
}

TEST_CASE("LM resume refuses a checkpoint of other run options or a damaged checkpoint") {
  const Dataset d = synthetic_corpus();
  TrainOptions a = tiny_options();
  a.ckpt_path = tmp_path("opts.ckpt"), a.stop_at = 2;
  train(a, d, std::cout);
  TrainOptions b = a;
  b.stop_at = 0, b.resume = a.ckpt_path, b.optim.lr = 2e-2;
  const std::string e = error_of([&] { train(b, d, std::cout); });
  CHECK(e.find("--lr 0.01 (given 0.02)") != std::string::npos);
  std::string bytes = slurp(a.ckpt_path);
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(a.ckpt_path, std::ios::binary) << bytes;
  b.optim.lr = a.optim.lr;
  CHECK(error_of([&] { train(b, d, std::cout); }).find("damaged or truncated") != std::string::npos);
  std::ofstream(a.ckpt_path, std::ios::binary) << bytes.substr(0, 100);
  CHECK(error_of([&] { train(b, d, std::cout); }).find("damaged or truncated") != std::string::npos);
  std::remove(a.ckpt_path.c_str());
}

TEST_CASE("LM bad options are errors that name the option and the expected value") {
  auto set = [](const std::string& name, const std::string& value) {
    TrainOptions o;
    for (const OptionSpec& s : option_table())
      if (s.name == name) s.set(o, value);
    validate(o);
  };
  CHECK(error_of([&] { set("lr", "fast"); }).find("'--lr' expected a finite number but got 'fast'") != std::string::npos);
  CHECK(error_of([&] { set("steps", "1e3"); }).find("'--steps' expected an integer") != std::string::npos);
  CHECK(error_of([&] { set("attn-gate", "yes"); }).find("'--attn-gate' expected 0 or 1") != std::string::npos);
  CHECK(error_of([&] { set("mixer", "mamba"); }).find("deltanet, gdn, kda or gdn2") != std::string::npos);
  CHECK(error_of([&] { set("optimizer", "sgd"); }).find("'optimizer' expected adamw or muon but got sgd") != std::string::npos);
  CHECK(error_of([&] { set("heads", "6"); }).find("'n_head' expected a divisor of d_model = 128") != std::string::npos);
  CHECK(error_of([&] { set("warmup", "900"); }).find("'warmup' expected at most the decay start 800") != std::string::npos);
  CHECK(error_of([&] { set("stop-at", "5"); }).find("'--ckpt' expected a checkpoint path") != std::string::npos);
  CHECK(error_of([&] { set("batch", "0"); }).find("'--batch' expected a positive size but got 0") != std::string::npos);
  CHECK(error_of([&] { set("batch", "99999999999"); }).find("'--batch x --seq-len' expected at most 16777216 tokens") != std::string::npos);
  CHECK(error_of([&] { set("layers", "65537"); }).find("'n_layer' expected a size at most 65536 but got 65537") != std::string::npos);
  CHECK(error_of([&] { set("mlp-hidden", "-1"); }).find("'mlp_hidden' expected 0 (8/3 d_model") != std::string::npos);
  CHECK(error_of([&] { set("clip", "-1"); }).find("'--clip' expected 0 (off) or a positive gradient norm but got -1") != std::string::npos);
  CHECK(error_of([&] { set("threads", "4294967297"); }).find("'--threads' expected an integer in [0, 1024]") != std::string::npos);
  CHECK(error_of([&] { set("steps", "66x"); }).find("'--steps' expected an integer but got '66x'") != std::string::npos);
  CHECK(error_of([&] { set("seq-len", "64"); }).empty());  // and a good value passes
}

TEST_CASE("LM command-line values are read whole: junk, empty items, overflow and non-finite numbers are errors") {
  CHECK(cli::to_int("p", "--n", "66") == 66);
  CHECK(cli::to_int("p", "--n", "-3", -5, 5) == -3);
  for (const char* bad : {"66x", "", " 6", "6 ", "0x10", "1e3", "+", "99999999999999999999"})
    CHECK(error_of([&] { cli::to_int("p", "--n", bad); }) == std::string("p: argument '--n' expected an integer but got '") + bad + "'");
  CHECK(error_of([&] { cli::to_int("p", "--n", "0", 1, 8); }) == "p: argument '--n' expected an integer in [1, 8] but got '0'");
  CHECK(cli::to_double("p", "--x", "2.5e-3") == 2.5e-3);
  for (const char* bad : {"nan", "inf", "-inf", "1e999", "3x", ""})
    CHECK(error_of([&] { cli::to_double("p", "--x", bad); }).find("expected a finite number but got") != std::string::npos);
  CHECK(cli::to_int_list("p", "--T", "16,32", 1) == std::vector<long long>{16, 32});
  CHECK(error_of([&] { cli::to_int_list("p", "--T", "16,0", 1); }) ==
        "p: argument '--T' expected a comma-separated list of integers >= 1 but got '0' (item 2 of '16,0')");
  for (const char* bad : {"", ",", "1,", ",1", "1,,2"})
    CHECK(error_of([&] { cli::split("p", "--l", bad); }).find("expected a comma-separated list without empty items") !=
          std::string::npos);
}

TEST_CASE("LM files: a directory is not a readable corpus or checkpoint, nor a writable checkpoint or log") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  CHECK(error_of([&] { read_bytes(dir); }).find("but got '" + dir + "' (a directory)") != std::string::npos);
  TrainOptions o = tiny_options();
  o.resume = dir;
  CHECK(error_of([&] { check_files(o); }).find("'--resume' expected a readable checkpoint file but got '" + dir +
                                                "' (a directory)") != std::string::npos);
  o.resume.clear(), o.ckpt_path = dir;
  CHECK(error_of([&] { check_files(o); }).find("'--ckpt' expected a writable file but got '" + dir + "' (a directory)") !=
        std::string::npos);
  o.ckpt_path = tmp_path("no_such_dir/x.ckpt");
  CHECK(error_of([&] { train(o, synthetic_corpus(), std::cout); }).find("does not exist") != std::string::npos);
  o.ckpt_path = tmp_path("fresh.ckpt"), o.log_csv = tmp_path("fresh.csv");  // usable: the check leaves no file
  std::remove(o.ckpt_path.c_str()), std::remove(o.log_csv.c_str());
  check_files(o);
  CHECK(!std::filesystem::exists(o.ckpt_path));
  CHECK(!std::filesystem::exists(o.log_csv));
}
