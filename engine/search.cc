#include "engine/search.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <limits>
#include <set>

#include "common/error.h"
#include "engine/lane_scheduler.h"
#include "kernel_templates/configuration.h"

namespace evo {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ReachedGates(const std::vector<CandidateRecord>& candidates) {
  return std::count_if(candidates.begin(), candidates.end(), [](const CandidateRecord& c) {
    return c.state == CandidateState::kFinished && c.outcome.reached_gates();
  });
}

// What counts as better than `incumbent`: more than the noise of its scoring measurement.
double ImprovementThresholdUs(const CandidateRecord& incumbent) {
  const TimingFigures& t = *incumbent.scoring_timing();
  return std::max(0.01 * t.median_us, 0.5 * (t.p90_us - t.p10_us));
}

// Whether `candidate` beats `incumbent` by more than the noise of the incumbent's measurement.
bool Improves(const CandidateRecord& candidate, const CandidateRecord& incumbent) {
  const std::optional<double> score = candidate.score_us();
  return score && *score < *incumbent.score_us() - ImprovementThresholdUs(incumbent);
}

// The generation in progress, seen from its checkpoint: the position half-way through it, where
// the search asks whether the rest is still worth measuring. Everything here follows from the
// stored candidates, so a resumed run decides as the uninterrupted one did; and the checkpoint is
// a position, not a moment, so several GPUs decide as one does.
class GenerationCheckpoint {
 public:
  GenerationCheckpoint(const std::vector<CandidateRecord>& candidates, int generation) {
    for (const CandidateRecord& c : candidates) {
      if (c.generation < generation && c.score_us() &&
          (incumbent_ == nullptr || *c.score_us() < *incumbent_->score_us())) {
        incumbent_ = &c;
      }
    }
    size_ =
        static_cast<int>(std::count_if(candidates.begin(), candidates.end(),
                                       [&](const auto& c) { return c.generation == generation; }));
    for (const CandidateRecord& c : candidates) {
      if (c.generation == generation && c.state == CandidateState::kFinished) Add(c);
    }
  }

  // Candidates finish in their order: `finished` is the next one.
  void Add(const CandidateRecord& finished) {
    ++finished_;
    if (finished_ <= Position() && incumbent_ != nullptr && Improves(finished, *incumbent_)) {
      improved_ = true;
    }
  }

  // How many of the generation's candidates come before the checkpoint.
  int Position() const { return (size_ + 1) / 2; }
  int finished() const { return finished_; }

  // Whether the generation's unmeasured candidates are to be dropped and the next generation
  // proposed now: one of the candidates before the checkpoint beat the incumbent the generation
  // was proposed around, so the rest were chosen around a best that no longer is, and the new
  // best's one-knob neighbours (where the next better one likeliest is) would wait for them.
  // Not before half: a generation's first half is the incumbent's neighbours and the knobs'
  // marginal picks, worth measuring whatever the new best; dropping at every improvement turned
  // the search into a hill climb that stalled (BENCHMARKS.md, 2026-11-24). Only at half, not at
  // every improvement after it: a lane must not start a candidate that a decision may drop.
  bool Overtaken() const { return improved_ && finished_ >= Position() && finished_ < size_; }

 private:
  const CandidateRecord* incumbent_ = nullptr;  // the best of the generations before
  int size_ = 0;
  int finished_ = 0;
  bool improved_ = false;  // by a candidate before the checkpoint
};

}  // namespace

std::string_view ToString(StopReason reason) {
  switch (reason) {
    case StopReason::kBudget:
      return "budget reached";
    case StopReason::kPatience:
      return "patience out";
    case StopReason::kTimeLimit:
      return "time limit";
    case StopReason::kInterrupted:
      return "interrupted";
    case StopReason::kExhausted:
      return "search space exhausted";
  }
  return "?";
}

