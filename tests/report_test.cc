#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "common/files.h"
#include "common/sha256.h"
#include "population/store.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using Json = nlohmann::json;
using test::RunEvo;

// Debian's chromium, which scripts/install-deps.sh installs.
const std::filesystem::path kChromium = "/usr/bin/chromium";

// What headless Chromium made of a page: the DOM after its scripts ran, and every console
// message (console.*, uncaught exceptions, and the Content-Security-Policy refusals that any
// request of the page's turns into) as Chromium logs them on stderr.
struct RenderedPage {
  std::string dom;
  std::vector<std::string> console;
};

// Chromium prints console messages to stderr with --enable-logging=stderr as
// "[pid:tid:time:INFO:CONSOLE:12] "message", source: file:///... (12)", whatever their level,
// so every such line counts: evo's page logs nothing when it works.
RenderedPage RenderInChromium(const std::filesystem::path& page) {
  INFO("Debian's chromium renders the report; scripts/install-deps.sh installs it");
  REQUIRE(std::filesystem::exists(kChromium));
  test::TempDir profile;
  const test::CommandResult run = test::RunProgram(
      "/usr/bin/timeout",
      {"120", kChromium.string(), "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
       "--disable-extensions", "--disable-background-networking",
       "--user-data-dir=" + (profile.path() / "profile").string(), "--enable-logging=stderr",
       "--v=0", "--dump-dom", "file://" + std::filesystem::absolute(page).string()},
      profile.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  RenderedPage rendered{run.out, {}};
  std::istringstream lines(run.err);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find(":CONSOLE") != std::string::npos) rendered.console.push_back(line);
  }
  return rendered;
}

std::string Unescape(std::string text) {
  for (const auto& [entity, c] :
       std::vector<std::pair<std::string, std::string>>{{"&lt;", "<"},
                                                        {"&gt;", ">"},
                                                        {"&quot;", "\""},
                                                        {"&#39;", "'"},
                                                        {"&nbsp;", "\xc2\xa0"},
                                                        {"&amp;", "&"}}) {
    for (size_t at = text.find(entity); at != std::string::npos; at = text.find(entity, at)) {
      text.replace(at, entity.size(), c);
      at += c.size();
    }
  }
  return text;
}

// The page script's account of what it drew, from the rendered DOM.
Json RenderStatus(const RenderedPage& page) {
  const std::regex status(R"re(<pre id="evo-render-status"[^>]*>([^<]*)</pre>)re");
  std::smatch match;
  INFO(page.dom.substr(0, 2000));
  REQUIRE(std::regex_search(page.dom, match, status));
  return Json::parse(Unescape(match[1].str()));
}

void RequireCleanRender(const RenderedPage& page, const Json& status) {
  for (const std::string& line : page.console) UNSCOPED_INFO("console: " << line);
  CHECK(page.console.empty());
  INFO(status.dump(1));
  REQUIRE(status["state"] == "drawn");
  REQUIRE(status["errors"].empty());
}

const Json& Chart(const Json& status, int64_t run, const std::string& key) {
  for (const Json& chart : status["charts"]) {
    if (chart["run"] == run && chart["chart"] == key) return chart;
  }
  FAIL("run " << run << " has no chart " << key);
  throw std::logic_error("unreachable");
}

const Json& Dataset(const Json& chart, const std::string& label) {
  for (const Json& dataset : chart["datasets"]) {
    if (dataset["label"] == label) return dataset;
  }
  FAIL("chart " << chart["id"] << " has no dataset " << label);
  throw std::logic_error("unreachable");
}

int64_t SumOf(const Json& chart, const char* field) {
  int64_t total = 0;
  for (const Json& dataset : chart["datasets"]) total += dataset[field].get<int64_t>();
  return total;
}

std::string FileHash(const std::filesystem::path& path) { return Sha256Hex(ReadFile(path)); }

// The HTML outside its <script> elements: markup, where a fetch would have to be written.
std::string Markup(const std::string& html) {
  std::string markup;
  size_t at = 0;
  while (true) {
    const size_t open = html.find("<script", at);
    markup += html.substr(at, open == std::string::npos ? std::string::npos : open - at);
    if (open == std::string::npos) return markup;
    at = html.find("</script>", open);
    REQUIRE(at != std::string::npos);
    at += 9;
  }
}

std::vector<std::string> ReplayRun(const std::filesystem::path& db, int budget, int seed) {
  return {"run",
          "--replay",
          test::H100Recording().string(),
          "--db",
          db.string(),
          "--budget",
          std::to_string(budget),
          "--seed",
          std::to_string(seed),
          "--new"};
}

