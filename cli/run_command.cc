#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/search_commands.h"
#include "cli/search_output.h"
#include "cli/task_setup.h"
#include "common/error.h"
#include "engine/search.h"
#include "evaluator/compile_cache.h"
#include "evaluator/compile_gate.h"
#include "evaluator/gpu_pipeline.h"
#include "evaluator/nvrtc_compiler.h"
#include "evaluator/recording.h"
#include "kernel_templates/genome.h"
#include "population/run_lock.h"
#include "population/store.h"

namespace evo::cli {
namespace {

// The task and the evaluator's settings, shared by `evo run` and `evo sweep`.
struct TaskOptions : EvaluatorOptions {
  std::string template_name = "sdpa_fp16";
  std::string shape;
  bool causal = false;
  std::vector<std::string> problem_settings;
};

// `evo run` (with_replay) measures on several GPUs; `evo sweep` on one.
void AddTaskOptions(CLI::App& app, TaskOptions& options, bool with_replay) {
  app.add_option("--template,-t", options.template_name, "template name")->capture_default_str();
  app.add_option("--shape", options.shape,
                 "B,H,S,D or B,H,S_q,S_kv,D (default: the template's default problem)");
  app.add_flag("--causal", options.causal, "causal attention");
  app.add_option("--problem", options.problem_settings,
                 "PARAM=VALUE (repeatable): another problem parameter, e.g. Q_FP8=1");
  AddEvaluatorOptions(app, options, with_replay,
                      with_replay ? GpuChoice::kSeveral : GpuChoice::kOne);
}

Problem TaskProblem(const Manifest& manifest, const TaskOptions& options) {
  return CommandLineProblem(manifest, options.shape, options.causal, options.problem_settings);
}

struct RunOptions {
  TaskOptions task;
  std::string db = "runs/evo.db";
  SearchSettings search;
  int64_t resume = 0;
  bool fresh = false;
  bool force = false;
  bool json = false;
  bool no_starting_points = false;
  std::vector<std::string> fixed;  // --fix KNOB=VALUE
};

std::function<int()> RunCommand(const GlobalOptions& global, CLI::App& app,
                                std::shared_ptr<RunOptions> options) {
  return [&global, &app, options] {
    const TemplateLibrary library = LoadLibrary(global);
    // Without a GPU, or with a bad --gpus, say so before a database is created or touched.
    CheckGpus(options->task, !options->task.replay.empty());
    // A new run's template is known here; a resumed one's is checked when its evaluator is made.
    if (options->task.time_on_outliers && options->resume == 0) {
      RequireOutlierRows(library.Find(options->task.template_name).manifest);
    }
    if (!options->task.replay_clock.empty()) {
      // The clock log is written from its start: never over the database or the recording.
      RefuseToOverwrite(options->task.replay_clock, "--replay-clock", options->db,
                        {options->task.replay});
    }
    // Checked before the run is stored, so that a malformed option leaves nothing behind.
    const SearchOptions search_options = StoppingOptions(options->search);
    // The lock first: it outlives the store's connection (run_lock.h says why).
    const RunLock lock(options->db);
    PopulationStore store(options->db, PopulationStore::Access::kReadWrite);

    // The run to continue: the one named, else the latest unfinished one of the same task.
    std::optional<RunRecord> run;
    const bool budget_given = app.count("--budget") > 0;
    if (options->resume > 0) {
      if (options->fresh) throw Error("--resume and --new exclude each other");
      run = store.FindRun(options->resume);
      if (!run)
        throw Error("there is no run " + std::to_string(options->resume) + " in " + options->db);
    }
    // A replay names its task: without --shape, --causal and --problem, the run searches the
    // task the recording measured (a --template naming another template is refused below).
    bool from_recording = false;
    if (!run && !options->task.replay.empty() && app.count("--shape") == 0 &&
        app.count("--causal") == 0 && app.count("--problem") == 0) {
      const RecordingHeader recorded = ReadRecordingHeader(options->task.replay);
      if (app.count("--template") == 0 || options->task.template_name == recorded.template_name) {
        from_recording = true;
        options->task.template_name = recorded.template_name;
        options->task.problem_settings.clear();
        for (const auto& [name, value] : recorded.problem) {
          options->task.problem_settings.push_back(name + "=" + std::to_string(value));
        }
      }
    }
    const std::string template_name = run ? run->spec.template_name : options->task.template_name;
    const KernelTemplate& kernel_template = library.Find(template_name);
    const Manifest& manifest = kernel_template.manifest;
    const Problem problem = [&] {
      if (!from_recording) return TaskProblem(manifest, options->task);
      try {
        return TaskProblem(manifest, options->task);
      } catch (const Error& error) {
        throw Error("recording '" + options->task.replay + "' names its task as " + template_name +
                    " at " + nlohmann::json(options->task.problem_settings).dump() +
                    ", which this evo cannot take: " + error.what());
      }
    }();
    // Checked against the template before any run is looked for, so a knob or value it does
    // not have is refused whatever the database holds.
    Genome fixed;
    ApplyKnobSettings(manifest, options->fixed, "--fix", fixed);
    if (run && app.count("--fix") > 0 && fixed != run->spec.fixed) {
      throw Error("run " + std::to_string(run->id) + " searches with " +
                  (run->spec.fixed.empty() ? std::string("no knob fixed")
                                           : FormatSettings(run->spec.fixed, ", ") + " fixed") +
                  "; drop --fix to resume it, or pass --new for a run with " +
                  FormatSettings(fixed, ", ") + " fixed");
    }
    if (run &&
        (app.count("--shape") > 0 || app.count("--causal") > 0 || app.count("--problem") > 0 ||
         app.count("--template") > 0) &&
        (problem != run->spec.problem || template_name != options->task.template_name)) {
      throw Error("run " + std::to_string(run->id) + " searches " + run->spec.template_name + " " +
                  nlohmann::json(run->spec.problem).dump() +
                  "; drop --template/--shape/--causal/--problem to resume it");
    }
    if (!run && !options->fresh) {
      for (const RunRecord& candidate : store.Runs()) {
        if (candidate.spec.template_name != manifest.name || candidate.spec.problem != problem ||
            candidate.spec.fixed != fixed) {
          continue;
        }
        // A larger budget extends a finished run; so does another --patience one that its
        // patience stopped short of its budget.
        const bool extendable =
            candidate.state == RunState::kFinished &&
            ((budget_given && options->search.budget > candidate.spec.budget) ||
             ReopenedByPatience(candidate, app.count("--patience") > 0
                                               ? std::optional<int>(options->search.patience)
                                               : std::nullopt));
        if (candidate.state != RunState::kFinished || extendable) run = candidate;
      }
      if (!run) {
        // Nothing to continue; a finished run of this task that the budget does not extend
        // is reported rather than silently repeated.
        for (const RunRecord& candidate : store.Runs()) {
          if (candidate.spec.template_name == manifest.name && candidate.spec.problem == problem &&
              candidate.spec.fixed == fixed &&
              (!budget_given || options->search.budget <= candidate.spec.budget)) {
            run = candidate;
          }
        }
        if (run) {
          std::cout << "run " << run->id << " of this task is finished (" << run->stop_reason
                    << ", " << run->finished_candidates << " candidates); ";
          if (run->stop_reason == ToString(StopReason::kPatience)) {
            std::cout << "its --patience of " << run->spec.patience
                      << " stopped it: pass --patience 0 (none) or a larger one to search on, "
                         "with a --budget over "
                      << run->spec.budget << " to extend it, or --new for another run\n";
          } else {
            std::cout << "pass a --budget over " << run->spec.budget
                      << " to extend it or --new for another run\n";
          }
          std::cout << EliteToText(*run, store.Elite(run->id));
          return kExitOk;
        }
      }
    }

    const std::unique_ptr<EvaluatorSetup> setup =
        MakeEvaluator(global, options->task, kernel_template, run ? run->spec.problem : problem);
    const EvaluatorIdentity& identity = setup->evaluator->identity();
    if (!identity.notice.empty()) std::cerr << "evo: " << identity.notice << "\n";

    // A replay searches what its recording measured (each knob's domain cut to the values it
    // holds).
    Manifest searched = setup->replay ? setup->replay->RecordedSpace(manifest) : manifest;
    // Generation 0 is stored whole before anything is evaluated, so this decides only when a run
    // starts; a resume neither needs the flag nor is changed by it.
    if (options->no_starting_points) searched.starting_points.clear();
    // A resumed run keeps the knobs it fixed when it started.
    const Genome& run_fixed = run ? run->spec.fixed : fixed;
    if (setup->replay) {
      for (const auto& [knob, value] : run_fixed) {
        const KnobSpec* recorded = searched.FindKnob(knob);
        if (recorded != nullptr && std::find(recorded->values.begin(), recorded->values.end(),
                                             value) == recorded->values.end()) {
          throw Error("--fix " + knob + "=" + std::to_string(value) + ": recording '" +
                      options->task.replay + "' holds no configuration with it (" + knob + " is " +
                      nlohmann::json(recorded->values).dump() + " there)");
        }
      }
    }
    searched = WithKnobsFixed(std::move(searched), run_fixed);
    if (!run && !fixed.empty()) {
      // A fix that leaves nothing valid would end the run at once, "exhausted", with nothing to
      // show; it is bad input, and said so before a run is stored.
      const SearchSpace space(searched, problem, setup->arch);
      Random draw(0);
      if (!space.Sample(draw)) {
        const std::optional<ConstraintViolation> broken = space.Violation(DefaultGenome(searched));
        throw Error(
            "--fix " + FormatSettings(fixed, ", ") + " leaves no valid configuration of " +
            manifest.name + " at this problem" +
            (broken ? " (the defaults with it break '" + broken->name + "': " + broken->expr + ")"
                    : std::string()));
      }
    }

    if (run) {
      CheckResumable(*run, identity, options->force);
      CheckStoredKnobs(store.Candidates(run->id), manifest, run->id);
      if (app.count("--seed") > 0 && options->search.seed != run->spec.seed) {
        throw Error("run " + std::to_string(run->id) + " is seeded with " +
                    std::to_string(run->spec.seed) + "; drop --seed to resume it");
      }
      if (app.count("--elite") > 0 && options->search.elite != run->spec.elite_size) {
        throw Error("run " + std::to_string(run->id) + " keeps an elite of " +
                    std::to_string(run->spec.elite_size) + "; drop --elite to resume it");
      }
      // A resumed run proposes what the uninterrupted one would: its generations keep their size.
      if (app.count("--generation-size") > 0 &&
          options->search.generation_size != run->spec.generation_size) {
        throw Error("run " + std::to_string(run->id) + " has generations of " +
                    std::to_string(run->spec.generation_size) +
                    "; drop --generation-size to resume it, or pass --new for a run with "
                    "generations of " +
                    std::to_string(options->search.generation_size));
      }
      if (budget_given || app.count("--patience") > 0) {
        const std::string spent = PatienceSpentText(
            *run, store.Candidates(run->id), SearchSpace(searched, run->spec.problem, setup->arch),
            app.count("--patience") > 0 ? options->search.patience : run->spec.patience);
        if (!spent.empty()) throw Error(spent);
      }
      if (budget_given) {
        if (options->search.budget < run->spec.budget) {
          throw Error("run " + std::to_string(run->id) + " has a budget of " +
                      std::to_string(run->spec.budget) + "; a resume can raise it, not lower it");
        }
        store.SetRunBudget(run->id, options->search.budget);
      }
      if (app.count("--patience") > 0) store.SetRunPatience(run->id, options->search.patience);
      run = store.FindRun(run->id);
      std::cerr << "evo: resuming run " << run->id << ": " << run->finished_candidates << " of "
                << run->spec.budget << " evaluated";
      if (run->pending_candidates > 0) {
        std::cerr << ", " << run->pending_candidates << " left in flight to redo";
      }
      std::cerr << "\n";
    } else {
      RunSpec spec =
          NewRunSpec(manifest, problem, identity, options->search, app.count("--seed") > 0);
      spec.fixed = fixed;
      run = store.FindRun(store.CreateRun(spec));
    }
    std::cerr << "evo: " << RunHeadline(*run);
    if (setup->evaluator->lanes().size() > 1 || setup->pipeline != nullptr) {
      std::cerr << ", " << LanesText(setup->evaluator->lanes());
    }
    if (setup->pipeline != nullptr) {
      std::cerr << ", " << setup->pipeline->compile_jobs() << " compile jobs";
    }
    std::cerr << "\n";

    const SearchSpace space(searched, run->spec.problem, setup->arch);
    Search search(store, run->id, space, *setup->evaluator, search_options);
    const bool live = isatty(STDERR_FILENO) != 0;
    const int64_t every = std::max<int64_t>(1, run->spec.budget / 20);
    size_t last_width = 0;
    const StopOnSignals signals;
    const SearchSummary summary = search.Run(
        [&](const SearchProgress& progress) {
          const std::string line = ProgressLine(progress);
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

    const RunRecord finished = *store.FindRun(run->id);
    std::cerr << fmt::format(
        "evo: run {} stopped: {}; {} of {} evaluated, {} this session in {} ({:.1f} per minute)\n",
        finished.id, ToString(summary.reason), finished.finished_candidates, finished.spec.budget,
        summary.evaluated_now, FormatSeconds(summary.seconds), summary.per_minute);
    if (setup->pipeline != nullptr && setup->pipeline->worker_respawns() > 0) {
      std::cerr << "evo: GPU workers were replaced " << setup->pipeline->worker_respawns()
                << " times\n";
    }
    if (setup->evaluator->lanes().size() > 1) {
      std::cerr << "evo: " << MeasuredOnText(store.Candidates(run->id)) << "\n";
    }
    if (summary.retime && summary.retime->result != RetimeResult::kOff) {
      std::cerr << "evo: " << summary.retime->message << "\n";
    }
    const std::vector<CandidateRecord> elite = store.Elite(run->id);
    if (options->json) {
      nlohmann::json json = {{"run", RunToJson(finished)},
                             {"stop_reason", ToString(summary.reason)},
                             {"evaluated_now", summary.evaluated_now},
                             {"seconds", summary.seconds},
                             {"per_minute", summary.per_minute},
                             {"elite", nlohmann::json::array()}};
      if (summary.retime) {
        json["retime"] = {{"result", ToString(summary.retime->result)},
                          {"message", summary.retime->message}};
        if (summary.retime->retiming) json["retime"]["retiming"] = summary.retime->retiming->id;
      }
      for (const CandidateRecord& c : elite) json["elite"].push_back(CandidateToJson(c));
      std::cout << json.dump(2) << "\n";
    } else {
      std::cout << EliteToText(finished, elite);
    }
    // Ctrl-C during the re-timing left the run as the search stopped it, but was still a stop.
    const bool interrupted =
        summary.reason == StopReason::kInterrupted ||
        (summary.retime && summary.retime->result == RetimeResult::kInterrupted);
    return interrupted ? 130 : kExitOk;
  };
}

}  // namespace

std::function<int()> SetupRun(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<RunOptions>();
  AddTaskOptions(app, options->task, true);
  app.add_option("--db", options->db, "the population database")->capture_default_str();
  AddSearchSettings(app, options->search, false,
                    "candidates that reach the gates, counted across resumes");
  app.add_option("--resume", options->resume, "continue this run id")->transform(PositiveNumber());
  app.add_flag("--new", options->fresh, "start a new run even if one of this task can continue");
  app.add_flag("--force", options->force,
               "continue a run measured on another GPU, evaluator or template version");
  app.add_flag("--json", options->json, "print the result as JSON");
  app.add_option("--fix", options->fixed,
                 "KNOB=VALUE (repeatable): search only the configurations with this value, e.g. "
                 "LAGGED_MAX=0; stored with the run, which a resume keeps, and a run fixing other "
                 "knobs is another run")
      ->type_name("KNOB=VALUE");
  app.add_flag("--no-starting-points", options->no_starting_points,
               "leave the template's starting points out of the first generation (the engine "
               "alone, as the search benchmark judges it)");
  return RunCommand(global, app, options);
}

std::function<int()> SetupSweep(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<TaskOptions>();
  auto out = std::make_shared<std::string>();
  auto repeat = std::make_shared<int>(1);
  auto limit = std::make_shared<int64_t>(0);
  AddTaskOptions(app, *options, false);
  app.add_option("--out", *out,
                 "the recording (JSON lines); an existing one is continued (required unless "
                 "--count)");
  app.add_option("--remeasure", *repeat,
                 "measurements of every measured configuration beyond the first")
      ->capture_default_str()
      ->transform(WholeNumberBetween(0, 10));
  app.add_option("--limit", *limit, "stop after this many new configurations (0: all)")
      ->transform(NonNegativeNumber());
  auto fixed = std::make_shared<std::vector<std::string>>();
  app.add_option("--fix", *fixed,
                 "KNOB=VALUE (repeatable): record only the configurations with this value (a "
                 "subspace; replays search only what was recorded)");
  auto count_arch = std::make_shared<std::string>();
  app.add_option("--count", *count_arch,
                 "print how many configurations the sweep covers when compiled for this arch "
                 "(e.g. sm_90), and measure nothing");
  return [&global, options, out, repeat, limit, fixed, count_arch] {
    const TemplateLibrary library = LoadLibrary(global);
    const KernelTemplate& kernel_template = library.Find(options->template_name);
    const Problem problem = TaskProblem(kernel_template.manifest, *options);
    // A fixed knob's domain shrinks to its value, so the enumeration below covers the subspace.
    Genome fixed_values;
    ApplyKnobSettings(kernel_template.manifest, *fixed, "--fix", fixed_values);
    const Manifest swept = WithKnobsFixed(kernel_template.manifest, fixed_values);
    if (!count_arch->empty()) {
      const ArchInfo& arch = ArchByName(*count_arch);
      // Nothing of the space compiles for an arch the template does not take.
      RequireSupportedArch(swept, arch);
      const SearchSpace space(swept, problem, arch);
      // What a sweep would compile: the configurations the constraints allow whose launches
      // can be made on this problem (the compile gate finds the others invalid at once).
      const std::vector<Genome> allowed = space.Enumerate();
      size_t runnable = 0;
      std::optional<std::string> first_refusal;
      for (const Genome& genome : allowed) {
        const std::optional<std::string> refusal = LaunchRefusal(swept, genome, problem, arch);
        if (!refusal) {
          ++runnable;
        } else if (!first_refusal) {
          first_refusal = refusal;
        }
      }
      if (first_refusal) {
        std::cerr << "evo: " << allowed.size() - runnable << " of the " << allowed.size()
                  << " configurations the constraints allow cannot be launched on this problem, "
                     "e.g. "
                  << *first_refusal << "\n";
      }
      std::cout << runnable << "\n";
      return kExitOk;
    }
    if (out->empty()) throw Error("evo sweep needs --out FILE (the recording to write)");
    // A file that cannot be continued (compressed, not a recording) is refused before the GPU
    // is set up, on any machine.
    if (std::filesystem::exists(*out) && std::filesystem::file_size(*out) > 0) {
      ReadRecordingHeader(*out);
    }
    const std::unique_ptr<EvaluatorSetup> setup =
        MakeEvaluator(global, *options, kernel_template, problem);
    RecordingHeader header;
    header.recorded_by = "evo sweep --template " + options->template_name + " " +
                         ProblemOptions(kernel_template.manifest, problem);
    for (const auto& [name, value] : fixed_values) {
      header.recorded_by += " --fix " + name + "=" + std::to_string(value);
    }
    // Its timings are of other inputs than a plain sweep's: the header's command says so.
    if (options->time_on_outliers) header.recorded_by += " --time-on-outliers";
    header.recorded_at = NowIso8601();
    header.evo_version = EVO_VERSION;
    header.template_name = kernel_template.manifest.name;
    header.problem = problem;
    header.identity = setup->evaluator->identity();
    RecordingWriter writer(*out, header);

    const SearchSpace space(swept, problem, setup->arch);
    std::vector<Genome> todo;
    for (Genome& genome : space.Enumerate()) {
      if (writer.existing().count(genome) == 0) todo.push_back(std::move(genome));
    }
    if (*limit > 0 && static_cast<int64_t>(todo.size()) > *limit) {
      todo.resize(static_cast<size_t>(*limit));
    }
    if (!header.identity.notice.empty()) std::cerr << "evo: " << header.identity.notice << "\n";
    std::cerr << "evo: sweeping " << todo.size() << " configurations (" << writer.existing().size()
              << " already recorded) on " << setup->evaluator->identity().device << " with "
              << setup->pipeline->compile_jobs() << " compile jobs\n";
    setup->evaluator->Prefetch(todo);
    const auto start = std::chrono::steady_clock::now();
    size_t done = 0;
    std::map<Status, int> statuses;
    const StopOnSignals signals;
    for (const Genome& genome : todo) {
      if (g_stop_requested.load()) break;
      RecordedCandidate record;
      record.genome = genome;
      record.outcome = setup->evaluator->Evaluate(0, genome);
      if (record.outcome.status == Status::kMeasured) {
        for (int i = 0; i < *repeat; ++i) {
          record.remeasurements.push_back(setup->evaluator->Remeasure(0, genome));
        }
      }
      writer.Append(record);
      ++statuses[record.outcome.status];
      ++done;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (done % 25 == 0 || done == todo.size()) {
        std::cerr << fmt::format("evo: {}/{} in {} ({:.1f} per minute)\n", done, todo.size(),
                                 FormatSeconds(seconds), static_cast<double>(done) * 60 / seconds);
      }
    }
    std::cout << "recorded " << done << " configurations into " << *out << ":";
    for (const auto& [status, count] : statuses)
      std::cout << " " << ToString(status) << " " << count;
    std::cout << "\n";
    return g_stop_requested.load() ? 130 : kExitOk;
  };
}

}  // namespace evo::cli
