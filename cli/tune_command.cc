#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/search_commands.h"
#include "cli/search_output.h"
#include "cli/task_setup.h"
#include "cli/tune_plan.h"
#include "common/error.h"
#include "engine/search.h"
#include "population/run_lock.h"
#include "population/store.h"

namespace evo::cli {
namespace {

struct TuneOptions {
  std::vector<std::string> templates;
  std::vector<std::string> shapes;
  std::string shapes_file;
  std::vector<std::string> grids;
  bool causal = false;
  std::vector<std::string> problem_settings;
  EvaluatorOptions evaluator;
  std::vector<std::string> replays;
  std::string db = "runs/tune.db";
  SearchSettings search;
  bool force = false;
  bool no_seed_elites = false;
  bool list = false;
};

// The recording among `replays` of this task (its template and problem), or empty.
std::string RecordingOf(const std::vector<std::pair<std::string, Recording>>& recordings,
                        const TuneTask& task) {
  const Manifest& manifest = task.kernel_template->manifest;
  std::string found;
  for (const auto& [path, recording] : recordings) {
    if (recording.header.template_name == manifest.name &&
        CompleteProblem(manifest, recording.header.problem) == task.problem) {
      // Two landscapes of one task: which one the run replays must not be the order given.
      if (!found.empty()) {
        throw Error("--replay " + found + " and --replay " + path + " both measured " + task.label +
                    "; give one recording per task");
      }
      found = path;
    }
  }
  return found;
}

// What the tune does with one task's run.
struct TaskRun {
  std::optional<RunRecord> run;  // the run to continue, or none: a new one
  bool done = false;             // finished, and the budget does not extend it
};

TaskRun FindTaskRun(PopulationStore& store, const TuneTask& task, int64_t budget,
                    std::optional<int> patience = std::nullopt) {
  TaskRun found;
  for (const RunRecord& run : store.Runs()) {
    // A run of `evo run --fix` searched part of the space: not the task's whole search.
    if (run.spec.template_name == task.kernel_template->manifest.name &&
        run.spec.problem == task.problem && run.spec.fixed.empty()) {
      found.run = run;  // the latest of this task
    }
  }
  if (found.run) {
    found.done = found.run->state == RunState::kFinished && budget <= found.run->spec.budget &&
                 !ReopenedByPatience(*found.run, patience);
  }
  return found;
}

std::string SummaryLine(size_t index, size_t count, const TuneTask& task, const RunRecord& run,
                        PopulationStore& store, const std::string& note) {
  const std::vector<CandidateRecord> elite = store.Elite(run.id);
  std::string best = "-";
  if (!elite.empty()) {
    const CandidateRecord& first = elite.front();
    best = first.side_by_side
               ? fmt::format("{:.2f} us side by side (#{}, score {:.2f} us)",
                             first.side_by_side->median_us, first.id, *first.score_us())
               : fmt::format("{:.2f} us (#{})", *first.score_us(), first.id);
  }
  return fmt::format("[{}/{}] {:<40} run {:>3}  {:<8} {:>5}/{:<5} best {}{}\n", index + 1, count,
                     task.label, run.id, ToString(run.state), run.finished_candidates,
                     run.spec.budget, best, note);
}

std::function<int()> TuneCommand(const GlobalOptions& global, CLI::App& app,
                                 std::shared_ptr<TuneOptions> options) {
  return [&global, &app, options] {
    const TemplateLibrary library = LoadLibrary(global);
    std::vector<TuneShape> shapes;
    for (const std::string& text : options->shapes) shapes.push_back(ParseTuneShape(text));
    if (!options->shapes_file.empty()) {
      for (TuneShape& shape : ReadShapesFile(options->shapes_file)) shapes.push_back(shape);
    }
    for (const std::string& grid : options->grids) {
      for (TuneShape& shape : ExpandGrid(grid)) shapes.push_back(shape);
    }
    if (shapes.empty()) throw Error("evo tune needs shapes: --shape, --shapes FILE or --grid");
    if (options->templates.empty()) options->templates.push_back("sdpa_fp16");
    const TunePlan plan =
        PlanTune(library, options->templates, shapes, options->causal, options->problem_settings);
    for (const std::string& skipped : plan.skipped) std::cerr << "evo: skipped " << skipped << "\n";
    if (plan.tasks.empty()) throw Error("no template takes any of the shapes");
    if (options->list) {
      for (size_t i = 0; i < plan.tasks.size(); ++i) {
        std::cout << fmt::format("[{}/{}] {}\n", i + 1, plan.tasks.size(), plan.tasks[i].label);
      }
      return kExitOk;
    }

    // Every task's evaluator is known to exist before the database is touched.
    std::vector<std::string> task_replays(plan.tasks.size());
    if (!options->replays.empty()) {
      std::vector<std::pair<std::string, Recording>> recordings;
      for (const std::string& path : options->replays) {
        recordings.emplace_back(path, ReadRecording(path, true));
      }
      std::string missing;
      for (size_t i = 0; i < plan.tasks.size(); ++i) {
        task_replays[i] = RecordingOf(recordings, plan.tasks[i]);
        if (task_replays[i].empty()) missing += "\n  " + plan.tasks[i].label;
      }
      if (!missing.empty()) throw Error("no --replay recording measured" + missing);
    }
    // Without a GPU, or with a bad --gpus, say so before the database is touched.
    CheckGpus(options->evaluator, !options->replays.empty());

    // The lock first: it outlives the store's connection (run_lock.h says why).
    const RunLock lock(options->db);
    PopulationStore store(options->db, PopulationStore::Access::kReadWrite);
    const bool budget_given = app.count("--budget") > 0;

    // The set's budget: each task's own (a finished run keeps its, unless --budget raises it).
    std::vector<TaskRun> task_runs;
    int64_t set_budget = 0;
    for (const TuneTask& task : plan.tasks) {
      task_runs.push_back(FindTaskRun(store, task, budget_given ? options->search.budget : 0,
                                      app.count("--patience") > 0
                                          ? std::optional<int>(options->search.patience)
                                          : std::nullopt));
      const TaskRun& found = task_runs.back();
      set_budget += found.run ? std::max(found.run->spec.budget,
                                         budget_given ? options->search.budget : int64_t{0})
                              : options->search.budget;
    }
    std::cerr << fmt::format(
        "evo: tuning {} runs ({} shapes x {} templates) into {}, {} "
        "candidates in all\n",
        plan.tasks.size(), shapes.size(), options->templates.size(), options->db, set_budget);

    const SearchOptions search_options = StoppingOptions(options->search);
    const bool live = isatty(STDERR_FILENO) != 0;
    const StopOnSignals signals;
    int64_t set_done = 0;  // candidates of the tasks before the current one
    std::string summary;
    bool interrupted = false;
    for (size_t i = 0; i < plan.tasks.size() && !interrupted; ++i) {
      const TuneTask& task = plan.tasks[i];
      const Manifest& manifest = task.kernel_template->manifest;
      std::optional<RunRecord> run = task_runs[i].run;
      if (task_runs[i].done) {
        set_done += run->finished_candidates;
        summary += SummaryLine(i, plan.tasks.size(), task, *run, store, " (tuned before)");
        continue;
      }
      EvaluatorOptions evaluator = options->evaluator;
      evaluator.replay = task_replays[i];
      const std::unique_ptr<EvaluatorSetup> setup =
          MakeEvaluator(global, evaluator, *task.kernel_template, task.problem);
      const EvaluatorIdentity& identity = setup->evaluator->identity();
      if (i == 0 && !identity.notice.empty()) std::cerr << "evo: " << identity.notice << "\n";

      Manifest searched = setup->replay ? setup->replay->RecordedSpace(manifest) : manifest;
      std::string note;
      if (run) {
        CheckResumable(*run, identity, options->force);
        CheckStoredKnobs(store.Candidates(run->id), manifest, run->id);
        // A resumed run proposes what the uninterrupted one would: the settings it was stored
        // with stay, and the set's new ones apply to its new runs only. Said, not silent.
        std::string kept;
        const auto keep = [&](const char* option, uint64_t given, uint64_t stored) {
          if (app.count(option) == 0 || given == stored) return;
          kept += fmt::format("{}{} {}", kept.empty() ? "" : ", ", option, stored);
        };
        keep("--seed", options->search.seed, run->spec.seed);
        keep("--elite", static_cast<uint64_t>(options->search.elite),
             static_cast<uint64_t>(run->spec.elite_size));
        keep("--generation-size", static_cast<uint64_t>(options->search.generation_size),
             static_cast<uint64_t>(run->spec.generation_size));
        if (!kept.empty()) {
          std::cerr << "evo: run " << run->id << " (" << task.label << ") keeps " << kept
                    << ", as it was stored; the options given apply to new runs\n";
        }
        // Its patience, unlike the settings above, decides only when it stops: a new one
        // applies, as in `evo run`. A budget that a spent patience would not let it use is not
        // stored.
        const int patience =
            app.count("--patience") > 0 ? options->search.patience : run->spec.patience;
        const std::string spent =
            PatienceSpentText(*run, store.Candidates(run->id),
                              SearchSpace(searched, run->spec.problem, setup->arch), patience);
        if (!spent.empty()) {
          std::cerr << "evo: " << task.label << ": " << spent << "\n";
        } else if (budget_given && options->search.budget > run->spec.budget) {
          store.SetRunBudget(run->id, options->search.budget);
        }
        if (patience != run->spec.patience) store.SetRunPatience(run->id, patience);
        run = store.FindRun(run->id);
      } else {
        // Earlier tasks' elites open this run's first generation, nearest shapes first, before
        // the template's own starting points: where a search starts decides what a short one
        // finds. Generation 0 is stored before it is evaluated, so a resume keeps these.
        if (!options->no_seed_elites) {
          std::vector<TunedBefore> before;
          for (size_t j = 0; j < i; ++j) {
            if (plan.tasks[j].kernel_template != task.kernel_template) continue;
            const std::optional<RunRecord> earlier = FindTaskRun(store, plan.tasks[j], 0).run;
            if (earlier) before.push_back({plan.tasks[j].problem, store.Elite(earlier->id)});
          }
          const std::vector<KnobSettings> seeds = SeedStartingPoints(
              searched, task.problem, before,
              static_cast<size_t>(std::max(1, options->search.generation_size / 2)));
          searched.starting_points.insert(searched.starting_points.begin(), seeds.begin(),
                                          seeds.end());
          if (!seeds.empty()) note = fmt::format(" (seeded with {} elites)", seeds.size());
        }
        const RunSpec spec =
            NewRunSpec(manifest, task.problem, identity, options->search, app.count("--seed") > 0);
        run = store.FindRun(store.CreateRun(spec));
      }

      const SearchSpace space(searched, run->spec.problem, setup->arch);
      Search search(store, run->id, space, *setup->evaluator, search_options);
      const std::string prefix = fmt::format("[{}/{}] {}: ", i + 1, plan.tasks.size(), task.label);
      size_t last_width = 0;
      const int64_t every = std::max<int64_t>(1, run->spec.budget / 4);
      const SearchSummary result = search.Run(
          [&](const SearchProgress& progress) {
            const std::string line =
                prefix + ProgressLine(progress) +
                fmt::format(" | set {}/{}", set_done + progress.evaluated, set_budget);
            if (live) {
              std::cerr << "\r" << line
                        << std::string(last_width > line.size() ? last_width - line.size() : 0, ' ')
                        << std::flush;
              last_width = line.size();
            } else if (progress.evaluated % every == 0 || progress.evaluated == progress.budget) {
              std::cerr << line << "\n";
            }
          },
          g_stop_requested);
      if (live && last_width > 0) std::cerr << "\n";
      if (result.retime && result.retime->result != RetimeResult::kOff) {
        std::cerr << prefix << result.retime->message << "\n";
      }
      const RunRecord finished = *store.FindRun(run->id);
      set_done += finished.finished_candidates;
      summary += SummaryLine(i, plan.tasks.size(), task, finished, store,
                             note + (result.reason == StopReason::kBudget
                                         ? ""
                                         : " (" + std::string(ToString(result.reason)) + ")"));
      interrupted = result.reason == StopReason::kInterrupted ||
                    (result.retime && result.retime->result == RetimeResult::kInterrupted);
    }
    std::cout << summary;
    if (interrupted) {
      std::cout << "interrupted; run the same evo tune again to continue\n";
      return 130;
    }
    std::cout << fmt::format("export the set: evo export --python DIR --db {} (or --cpp DIR)\n",
                             options->db);
    return kExitOk;
  };
}

}  // namespace

std::function<int()> SetupTune(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<TuneOptions>();
  app.add_option("--template,-t", options->templates,
                 "a template to tune (repeatable; default sdpa_fp16)");
  app.add_option("--shape", options->shapes,
                 "B,H,S,D or B,H,S_q,S_kv,D, H may be H:H_kv, ',causal' may follow (repeatable)");
  app.add_option("--shapes", options->shapes_file, "a file of shapes, one per line ('#' comments)");
  app.add_option(
      "--grid", options->grids,
      "shapes as a product, e.g. \"BxH=2x8,4x16 S=512..16384 D=64,128 CAUSAL=0,1\" "
      "(LO..HI: LO, 2*LO, 4*LO, ... up to HI; names B, H, H_kv, S, S_q, S_kv, D, CAUSAL, BxH)");
  app.add_flag("--causal", options->causal, "every shape causal");
  app.add_option("--problem", options->problem_settings,
                 "PARAM=VALUE (repeatable) for every shape, e.g. BF16=1; templates without it "
                 "are skipped");
  AddEvaluatorOptions(app, options->evaluator, false, GpuChoice::kSeveral);
  app.add_option("--replay", options->replays,
                 "answer from recordings made by `evo sweep` instead of a GPU (repeatable: each "
                 "task replays the recording of its template and shape)");
  app.add_option("--replay-delay-ms", options->evaluator.replay_delay_ms,
                 "time a replayed evaluation takes")
      ->transform(NonNegativeNumber());
  app.add_option("--db", options->db, "the population database of the set")->capture_default_str();
  AddSearchSettings(
      app, options->search, true,
      "candidates per shape that reach the gates; a larger one extends finished runs");
  app.add_flag("--force", options->force,
               "continue runs measured on another GPU, evaluator or template version");
  app.add_flag("--no-seed-elites", options->no_seed_elites,
               "do not open new runs with the elites of the shapes tuned before them");
  app.add_flag("--list", options->list, "print the runs the set consists of, and tune nothing");
  return TuneCommand(global, app, options);
}

}  // namespace evo::cli