// What the charts of one run must hold, counted from the store independently of the page.
void CheckRunCharts(const Json& status, PopulationStore& store, int64_t run_id) {
  const std::vector<CandidateRecord> candidates = store.Candidates(run_id);
  REQUIRE(!candidates.empty());
  int64_t timed = 0;
  int64_t evaluated = 0;
  int64_t compiled = 0;
  std::set<std::string> knobs;
  std::vector<const CandidateRecord*> finished;
  for (const CandidateRecord& c : candidates) {
    for (const auto& [name, value] : c.proposal.genome) knobs.insert(name);
    if (c.state != CandidateState::kFinished) continue;
    timed += c.outcome.timing() != nullptr ? 1 : 0;
    compiled += c.outcome.resources ? 1 : 0;
    if (c.outcome.reached_gates()) {
      ++evaluated;
      finished.push_back(&c);
    }
  }
  std::stable_sort(finished.begin(), finished.end(),
                   [](auto* a, auto* b) { return a->finished_at < b->finished_at; });
  // Best-so-far has a point from the first candidate with a score on.
  int64_t before_first_score = 0;
  while (before_first_score < evaluated && !finished[before_first_score]->score_us()) {
    ++before_first_score;
  }
  INFO("run " << run_id << ": " << candidates.size() << " candidates, " << evaluated
              << " evaluated, " << timed << " timed, " << compiled << " compiled");
  REQUIRE(timed > 0);
  for (const char* key : {"best-count", "best-time"}) {
    const Json& best = Dataset(Chart(status, run_id, key), "evo best so far");
    CHECK(best["values"] == evaluated);
    CHECK(best["points"] == evaluated - before_first_score);
  }
  CHECK(SumOf(Chart(status, run_id, "medians"), "points") == timed);
  const Json& statuses = Chart(status, run_id, "statuses");
  CHECK(SumOf(statuses, "sum") == static_cast<int64_t>(candidates.size()));
  for (const std::string& knob : knobs) {
    const Json& landscape = Chart(status, run_id, "knob-" + knob);
    CHECK(Dataset(landscape, "medians")["points"] == timed);
  }
  const Json& resources = Chart(status, run_id, "resources");
  CHECK(Dataset(resources, "registers per thread")["points"] == compiled);
  CHECK(Dataset(resources, "shared memory KiB (static + dynamic)")["points"] == compiled);
  int64_t charts = 0;
  for (const Json& chart : status["charts"]) charts += chart["run"] == run_id ? 1 : 0;
  CHECK(charts == 5 + static_cast<int64_t>(knobs.size()));
}

TEST_CASE("the report test's Chromium harness sees console errors, uncaught errors and requests",
          "[report]") {
  // The control for the tests below: a page under the report's policy that logs an error,
  // throws, and tries two requests must show all four on the harness's console.
  test::TempDir dir;
  const auto page = dir.path() / "control.html";
  test::WriteFile(page, R"html(<!DOCTYPE html><html><head>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'">
</head><body><img src="file:///nonexistent/evo.png"><img src="https://example.com/evo.png">
<pre id="evo-render-status">{"state": "drawn", "errors": [], "charts": []}</pre>
<script>console.error("control error"); null.property;</script></body></html>)html");
  const RenderedPage rendered = RenderInChromium(page);
  std::string all;
  for (const std::string& line : rendered.console) all += line + "\n";
  INFO(all);
  CHECK(all.find("control error") != std::string::npos);
  CHECK(all.find("Uncaught TypeError") != std::string::npos);
  CHECK(all.find("file:///nonexistent/evo.png") != std::string::npos);
  CHECK(all.find("https://example.com/evo.png") != std::string::npos);
  CHECK(RenderStatus(rendered)["state"] == "drawn");
}

