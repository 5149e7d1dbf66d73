#include "engine/lane_scheduler.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "common/error.h"

namespace evo {
namespace {

// Lanes whose measurements a test scripts: genome {"I": i} is candidate i.
class ScriptedLanes final : public CandidateEvaluator {
 public:
  using Script = std::function<CandidateOutcome(int lane, int64_t index)>;

  ScriptedLanes(int lanes, Script script) : script_(std::move(script)) {
    for (int lane = 0; lane < lanes; ++lane) lanes_.push_back({lane, "Fake GPU", ""});
  }

  const EvaluatorIdentity& identity() const override { return identity_; }
  const std::vector<GpuIdentity>& lanes() const override { return lanes_; }
  void Prefetch(const std::vector<Genome>&) override {}
  void Speculate(const std::vector<Genome>&) override {}
  bool ReadyToMeasure(const Genome&) const override { return true; }
  CandidateOutcome Evaluate(int lane, const Genome& genome) override {
    {
      std::lock_guard lock(mutex_);
      evaluated_.emplace_back(lane, genome.at("I"));
    }
    const int now = ++running_;
    int seen = widest_.load();
    while (now > seen && !widest_.compare_exchange_weak(seen, now)) {
    }
    struct Leave {
      std::atomic<int>& running;
      ~Leave() { --running; }
    } leave{running_};
    return script_(lane, genome.at("I"));
  }
  GpuVerdict Remeasure(int lane, const Genome& genome) override {
    std::lock_guard lock(mutex_);
    remeasured_.emplace_back(lane, genome.at("I"));
    return Measured(1.0).gpu.value();
  }

  static CandidateOutcome Measured(double median_us) {
    CandidateOutcome outcome;
    outcome.status = Status::kMeasured;
    GpuVerdict verdict;
    verdict.status = Status::kMeasured;
    TimingFigures timing;
    timing.median_us = median_us;
    verdict.timing = timing;
    outcome.gpu = verdict;
    return outcome;
  }

  std::vector<std::pair<int, int64_t>> evaluated() const {
    std::lock_guard lock(mutex_);
    return evaluated_;
  }
  std::vector<std::pair<int, int64_t>> remeasured() const {
    std::lock_guard lock(mutex_);
    return remeasured_;
  }
  int widest() const { return widest_.load(); }

 private:
  Script script_;
  EvaluatorIdentity identity_;
  std::vector<GpuIdentity> lanes_;
  mutable std::mutex mutex_;
  std::vector<std::pair<int, int64_t>> evaluated_;
  std::vector<std::pair<int, int64_t>> remeasured_;
  std::atomic<int> running_{0};
  std::atomic<int> widest_{0};
};

std::vector<Genome> Genomes(int64_t count) {
  std::vector<Genome> genomes;
  for (int64_t i = 0; i < count; ++i) genomes.push_back({{"I", i}});
  return genomes;
}

// What the hooks saw, in the order they saw it.
struct Journal {
  std::vector<std::string> events;  // "decide 3", "finish 3"
  std::map<size_t, CandidateOutcome> finished;
  std::map<size_t, int> lanes;
  std::map<size_t, bool> confirmed;

  LaneHooks Hooks(std::function<bool(size_t)> confirm = nullptr,
                  std::function<bool()> should_stop = nullptr) {
    LaneHooks hooks;
    hooks.should_stop = should_stop ? should_stop : [] { return false; };
    hooks.needs_confirmation = [this, confirm](size_t index, CandidateOutcome&) {
      events.push_back("decide " + std::to_string(index));
      return confirm && confirm(index);
    };
    hooks.finish = [this](size_t index, CandidateOutcome outcome,
                          std::optional<GpuVerdict> confirmation, int lane) {
      events.push_back("finish " + std::to_string(index));
      finished[index] = std::move(outcome);
      lanes[index] = lane;
      confirmed[index] = confirmation.has_value();
    };
    return hooks;
  }

  std::vector<size_t> FinishOrder() const {
    std::vector<size_t> order;
    for (const std::string& event : events) {
      if (event.rfind("finish ", 0) == 0) order.push_back(std::stoul(event.substr(7)));
    }
    return order;
  }
};

std::vector<size_t> Iota(size_t count) {
  std::vector<size_t> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = i;
  return values;
}

TEST_CASE("lanes measure at once and candidates finish in their order, confirmed where measured",
          "[lanes]") {
  // The early candidates take longest, so the later ones are measured first.
  ScriptedLanes evaluator(3, [](int, int64_t index) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * (12 - index)));
    return ScriptedLanes::Measured(static_cast<double>(index + 1));
  });
  LaneScheduler scheduler(evaluator);
  Journal journal;
  scheduler.Run(Genomes(12), journal.Hooks([](size_t index) { return index % 2 == 0; }));

  CHECK(journal.FinishOrder() == Iota(12));
  // Each candidate is decided right after the one before it finished, then finished itself.
  for (size_t i = 0; i < 12; ++i) {
    CHECK(journal.events[2 * i] == "decide " + std::to_string(i));
    CHECK(journal.events[2 * i + 1] == "finish " + std::to_string(i));
  }
  CHECK(evaluator.widest() > 1);
  CHECK(evaluator.evaluated().size() == 12);
  std::set<int> lanes_used;
  for (const auto& [lane, index] : evaluator.evaluated()) {
    lanes_used.insert(lane);
    CHECK(journal.lanes.at(static_cast<size_t>(index)) == lane);
  }
  CHECK(lanes_used.size() == 3);
  const auto remeasured = evaluator.remeasured();
  CHECK(remeasured.size() == 6);
  for (const auto& [lane, index] : remeasured) {
    CHECK(index % 2 == 0);
    CHECK(journal.lanes.at(static_cast<size_t>(index)) == lane);  // the GPU that measured it
    CHECK(journal.confirmed.at(static_cast<size_t>(index)));
  }
  CHECK(scheduler.retired().empty());
}