namespace {

// Whether every valid configuration one knob away from `center` is in `tried`.
bool NeighbourhoodScanned(const SearchSpace& space, const Genome& center,
                          const std::set<Genome>& tried) {
  for (const KnobSpec& knob : space.manifest().knobs) {
    const auto current = center.find(knob.name);
    if (current == center.end()) return true;  // not a genome of this space
    for (int64_t value : knob.values) {
      if (value == current->second) continue;
      Genome genome = center;
      genome[knob.name] = value;
      if (tried.count(genome) == 0 && space.IsValid(genome)) return false;
    }
  }
  return true;
}

}  // namespace

int GenerationsWithoutImprovement(const std::vector<CandidateRecord>& candidates,
                                  const SearchSpace* space) {
  int last_generation = -1;
  for (const CandidateRecord& c : candidates)
    last_generation = std::max(last_generation, c.generation);
  const CandidateRecord* best = nullptr;
  std::set<Genome> tried;
  int stale = 0;
  for (int generation = 0; generation <= last_generation; ++generation) {
    const CandidateRecord* generation_best = nullptr;
    bool complete = true;
    for (const CandidateRecord& c : candidates) {
      if (c.generation != generation) continue;
      if (c.state != CandidateState::kFinished) complete = false;
      tried.insert(c.proposal.genome);
      const std::optional<double> score = c.score_us();
      if (score && (generation_best == nullptr || *score < *generation_best->score_us())) {
        generation_best = &c;
      }
    }
    if (!complete) break;
    if (generation_best != nullptr && (best == nullptr || Improves(*generation_best, *best))) {
      best = generation_best;
      stale = 0;
    } else if (space == nullptr || best == nullptr ||
               NeighbourhoodScanned(*space, best->proposal.genome, tried)) {
      ++stale;
    }
  }
  return stale;
}

Search::Search(PopulationStore& store, int64_t run_id, const SearchSpace& space,
               CandidateEvaluator& evaluator, SearchOptions options)
    : store_(store),
      run_id_(run_id),
      space_(space),
      evaluator_(evaluator),
      options_(std::move(options)) {}

void CheckStoredKnobs(const std::vector<CandidateRecord>& candidates, const Manifest& manifest,
                      int64_t run_id) {
  std::set<std::string> knobs;
  for (const KnobSpec& knob : manifest.knobs) knobs.insert(knob.name);
  for (const CandidateRecord& record : candidates) {
    std::set<std::string> stored;
    for (const auto& [knob, value] : record.proposal.genome) stored.insert(knob);
    if (stored == knobs) continue;
    std::string added;
    std::string gone;
    for (const std::string& knob : knobs) {
      if (stored.count(knob) == 0) added += (added.empty() ? "" : ", ") + knob;
    }
    for (const std::string& knob : stored) {
      if (knobs.count(knob) == 0) gone += (gone.empty() ? "" : ", ") + knob;
    }
    std::string change;
    if (!added.empty())
      change = "has " + added + ", which candidate " + std::to_string(record.id) + " does not set";
    if (!gone.empty()) {
      change += std::string(change.empty() ? "" : ", and ") + "no longer has " + gone +
                ", which candidate " + std::to_string(record.id) + " sets";
    }
    throw Error("run " + std::to_string(run_id) + " cannot go on: template " + manifest.name + " " +
                change +
                " (the template changed since the run was stored); start another "
                "run with --new");
  }
}

