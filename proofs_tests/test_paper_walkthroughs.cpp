// proofs_tests/test_paper_walkthroughs.cpp -- the experiment library of the paper walkthroughs
// (walkthroughs/paper/): the JSON reader of the paper's tables, the statistics over seeds
// (mean, sample sd, seed-paired deltas, the "resolved" rule), Markdown tables, and the run
// bookkeeping: a run trained in-process writes a CSV that reads back as complete with the
// training's losses, and a CSV written under another configuration is never taken for this run's;
// a results file that cannot be written is an error saying why. (The programs' command lines are
// tested by running them: the "CLI: ..." tests of walkthroughs/CMakeLists.txt.)
// Runs use a tiny model on a synthetic corpus (well under a second).
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "walkthroughs/paper/scales.hpp"

using namespace linattn;
using namespace linattn::paper;

namespace {

/// A learnable synthetic corpus (order-1 Markov chain over 12 letters).
lm::Dataset synthetic_corpus(size_t n = 20000) {
  std::mt19937_64 rng(5);
  std::vector<unsigned char> bytes(n);
  int c = 0;
  for (size_t i = 0; i < n; ++i) {
    bytes[i] = static_cast<unsigned char>('a' + c);
    const int r = static_cast<int>(rng() % 10);
    c = r < 6 ? (c * 5 + 1) % 12 : r < 9 ? (c + 7) % 12 : static_cast<int>(rng() % 12);
  }
  return lm::split_dataset(bytes);
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

TEST_CASE("The JSON reader returns the numbers and strings written in the text") {
  const Json j = parse_json(R"({"t": {"columns": ["a", "b"], "rows": [["gdn", "adamw", 2.5e-1, -3], ["kda", "x\"y", 7, 1e3]]},
                                "flag": true, "none": null})");
  const Json& t = j.at("t");
  CHECK(t.at("columns").size() == 2);
  CHECK(t.at("rows")[0][2].num == 0.25);
  CHECK(t.at("rows")[0][3].num == -3.0);
  CHECK(t.at("rows")[1][1].str == "x\"y");
  CHECK(t.at("rows")[1][3].num == 1000.0);
  CHECK(j.at("flag").b);
  CHECK(j.at("none").kind == Json::Kind::null);
  const Json* row = paper_row(t, {"kda"});
  REQUIRE(row != nullptr);
  CHECK((*row)[2].num == 7.0);
  CHECK(paper_row(t, {"gdn", "muon"}) == nullptr);
  CHECK(error_of([] { parse_json("[1, 2"); }).find("parse_json") != std::string::npos);
  CHECK(error_of([] { parse_json("{\"a\": 1} x"); }).find("the end of the text") != std::string::npos);
  CHECK(error_of([&] { (void)j.at("absent"); }).find("'absent'") != std::string::npos);
}

TEST_CASE("The shared paper tables have the 18 configurations of Table 2 and 5 rows of Table 7") {
  const std::string path = shared_dir() + "/paper/tables.json";
  if (!std::filesystem::exists(path)) {
    WARN("paper tables not found at " << path << ": skipped");
    return;
  }
  const Json j = load_paper_tables();
  CHECK(j.at("table2_350M_15B").at("rows").size() == 18);
  CHECK(j.at("table7_hidden_routing").at("rows").size() == 5);
  CHECK(paper_row(j.at("table2_350M_15B"), {"gdn", "adamw", "pure"}) != nullptr);
}

TEST_CASE("Mean and sample sd over seeds are shift-equivariant and the sd of two values is their gap over root 2") {
  rc::prop("stat", [] {
    const auto xs = *rc::gen::container<std::vector<double>>(*rc::gen::inRange<size_t>(2, 9),
                                                             rc::gen::map(rc::gen::inRange(-1000, 1000), [](int i) { return i / 100.0; }));
    const double c = *rc::gen::inRange(-500, 500) / 10.0;
    std::vector<double> ys;
    for (double x : xs) ys.push_back(x + c);
    const Stat a = stats_of(xs), b = stats_of(ys);
    RC_ASSERT(std::abs(b.mean - (a.mean + c)) <= 1e-9 * (1 + std::abs(b.mean)));
    RC_ASSERT(std::abs(b.sd - a.sd) <= 1e-9 * (1 + a.sd));
    const Stat two = stats_of({xs[0], xs[1]});
    RC_ASSERT(std::abs(two.sd - std::abs(xs[0] - xs[1]) / std::sqrt(2.0)) <= 1e-12 * (1 + two.sd));
    RC_ASSERT(stats_of({xs[0], xs[0], xs[0]}).sd <= 1e-12 * (1 + std::abs(xs[0])));  // 0 up to the rounding of the mean
  });
  CHECK(stats_of({3.0}).sd == 0.0);
  CHECK(std::isnan(stats_of({}).mean));
}

TEST_CASE("A delta is resolved exactly when its mean exceeds two standard errors") {
  Stat d;
  d.n = 4, d.sd = 0.01;
  d.mean = 0.0101;  // 2 sd / sqrt(4) = 0.01
  CHECK(resolved(d));
  d.mean = -0.0099;
  CHECK_FALSE(resolved(d));
  d.n = 1, d.mean = 1.0;  // one seed never resolves anything
  CHECK_FALSE(resolved(d));
}

TEST_CASE("Markdown tables have one separator cell per header cell") {
  MdTable t;
  t.header = {"a", "b", "c"};
  t.add({"1", "2", "3"});
  const std::string s = t.str();
  CHECK(s == "| a | b | c |\n| --- | --- | --- |\n| 1 | 2 | 3 |\n");
}

