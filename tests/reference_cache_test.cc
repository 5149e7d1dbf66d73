#include "evaluator/reference_cache.h"

#include <catch2/catch.hpp>
#include <set>

#include "evaluator/gpu_worker.h"
#include "kernel_templates/template_library.h"

namespace evo {
namespace {

TEST_CASE("a reference output's key changes with everything the output depends on", "[gates]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  const ArchInfo sm90 = ArchByName("sm_90");
  const Problem problem = DefaultProblem(sdpa.manifest);
  const std::string key = ReferenceKey(sdpa, problem, 0, 0, sm90);
  CHECK(key == ReferenceKey(sdpa, problem, 0, 0, sm90));

  std::set<std::string> keys = {key};
  auto distinct = [&](const std::string& other) { return keys.insert(other).second; };
  Problem longer = problem;
  longer["S_kv"] += 1;
  CHECK(distinct(ReferenceKey(sdpa, longer, 0, 0, sm90)));
  Problem causal = problem;
  causal["CAUSAL"] = 1;
  CHECK(distinct(ReferenceKey(sdpa, causal, 0, 0, sm90)));
  CHECK(distinct(ReferenceKey(sdpa, problem, 0, 1, sm90)));  // another seed
  CHECK(distinct(ReferenceKey(sdpa, problem, 1, 0, sm90)));  // drawn as another check problem
  CHECK(distinct(ReferenceKey(sdpa, problem, 0, 0, ArchByName("sm_80"))));
  // Another template, and another version of this one.
  const KernelTemplate& wgmma = library.Find("sdpa_fp16_wgmma");
  CHECK(distinct(ReferenceKey(wgmma, problem, 0, 0, sm90)));
  KernelTemplate changed = sdpa;
  changed.source_hash[0] = changed.source_hash[0] == '0' ? '1' : '0';
  CHECK(distinct(ReferenceKey(changed, problem, 0, 0, sm90)));
  // The same template version with an input of another dtype, or filled another way.
  KernelTemplate other_dtype = sdpa;
  other_dtype.manifest.reference.args[1].dtype = "bf16";
  CHECK(distinct(ReferenceKey(other_dtype, problem, 0, 0, sm90)));
  KernelTemplate other_fill = sdpa;
  other_fill.manifest.reference.args[1].uniform = std::make_pair(0.5, 2.0);
  CHECK(distinct(ReferenceKey(other_fill, problem, 0, 0, sm90)));
  // An e4m3 Q is another input than an fp16 one.
  const KernelTemplate& fp8 = library.Find("sdpa_fp8");
  Problem q_fp8 = DefaultProblem(fp8.manifest);
  q_fp8["Q_FP8"] = 0;
  const std::string fp16_q = ReferenceKey(fp8, q_fp8, 0, 0, sm90);
  q_fp8["Q_FP8"] = 1;
  CHECK(fp16_q != ReferenceKey(fp8, q_fp8, 0, 0, sm90));
}

TEST_CASE("the reference cache drops the least recently used entries past its budget", "[gates]") {
  LruCache<int> cache(100);
  REQUIRE(cache.Insert("a", 1, 40) != nullptr);
  REQUIRE(cache.Insert("b", 2, 40) != nullptr);
  REQUIRE(cache.Find("a") != nullptr);  // a is now the most recently used
  REQUIRE(cache.Insert("c", 3, 40) != nullptr);
  CHECK(cache.Find("b") == nullptr);
  CHECK(*cache.Find("a") == 1);
  CHECK(*cache.Find("c") == 3);
  CHECK(cache.bytes() == 80);
  CHECK(cache.Insert("huge", 4, 101) == nullptr);  // never kept, and evicts nothing
  CHECK(cache.size() == 2);
  REQUIRE(cache.Insert("a", 5, 10) != nullptr);  // replaced, with its new size
  CHECK(*cache.Find("a") == 5);
  CHECK(cache.bytes() == 50);
  cache.Clear();
  CHECK(cache.size() == 0);
  CHECK(cache.bytes() == 0);
  CHECK(cache.Find("c") == nullptr);
}

TEST_CASE("the default deadline follows the reference's time and the gates' work", "[gates]") {
  const TimingOptions timing;
  ReferenceTiming quick;
  quick.task_ms = 0.01;
  quick.all_ms = 0.1;
  quick.runs = 12;
  const auto floor = GateDeadline(quick, timing);
  CHECK(floor >= kMinimumGateDeadline);
  // The timing budget and a little: a kernel that hangs costs seconds.
  CHECK(floor.count() >= timing.warmup_ms + timing.max_total_ms);
  CHECK(floor.count() < 4000);
  ReferenceTiming slow = quick;
  slow.task_ms = 200;
  slow.all_ms = 2000;
  const auto long_task = GateDeadline(slow, timing);
  // Twice the candidate's checks and the reference's runs again, and ten timed launches.
  CHECK(long_task.count() >= 2 * (2 * 2000 + 10 * 200) + timing.max_total_ms);
  TimingOptions longer = timing;
  longer.max_total_ms = 10000;
  CHECK(GateDeadline(quick, longer) - floor == std::chrono::milliseconds(8000));
  // Timing on outlier inputs checks one more seed of each check problem.
  TimingOptions outliers = timing;
  outliers.outlier_inputs = true;
  CHECK(GateDeadline(slow, outliers) - long_task == std::chrono::milliseconds(2 * 2000));
}

}  // namespace
}  // namespace evo