SearchSummary Search::Run(const std::function<void(const SearchProgress&)>& on_progress,
                          const std::atomic<bool>& stop) {
  const std::optional<RunRecord> run = store_.FindRun(run_id_);
  if (!run) throw Error("there is no run " + std::to_string(run_id_));
  const RunSpec& spec = run->spec;
  CheckStoredKnobs(store_.Candidates(run_id_), space_.manifest(), run_id_);
  Evolution evolution(space_, spec.seed, options_.evolution);
  LaneScheduler lanes(evaluator_);
  store_.SetRunState(run_id_, RunState::kRunning, "");

  const Clock::time_point start = Clock::now();
  SearchSummary summary;
  const auto finish = [&](StopReason reason) {
    summary.reason = reason;
    summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    summary.per_minute =
        summary.seconds > 0 ? static_cast<double>(summary.evaluated_now) * 60 / summary.seconds : 0;
    const bool resumable = reason == StopReason::kTimeLimit || reason == StopReason::kInterrupted;
    store_.SetRunState(run_id_, resumable ? RunState::kPaused : RunState::kFinished,
                       ToString(reason));
    // After the state is stored: whatever happens while re-timing, the run's outcome stands.
    if (reason != StopReason::kInterrupted) {
      summary.retime = RetimeElite(store_, run_id_, evaluator_, options_.retime,
                                   [&stop] { return stop.load(); });
    }
    return summary;
  };

  // A generation's size once `spent` candidates of the budget are taken: the last one is cut to
  // what is left.
  const auto generation_count = [&spec](int64_t spent) {
    return static_cast<int>(std::min<int64_t>(spec.generation_size, spec.budget - spent));
  };
  for (;;) {
    std::vector<CandidateRecord> candidates = store_.Candidates(run_id_);
    const int64_t evaluated = ReachedGates(candidates);
    std::vector<CandidateRecord> pending;
    int generation = -1;
    for (const CandidateRecord& c : candidates) {
      generation = std::max(generation, c.generation);
      if (c.state == CandidateState::kPending) pending.push_back(c);
    }
    GenerationCheckpoint checkpoint(candidates, generation);
    if (!pending.empty() && options_.replan && checkpoint.Overtaken()) {
      store_.DropPending(run_id_);
      continue;  // propose the next generation around the new best
    }
    if (pending.empty()) {
      if (evaluated >= spec.budget) return finish(StopReason::kBudget);
      if (spec.patience > 0 &&
          GenerationsWithoutImprovement(candidates, &space_) >= spec.patience) {
        return finish(StopReason::kPatience);
      }
      ++generation;
      const std::vector<Proposal> proposals = evolution.Propose(
          generation, generation_count(evaluated), candidates, store_.EliteByScore(run_id_));
      if (proposals.empty()) return finish(StopReason::kExhausted);
      std::vector<std::pair<std::string, Proposal>> entries;
      for (const Proposal& proposal : proposals) {
        entries.emplace_back(ConfigurationId(spec.template_name, spec.template_hash,
                                             proposal.genome, spec.problem, spec.arch),
                             proposal);
      }
      store_.AddPending(run_id_, generation, entries);
      continue;  // read them back as stored
    }

    std::vector<Genome> upcoming;
    for (const CandidateRecord& c : pending) upcoming.push_back(c.proposal.genome);
    evaluator_.Prefetch(upcoming);
    const int next_count = generation_count(evaluated + static_cast<int64_t>(pending.size()));
    // Planned beside the measurements: a guess must not hold back the GPU's first candidate,
    // which its compile may have ready already. Evolution is used by this thread alone until
    // the guesses are joined, before the next generation is proposed.
    std::future<void> guesses;
    if (options_.compile_ahead && next_count > 0) {
      guesses = std::async(std::launch::async, [&, elite = store_.EliteByScore(run_id_)] {
        evaluator_.Speculate(evolution.Speculate(generation + 1, next_count, candidates, elite));
      });
    }
    int64_t done = evaluated;
    std::optional<StopReason> stopped;
    LaneHooks hooks;
    hooks.should_stop = [&] {
      if (stop.load()) {
        stopped = StopReason::kInterrupted;
      } else if (options_.time_limit && Clock::now() - start >= *options_.time_limit) {
        stopped = StopReason::kTimeLimit;
      }
      return stopped.has_value();
    };
    // The lanes measure concurrently, but these run in the candidates' order, each seeing the
    // elite that the candidates before it made: as on one GPU.
    hooks.needs_confirmation = [&](size_t, CandidateOutcome& outcome) {
      if (outcome.status != Status::kMeasured || outcome.timing() == nullptr) return false;
      const std::vector<CandidateRecord> elite = store_.EliteByScore(run_id_);
      const double median = outcome.timing()->median_us;
      if (!elite.empty() && median > options_.slow_factor * *elite.front().score_us()) {
        outcome.status = Status::kSlow;
        outcome.reason = "median " + std::to_string(median) + " us is over " +
                         std::to_string(options_.slow_factor) + "x the best, " +
                         std::to_string(*elite.front().score_us()) + " us";
        return false;
      }
      if (static_cast<int>(elite.size()) < spec.elite_size || median < *elite.back().score_us()) {
        return true;
      }
      // Fewer SM cycles than a member's: a kernel the clock may have timed behind the elite,
      // confirmed so that the side-by-side re-timing can consider it (SelectContenders).
      const std::optional<double> cycles = outcome.timing()->median_cycles();
      return cycles && std::any_of(elite.begin(), elite.end(), [&](const CandidateRecord& member) {
               const std::optional<double> theirs = member.score_cycles();
               return theirs && *cycles < *theirs;
             });
    };
    size_t offset = 0;  // of the segment the lanes take, in `pending`
    hooks.finish = [&](size_t segment_index, CandidateOutcome outcome,
                       std::optional<GpuVerdict> again, int lane) {
      const size_t index = offset + segment_index;
      const CandidateRecord& candidate = pending[index];
      std::optional<TimingFigures> confirmation;
      if (again) {
        if (again->status != Status::kMeasured || !again->timing) {
          outcome.status =
              again->status == Status::kMeasured ? Status::kRuntimeError : again->status;
          outcome.reason = "the confirming measurement: " +
                           (again->error.empty() ? again->correctness.failure : again->error);
        }
        if (again->timing) confirmation = again->timing;
      }
      std::optional<GpuIdentity> measured_on;
      if (outcome.gpu && lane >= 0) measured_on = evaluator_.lanes()[static_cast<size_t>(lane)];
      store_.Finish(candidate.id, outcome, confirmation, measured_on);
      ++summary.evaluated_now;
      if (outcome.reached_gates()) ++done;
      const std::optional<CandidateRecord> stored = store_.FindCandidate(candidate.id);
      checkpoint.Add(*stored);

      if (on_progress) {
        SearchProgress progress;
        progress.run_id = run_id_;
        progress.generation = candidate.generation;
        progress.evaluated = done;
        progress.budget = spec.budget;
        const std::vector<CandidateRecord> elite = store_.Elite(run_id_);
        if (!elite.empty()) progress.best = elite.front();
        const double minutes = std::chrono::duration<double>(Clock::now() - start).count() / 60;
        progress.per_minute =
            minutes > 0 ? static_cast<double>(summary.evaluated_now) / minutes : 0;
        if (progress.per_minute > 0) {
          progress.eta_seconds = static_cast<double>(std::max<int64_t>(0, spec.budget - done)) *
                                 60 / progress.per_minute;
        }
        progress.finished = stored ? &*stored : nullptr;
        on_progress(progress);
      }
    };
    // The lanes take the generation up to its checkpoint, then the rest unless the checkpoint
    // drops it (at the top of the loop, as on a resume): a lane never starts a candidate that
    // the decision may drop, so several GPUs measure what one would, and nothing measured is
    // thrown away.
    while (offset < pending.size()) {
      const int before_checkpoint = checkpoint.Position() - checkpoint.finished();
      const size_t end =
          options_.replan && before_checkpoint > 0
              ? offset + std::min(pending.size() - offset, static_cast<size_t>(before_checkpoint))
              : pending.size();
      lanes.Run(std::vector<Genome>(upcoming.begin() + static_cast<std::ptrdiff_t>(offset),
                                    upcoming.begin() + static_cast<std::ptrdiff_t>(end)),
                hooks);
      if (stopped) break;
      offset = end;
      if (options_.replan && checkpoint.Overtaken()) break;
    }
    if (guesses.valid()) guesses.get();
    if (stopped) return finish(*stopped);
  }
}

}  // namespace evo