TEST_CASE("evo report of a replayed run renders in Chromium with every candidate in its charts",
          "[report]") {
  test::TempDir dir;
  const auto db = dir.path() / "evo.db";
  const auto run = RunEvo(ReplayRun(db, 60, 1), dir.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const std::string db_hash = FileHash(db);

  const auto out = dir.path() / "report.html";
  const auto report = RunEvo({"report", "--db", db.string(), "--out", out.string()}, dir.path());
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  CHECK(report.out.find("1 run, 60 candidates; Chart.js 3.") != std::string::npos);
  CHECK(FileHash(db) == db_hash);

  const std::string html = ReadFile(out);
  // How the engine made each candidate has a name in the page: its first generation is the
  // default and random ones, later ones come from the neighbour scan, the knob marginals, the
  // cost model and random draws; none is "other", which the report keeps for operators it does
  // not know.
  CHECK(html.find("\"made\":\"default\"") != std::string::npos);
  CHECK(html.find("\"made\":\"neighbour scan\"") != std::string::npos);
  CHECK(html.find("\"made\":\"knob marginals\"") != std::string::npos);
  CHECK(html.find("\"made\":\"cost model\"") != std::string::npos);
  CHECK(html.find("\"made\":\"random\"") != std::string::npos);
  CHECK(html.find("\"made\":\"other\"") == std::string::npos);
  // The policy is the first thing in the page, so it governs everything: no request can leave
  // the page, and any attempt is a console message (the control test shows Chromium logs it).
  CHECK(html.find("<head>\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
                  "&#39;none&#39;; script-src &#39;sha256-") != std::string::npos);
  const std::string markup = Markup(html);
  CHECK(markup.find(" src=") == std::string::npos);
  CHECK(markup.find(" href=") == std::string::npos);
  CHECK(markup.find("<link") == std::string::npos);

  const RenderedPage rendered = RenderInChromium(out);
  const Json status = RenderStatus(rendered);
  RequireCleanRender(rendered, status);
  PopulationStore store(db, PopulationStore::Access::kReadOnly);
  CheckRunCharts(status, store, 1);
  // No peers without --peers, and the page says so.
  CHECK(Chart(status, 1, "best-count")["datasets"].size() == 1);
  CHECK(html.find("No peer times: the database keeps only evo's own candidates") !=
        std::string::npos);

  // The elite table: every member's genome, both medians and its ptxas figures; the task.
  const std::vector<CandidateRecord> elite = store.Elite(1);
  REQUIRE(elite.size() == 3);
  for (const CandidateRecord& c : elite) {
    std::string genome;
    for (const auto& [name, value] : c.proposal.genome) {
      genome += (genome.empty() ? "" : " ") + name + "=" + std::to_string(value);
    }
    CHECK(html.find(genome) != std::string::npos);
    char first[64];
    char second[64];
    std::snprintf(first, sizeof(first), ">%.2f (", c.outcome.timing()->median_us);
    std::snprintf(second, sizeof(second), ">%.2f (", c.confirmation->median_us);
    CHECK(html.find(first) != std::string::npos);
    CHECK(html.find(second) != std::string::npos);
  }
  const RunRecord stored = *store.FindRun(1);
  for (const std::string& fact : {stored.spec.device, stored.spec.template_hash,
                                  stored.spec.nvrtc_version, std::string("replay ")}) {
    CHECK(html.find(fact) != std::string::npos);
  }
  // A replay stores the driver the recording was made with.
  REQUIRE(!stored.spec.driver_version.empty());
  CHECK(html.find("CUDA " + stored.spec.driver_version) != std::string::npos);
}

TEST_CASE("evo report of several runs has a table of shapes with the peers and their ratios",
          "[report]") {
  test::TempDir dir;
  const auto db = dir.path() / "evo.db";
  REQUIRE(RunEvo(ReplayRun(db, 24, 2), dir.path()).exit_code == 0);
  REQUIRE(RunEvo(ReplayRun(db, 16, 3), dir.path()).exit_code == 0);
  // As scripts/bench-attention.py --json writes them; the A100 row must not match.
  const auto peers = dir.path() / "peers.json";
  test::WriteFile(peers, R"json([
  {"shape": "2,8,512,64", "causal": false, "device": "NVIDIA A100-SXM4-80GB",
   "problem": {"B": 2, "H": 8, "H_kv": 8, "S_q": 512, "S_kv": 512, "D": 64},
   "flash_us": 1.0, "cudnn_us": 1.0, "flex_us": 1.0},
  {"shape": "2,8,512,64", "causal": false, "device": "NVIDIA H100 80GB HBM3",
   "problem": {"B": 2, "H": 8, "H_kv": 8, "S_q": 512, "S_kv": 512, "D": 64},
   "flash_us": 12.25, "flash_na": null, "cudnn_us": 9.36, "flex_us": null,
   "flex_na": "FlexAttention refused the shape"}
])json");
  const auto out = dir.path() / "shapes" / "report.html";
  const auto report =
      RunEvo({"report", "--db", db.string(), "--out", out.string(), "--peers", peers.string()},
             dir.path());
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  const std::string html = ReadFile(out);
  CHECK(html.find("<h2>Shapes</h2>") != std::string::npos);
  CHECK(html.find("2 of 2 runs matched") != std::string::npos);

  PopulationStore store(db, PopulationStore::Access::kReadOnly);
  for (int64_t run : {1, 2}) {
    const double best = *store.Elite(run).front().score_us();
    char flash[64];
    char cudnn[64];
    std::snprintf(flash, sizeof(flash), ">%.2fx<", 12.25 / best);
    std::snprintf(cudnn, sizeof(cudnn), ">%.2fx (cuDNN)<", 9.36 / best);
    INFO("run " << run << " best " << best);
    CHECK(html.find(flash) != std::string::npos);
    CHECK(html.find(cudnn) != std::string::npos);
  }

  const RenderedPage rendered = RenderInChromium(out);
  const Json status = RenderStatus(rendered);
  RequireCleanRender(rendered, status);
  for (int64_t run : {1, 2}) {
    CheckRunCharts(status, store, run);
    for (const char* key : {"best-count", "best-time"}) {
      const Json& chart = Chart(status, run, key);
      CHECK(Dataset(chart, "torch flash (peer)")["points"] == 2);
      CHECK(Dataset(chart, "cuDNN (peer)")["points"] == 2);
      CHECK(chart["datasets"].size() == 3);  // FlexAttention refused the shape: no line
    }
  }
}