TEST_CASE("A walkthrough run reads back complete with the losses its training logged") {
  const lm::Dataset data = synthetic_corpus();
  Cli c;
  c.out = (std::filesystem::temp_directory_path() / "linattn_test_paper_walkthroughs").string();
  std::filesystem::remove_all(c.out);
  c.threads = 1;
  std::vector<Run> runs;
  lm::TrainOptions o = base_options(true, 16);
  set_options(o, {{"stack", "hybrid"}, {"mixer", "gdn"}, {"core", "recurrent"}, {"lr", "1e-2"}, {"adam-lr", "1e-2"}});
  o.quiet = true;
  add_seeded(runs, "tiny", {{"arch", "gdn"}}, o, 2);
  REQUIRE(runs.size() == 2);
  CHECK(runs[1].name == "tiny-s2");
  CHECK(runs[1].opt.seed == 2);
  CHECK_FALSE(read_result(c, runs[0]).complete);  // nothing written yet
  std::ostringstream log;
  for (const Run& r : runs) train_run(c, r, data, log);
  std::vector<Result> rs;
  for (const Run& r : runs) rs.push_back(read_result(c, r));
  for (const Result& r : rs) {
    CHECK(r.complete);
    CHECK(std::isfinite(r.final_loss));
    CHECK(r.final_loss < r.init_loss);
    REQUIRE(!r.curve.empty());
    CHECK(r.curve.back().phase == "final");
    CHECK(r.curve.back().val_loss == r.final_loss);
  }
  // the two seeds differ (initialisation and batches), and the paired delta is their difference
  CHECK(rs[0].final_loss != rs[1].final_loss);
  const Stat g = group_stat(rs, "tiny", final_of);
  CHECK(g.n == 2);
  CHECK(std::abs(g.mean - 0.5 * (rs[0].final_loss + rs[1].final_loss)) < 1e-12);
  // the same CSV under another configuration (another lr) is not this run's: it is not complete
  Run other = runs[0];
  set_options(other.opt, {{"lr", "2e-2"}});
  CHECK_FALSE(read_result(c, other).complete);
  // a truncated CSV is not complete
  {
    const std::string p = csv_path(c, runs[1]);
    std::ifstream in(p);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    all.resize(all.rfind("final") - 5);
    std::ofstream(p, std::ios::trunc) << all;
  }
  CHECK_FALSE(read_result(c, runs[1]).complete);
  std::filesystem::remove_all(c.out);
}

TEST_CASE("A run whose loss becomes non-finite reads back complete as diverged with a non-finite final loss") {
  const lm::Dataset data = synthetic_corpus();
  Cli c;
  c.out = (std::filesystem::temp_directory_path() / "linattn_test_paper_walkthroughs_diverged").string();
  std::filesystem::remove_all(c.out);
  c.threads = 1;
  std::vector<Run> runs;
  lm::TrainOptions o = base_options(true, 16);
  set_options(o, {{"stack", "pure"}, {"mixer", "gdn"}, {"core", "recurrent"}, {"lr", "1e3"}, {"adam-lr", "1e3"}});
  o.quiet = true;
  add_seeded(runs, "huge-lr", {}, o, 1);
  std::ostringstream log;
  train_run(c, runs[0], data, log);
  const Result r = read_result(c, runs[0]);
  CHECK(log.str().find("diverged") != std::string::npos);
  CHECK(r.complete);
  CHECK_FALSE(std::isfinite(r.final_loss));
  REQUIRE(!r.curve.empty());
  CHECK(r.curve.back().phase == "diverged");
  std::filesystem::remove_all(c.out);
}

TEST_CASE("Seed-paired deltas pair the complete runs of two configurations seed by seed") {
  std::vector<Run> runs;
  lm::TrainOptions o = base_options(true, 10);
  add_seeded(runs, "a", {}, o, 3);
  add_seeded(runs, "b", {}, o, 3);
  std::vector<Result> rs;
  const double fa[3] = {2.0, 2.5, 3.0}, fb[3] = {1.9, 2.6, 2.7};
  for (size_t i = 0; i < runs.size(); ++i) {
    Result r;
    r.run = &runs[i];
    r.final_loss = i < 3 ? fa[i] : fb[i - 3];
    r.complete = true;
    rs.push_back(r);
  }
  const Stat d = paired_delta(rs, "a", "b", final_of);
  const Stat direct = stats_of({fb[0] - fa[0], fb[1] - fa[1], fb[2] - fa[2]});
  CHECK(d.n == 3);
  CHECK(d.mean == direct.mean);
  CHECK(d.sd == direct.sd);
  // a run that is not complete (--report-only) drops its pair and its group entry, nothing else
  rs[4].complete = false;  // b, seed 2
  const Stat d2 = paired_delta(rs, "a", "b", final_of);
  CHECK(d2.n == 2);
  CHECK(d2.mean == stats_of({fb[0] - fa[0], fb[2] - fa[2]}).mean);
  CHECK(group_stat(rs, "b", final_of).n == 2);
  CHECK(group_stat(rs, "a", final_of).n == 3);
}

TEST_CASE("A results file that cannot be written is an error saying why: a missing directory or a directory") {
  const std::string tmp = std::filesystem::temp_directory_path().string(), missing = tmp + "/linattn_no_such_dir";
  std::filesystem::remove_all(missing);
  CHECK(error_of([&] { CsvFile f(missing + "/t.csv", {"a"}); }) ==
        "CsvFile: argument 'path' expected a writable file but got '" + missing + "/t.csv' (directory '" + missing +
            "' does not exist)");
  CHECK(error_of([&] { CsvFile f(tmp, {"a"}); }).find("but got '" + tmp + "' (a directory)") != std::string::npos);
  Cli c;
  c.out = missing;
  CHECK(error_of([&] { emit(c, "t.md", "x"); }).find("(directory '" + missing + "' does not exist)") != std::string::npos);
}