TEST_CASE("a lost GPU's candidates are measured again on the others", "[lanes]") {
  ScriptedLanes evaluator(3, [](int lane, int64_t index) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    if (lane == 1) throw LaneError("GPU 1: its worker cannot be replaced");
    return ScriptedLanes::Measured(static_cast<double>(index + 1));
  });
  LaneScheduler scheduler(evaluator);
  Journal journal;
  scheduler.Run(Genomes(10), journal.Hooks());

  CHECK(journal.FinishOrder() == Iota(10));
  REQUIRE(scheduler.retired().size() == 1);
  CHECK(scheduler.retired().at(1) == "GPU 1: its worker cannot be replaced");
  // The candidate GPU 1 was lost on went to another GPU, and finished measured.
  int64_t lost = -1;
  int seen_on_1 = 0;
  for (const auto& [lane, index] : evaluator.evaluated()) {
    if (lane == 1 && ++seen_on_1 == 1) lost = index;
  }
  REQUIRE(lost >= 0);
  CHECK(journal.lanes.at(static_cast<size_t>(lost)) != 1);
  for (const auto& [index, outcome] : journal.finished) CHECK(outcome.status == Status::kMeasured);
  // GPU 1 took nothing after it was lost.
  CHECK(seen_on_1 == 1);
}

TEST_CASE("a candidate that loses two GPUs is a runtime error, and the third GPU goes on",
          "[lanes]") {
  ScriptedLanes evaluator(3, [](int lane, int64_t index) {
    if (index == 3) throw LaneError("GPU " + std::to_string(lane) + " fell off the bus");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return ScriptedLanes::Measured(static_cast<double>(index + 1));
  });
  LaneScheduler scheduler(evaluator);
  Journal journal;
  scheduler.Run(Genomes(10), journal.Hooks());

  CHECK(journal.FinishOrder() == Iota(10));
  CHECK(scheduler.retired().size() == 2);
  const CandidateOutcome& poison = journal.finished.at(3);
  CHECK(poison.status == Status::kRuntimeError);
  CHECK_THAT(poison.reason, Catch::Contains("lost the GPUs that measured it"));
  CHECK_THAT(poison.reason, Catch::Contains("fell off the bus"));
  int poison_tries = 0;
  for (const auto& [lane, index] : evaluator.evaluated()) poison_tries += index == 3 ? 1 : 0;
  CHECK(poison_tries == 2);
  for (size_t i = 0; i < 10; ++i) {
    if (i != 3) CHECK(journal.finished.at(i).status == Status::kMeasured);
  }
}

TEST_CASE("a batch whose GPUs are all lost throws, saying why", "[lanes]") {
  ScriptedLanes two(2, [](int lane, int64_t) -> CandidateOutcome {
    throw LaneError("GPU " + std::to_string(lane) + ": no worker");
  });
  LaneScheduler scheduler(two);
  Journal journal;
  CHECK_THROWS_WITH(scheduler.Run(Genomes(5), journal.Hooks()),
                    Catch::Contains("every GPU of the run was lost"));
  // What finished can only be a candidate that lost both GPUs (where both tried it).
  CHECK(journal.FinishOrder().size() <= 1);
  for (const auto& [index, outcome] : journal.finished) {
    CHECK(outcome.status == Status::kRuntimeError);
    CHECK_THAT(outcome.reason, Catch::Contains("lost the GPUs"));
  }
  CHECK_THROWS_WITH(scheduler.Run(Genomes(5), journal.Hooks()), Catch::Contains("no GPU is left"));

  ScriptedLanes one(1, [](int, int64_t) -> CandidateOutcome {
    throw LaneError("GPU 0: worker failed its health check 3 times");
  });
  LaneScheduler single(one);
  CHECK_THROWS_WITH(single.Run(Genomes(5), journal.Hooks()),
                    Catch::Equals("GPU 0: worker failed its health check 3 times"));
}

TEST_CASE("a broken environment stops every lane and is rethrown; no GPU is blamed", "[lanes]") {
  ScriptedLanes evaluator(3, [](int, int64_t index) {
    if (index == 5) throw Error("NVRTC is broken");
    return ScriptedLanes::Measured(1.0);
  });
  LaneScheduler scheduler(evaluator);
  Journal journal;
  CHECK_THROWS_WITH(scheduler.Run(Genomes(20), journal.Hooks()), Catch::Equals("NVRTC is broken"));
  CHECK(scheduler.retired().empty());
  const std::vector<size_t> order = journal.FinishOrder();
  CHECK(order == Iota(order.size()));
  CHECK(order.size() < 20);
}

TEST_CASE("once told to stop, lanes take nothing more and what finished is a prefix", "[lanes]") {
  ScriptedLanes evaluator(3, [](int, int64_t index) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2 + (index % 3)));
    return ScriptedLanes::Measured(static_cast<double>(index + 1));
  });
  LaneScheduler scheduler(evaluator);
  Journal journal;
  scheduler.Run(Genomes(40), journal.Hooks([](size_t index) { return index % 4 == 0; },
                                           [&journal] { return journal.finished.size() >= 6; }));
  const std::vector<size_t> order = journal.FinishOrder();
  CHECK(order == Iota(order.size()));
  CHECK(order.size() >= 6);
  CHECK(order.size() < 40);
  // At most the candidates on the GPUs when it stopped were measured beyond those finished.
  CHECK(evaluator.evaluated().size() <= order.size() + 3);
}

}  // namespace
}  // namespace evo