TEST_CASE("evo report escapes every stored string it puts into the page", "[report]") {
  test::TempDir dir;
  const auto db = dir.path() / "evo.db";
  const std::string hostile = "</script><script>document.title='owned'</script><!--";
  const std::string markup = "<img src=x onerror=\"document.title='owned'\">&amp;";
  {
    PopulationStore store(db, PopulationStore::Access::kReadWrite);
    RunSpec spec;
    spec.template_name = hostile;
    spec.template_hash = markup;
    spec.problem = {{"B", 1}, {"N'\"<", 2}};
    spec.arch = "sm_90";
    spec.device = markup;
    spec.evaluator = hostile;
    spec.nvrtc_version = "13.0";
    spec.evo_version = "0.1.0";
    spec.budget = 2;
    const int64_t run = store.CreateRun(spec);
    Proposal proposal;
    proposal.genome = {{"</script>", 1}, {"TILE", 2}};
    proposal.operator_name = hostile;
    const std::vector<int64_t> ids = store.AddPending(run, 0, {{"c1", proposal}});
    CandidateOutcome outcome;
    outcome.status = Status::kMeasured;
    KernelResources resources;
    resources.registers = 40;
    outcome.resources = resources;
    GpuVerdict gpu;
    gpu.correctness.passed = true;
    gpu.correctness.checks = 1;
    TimingFigures timing;
    timing.median_us = 10;
    gpu.timing = timing;
    outcome.gpu = gpu;
    store.Finish(ids[0], outcome, timing);
    store.SetRunState(run, RunState::kFinished, hostile);
  }
  const auto out = dir.path() / "report.html";
  const auto report = RunEvo({"report", "--db", db.string(), "--out", out.string()}, dir.path());
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  const std::string html = ReadFile(out);
  CHECK(html.find("document.title='owned'</script>") == std::string::npos);
  CHECK(html.find("<img src=x") == std::string::npos);

  const RenderedPage rendered = RenderInChromium(out);
  const Json status = RenderStatus(rendered);
  RequireCleanRender(rendered, status);
  CHECK(rendered.dom.find("<title>evo report: run 1: &lt;/script&gt;&lt;script&gt;") !=
        std::string::npos);
  CHECK(Dataset(Chart(status, 1, "medians"), "other")["points"] == 1);
  CHECK(Dataset(Chart(status, 1, "knob-</script>"), "medians")["points"] == 1);
}

TEST_CASE("evo report draws a run without candidates and one with candidates still pending",
          "[report]") {
  test::TempDir dir;
  const auto db = dir.path() / "evo.db";
  {
    PopulationStore store(db, PopulationStore::Access::kReadWrite);
    RunSpec spec;
    spec.template_name = "sdpa_fp16";
    spec.problem = {{"B", 1}};
    spec.arch = "sm_90";
    spec.device = "NVIDIA H100 80GB HBM3";
    spec.evaluator = "gpu";
    spec.budget = 10;
    store.CreateRun(spec);
    const int64_t pending = store.CreateRun(spec);
    Proposal proposal;
    proposal.genome = {{"BLOCK_M", 64}, {"BLOCK_N", 64}};
    proposal.operator_name = "default";
    store.AddPending(pending, 0, {{"p1", proposal}});
  }
  const auto out = dir.path() / "report.html";
  const auto report = RunEvo({"report", "--db", db.string(), "--out", out.string()}, dir.path());
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  const RenderedPage rendered = RenderInChromium(out);
  const Json status = RenderStatus(rendered);
  RequireCleanRender(rendered, status);
  CHECK(SumOf(Chart(status, 1, "statuses"), "sum") == 0);
  CHECK(SumOf(Chart(status, 1, "medians"), "points") == 0);
  CHECK(Dataset(Chart(status, 2, "statuses"), "pending")["sum"] == 1);
  CHECK(Dataset(Chart(status, 2, "best-count"), "evo best so far")["values"] == 0);
  CHECK(Dataset(Chart(status, 2, "knob-BLOCK_N"), "medians")["points"] == 0);
  CHECK(ReadFile(out).find("Empty: no candidate has been measured and confirmed.") !=
        std::string::npos);
}

TEST_CASE("evo report refuses bad input with clear errors and leaves the database as it was",
          "[report]") {
  test::TempDir dir;
  const auto db = dir.path() / "evo.db";
  REQUIRE(RunEvo(ReplayRun(db, 8, 4), dir.path()).exit_code == 0);
  const std::string db_hash = FileHash(db);
  const auto out = (dir.path() / "report.html").string();
  const auto expect_error = [&](const std::vector<std::string>& args, const std::string& message) {
    std::vector<std::string> command = {"report"};
    command.insert(command.end(), args.begin(), args.end());
    const auto result = RunEvo(command, dir.path());
    INFO(result.err);
    CHECK(result.exit_code == 2);
    CHECK(result.err.find(message) != std::string::npos);
    CHECK(FileHash(db) == db_hash);
  };
  expect_error({"--db", (dir.path() / "none.db").string(), "--out", out}, "there is no database");
  expect_error({"--db", db.string(), "--out", db.string()}, "is the database's own file");
  expect_error({"--db", db.string(), "--out", out, "--run", "7"}, "there is no run 7");
  expect_error({"--db", db.string(), "--out", out, "--chart-js", "/nonexistent/chart.js"},
               "Chart.js is not at /nonexistent/chart.js; install Debian's libjs-chart.js");
  const auto not_chart = dir.path() / "not-chart.js";
  test::WriteFile(not_chart, "console.log('hello');");
  expect_error({"--db", db.string(), "--out", out, "--chart-js", not_chart.string()},
               "is not Chart.js's UMD build");
  const auto peers = dir.path() / "peers.json";
  test::WriteFile(peers, R"([{"problem": {"B": "two"}}])");
  expect_error({"--db", db.string(), "--out", out, "--peers", peers.string()},
               "row 1: problem parameter B must be an integer");
  test::WriteFile(peers, R"([{"problem": {"B": 2}, "cudnn_us": -3}])");
  expect_error({"--db", db.string(), "--out", out, "--peers", peers.string()},
               "the time of cuDNN must be a positive number");
  test::WriteFile(peers, R"([{"problem": {"B": 2}, "cudnn_us": 1e400}])");
  expect_error({"--db", db.string(), "--out", out, "--peers", peers.string()},
               "peers file '" + peers.string() +
                   "' is not JSON evo can read: number overflow parsing '1e400'");
  // What the report reads is never what it writes: the peers' figures stay whole.
  test::WriteFile(peers, "[]");
  expect_error({"--db", db.string(), "--out", peers.string(), "--peers", peers.string()},
               "--out " + peers.string() + " is " + peers.string() +
                   ", which this command reads; name another file");
  CHECK(ReadFile(peers) == "[]");
  expect_error({"--db", db.string(), "--out", "", "--peers", peers.string()},
               "--out is empty: name the file to write");
  expect_error({"--db", db.string(), "--out", out, "--run", "0x1"},
               "must be a whole number in decimal digits, not '0x1'");
  CHECK(!std::filesystem::exists(out));

  // A run named twice is reported once; "01" is run 1.
  const auto twice = RunEvo(
      {"report", "--db", db.string(), "--out", out, "--run", "1", "--run", "01"}, dir.path());
  INFO(twice.err);
  CHECK(twice.exit_code == 0);
  CHECK(twice.out.find("wrote " + out + ": 1 run, 8 candidates") != std::string::npos);
  // The Chart.js it embeds (Debian's, by default) is not a file it may write either.
  const std::string chart = "/usr/share/javascript/chart.js/chart.min.js";
  const std::string chart_hash = FileHash(chart);
  expect_error({"--db", db.string(), "--out", chart},
               "which this command reads; name another file");
  CHECK(FileHash(chart) == chart_hash);
}

}  // namespace
}  // namespace evo
