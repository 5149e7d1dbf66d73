#include "cli/doctor_machine.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "cli/doctor_gpu_probe.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/nvrtc_compiler.h"
#include "population/sqlite.h"

namespace evo::cli {
namespace {

namespace fs = std::filesystem;

// Below this much free space under runs/, a search may fail to store its compile cache entries
// and databases (a candidate's cache entry is a cubin and its log, up to a few hundred KiB).
constexpr uintmax_t kLowSpaceBytes = uintmax_t{1} << 30;

constexpr const char* kNoGpuFix =
    "searches (evo run), evo bench and evo sweep run kernels on an NVIDIA GPU through its driver "
    "(libcuda.so.1, CUDA 13 or newer): run them on a machine with one. Here evo still compiles "
    "(evo compile --arch sm_90), replays recorded searches (evo run --replay FILE) and shows, "
    "reports and exports stored runs";

std::string Bytes(uintmax_t bytes) {
  const double value = static_cast<double>(bytes);
  if (bytes >= (uintmax_t{1} << 30)) return fmt::format("{:.1f} GiB", value / (1 << 30));
  if (bytes >= (uintmax_t{1} << 20)) return fmt::format("{:.1f} MiB", value / (1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", value / 1024);
  return fmt::format("{} B", bytes);
}

std::string Join(const std::vector<std::string>& items, const std::string& separator = " ") {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

// The folder itself when it exists, else its nearest existing ancestor: what a write would use.
fs::path NearestExisting(fs::path path) {
  path = fs::absolute(path);
  std::error_code error;
  while (!fs::exists(path, error) && path.has_parent_path() && path != path.parent_path()) {
    path = path.parent_path();
  }
  return path;
}

std::pair<int, int> NvrtcVersion(const NvrtcCompiler& nvrtc) {
  // "nvrtc 13.0"
  const std::string text = nvrtc.Version();
  int major = 0;
  int minor = 0;
  std::sscanf(text.c_str(), "nvrtc %d.%d", &major, &minor);
  return {major, minor};
}

std::string TemplateArchs(const Manifest& manifest) {
  std::string archs = manifest.max_sm == 0 ? fmt::format("sm_{} and newer", manifest.min_sm)
                      : manifest.max_sm == manifest.min_sm
                          ? fmt::format("sm_{}", manifest.min_sm)
                          : fmt::format("sm_{} to sm_{}", manifest.min_sm, manifest.max_sm);
  return manifest.arch_specific ? archs + ", arch-specific" : archs;
}

// The target a template compiles for on a GPU of this arch, or why it cannot run there.
std::optional<std::string> TemplateTarget(const Manifest& manifest, const ArchInfo& arch,
                                          std::string& why) {
  try {
    RequireSupportedArch(manifest, arch);
    return CompileTarget(arch, manifest.arch_specific).name;
  } catch (const Error& error) {
    why = error.what();
    return std::nullopt;
  }
}

class MachineChecker {
 public:
  explicit MachineChecker(const MachineCheckOptions& options) : options_(options) {}

  MachineCheck Run() {
    CheckEvo();
    CheckNvrtc();
    result_.findings.push_back(OkFinding("sqlite", "SQLite " + sqlite::LibraryVersion()));
    CheckTemplates();
    CheckDriverAndGpus();
    CheckTemplatesOnGpus();
    CheckCache();
    CheckDisk();
    return std::move(result_);
  }

 private:
  void Add(Finding finding) { result_.findings.push_back(std::move(finding)); }

  void CheckEvo() {
    std::error_code error;
    const fs::path self = fs::read_symlink("/proc/self/exe", error);
    Add(OkFinding("evo", std::string(EVO_VERSION) + (error ? "" : " at " + self.string())));
  }

  // Compiles the probe, timing it; nothing when it fails (and a problem is recorded).
  std::optional<std::string> Compile(const std::string& target, std::vector<std::string>& timings) {
    try {
      const auto start = std::chrono::steady_clock::now();
      std::string cubin = CompileProbe(nvrtc_, target);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      timings.push_back(fmt::format("{} {:.0f} ms", target, ms));
      return cubin;
    } catch (const Error& error) {
      Add(ProblemFinding("nvrtc", error.what(),
                         "reinstall the CUDA 13 toolkit at /usr/local/cuda (evo loads "
                         "libnvrtc.so.13 from there)"));
      return std::nullopt;
    }
  }

  void CheckNvrtc() {
    const auto [major, minor] = NvrtcVersion(nvrtc_);
    nvrtc_major_ = major;
    nvrtc_minor_ = minor;
    supported_ = NvrtcCompiler::SupportedArchs();
    // sm_80 is the oldest arch evo's templates take; sm_90a proves the arch-specific target
    // (wgmma) that the Hopper templates compile for.
    std::vector<std::string> timings;
    const bool plain = Compile("sm_80", timings).has_value();
    const bool hopper = Compile("sm_90a", timings).has_value();
    result_.compiles = plain;
    hopper_compiles_ = hopper;
    std::vector<std::string> known;
    for (const std::string& arch : KnownArchNames()) {
      if (!arch.ends_with("a")) known.push_back(arch);
    }
    const std::string text = fmt::format(
        "NVRTC {}.{} compiles for {}; evo knows the limits of {}; probe compiles: {}", major, minor,
        Join(supported_), Join(known), timings.empty() ? "none" : Join(timings, ", "));
    Add(plain && hopper ? OkFinding("nvrtc", text) : NoteFinding("nvrtc", text));
  }

  void CheckTemplates() {
    if (options_.library == nullptr) {
      Add(ProblemFinding(
          "templates", "cannot load the templates: " + options_.library_error,
          "fix the manifest it names, or leave out the --templates folder that holds it"));
      return;
    }
    std::vector<std::string> names;
    for (const KernelTemplate& t : options_.library->templates()) {
      names.push_back(t.manifest.name + (t.origin == "embedded" ? "" : " (" + t.origin + ")"));
    }
    Add(OkFinding("templates", fmt::format("{} loaded: {}", names.size(), Join(names, ", "))));
  }

  void CheckDriverAndGpus() {
    int driver = 0;
    try {
      driver = DriverVersion();
    } catch (const NoGpuError& error) {
      Add(ProblemFinding("driver", error.what(), kNoGpuFix));
      return;
    }
    result_.have_driver = true;
    const int driver_major = driver / 1000;
    const int driver_minor = driver % 1000 / 10;
    const std::string version = fmt::format("CUDA {}.{}", driver_major, driver_minor);
    if (driver_major < nvrtc_major_) {
      Add(ProblemFinding(
          "driver",
          fmt::format("{} is older than NVRTC {}.{}: the driver may refuse the cubins "
                      "NVRTC makes",
                      version, nvrtc_major_, nvrtc_minor_),
          fmt::format("install an NVIDIA driver for CUDA {}.{} or newer", nvrtc_major_,
                      nvrtc_minor_)));
    } else {
      Add(OkFinding("driver", version));
    }

    try {
      devices_ = QueryDevices();
    } catch (const Error& error) {
      Add(ProblemFinding("gpus", std::string("the driver cannot list the GPUs: ") + error.what(),
                         "check the driver with nvidia-smi"));
      return;
    }
    result_.gpus = static_cast<int>(devices_.size());
    if (devices_.empty()) {
      Add(ProblemFinding("gpus", "the driver sees no GPU",
                         "check nvidia-smi, and that CUDA_VISIBLE_DEVICES does not hide the GPUs"));
      return;
    }
    for (const DeviceInfo& device : devices_) CheckGpu(device);
  }

  void CheckGpu(const DeviceInfo& device) {
    const std::string topic = "gpu " + std::to_string(device.ordinal);
    const std::string arch = device.arch();
    const std::string description =
        fmt::format("{}, {}, {} SMs, {} MiB, {} bytes shared memory per block, {} MHz", device.name,
                    arch, device.sm_count, device.global_memory_bytes / (1024 * 1024),
                    device.max_smem_per_block_optin, device.sm_clock_khz / 1000);
    if (std::find(supported_.begin(), supported_.end(), arch) == supported_.end()) {
      Add(ProblemFinding(topic, description + "; this NVRTC cannot compile for " + arch,
                         "install a CUDA toolkit whose NVRTC knows " + arch));
      return;
    }
    const std::vector<std::string> known = KnownArchNames();
    if (std::find(known.begin(), known.end(), arch) == known.end()) {
      Add(ProblemFinding(topic, description + "; evo does not know the limits of " + arch,
                         "add " + arch + " to kernel_templates/arch.cc"));
      return;
    }
    // Every arch-specific template of this arch needs its "a" target too.
    std::vector<std::string> targets = {arch};
    try {
      const std::string specific = CompileTarget(device.arch_info(), true).name;
      if (specific != arch) targets.push_back(specific);
    } catch (const Error&) {
      // evo knows no arch-specific variant of this arch; no template needs one.
    }
    std::vector<std::string> ran;
    for (const std::string& target : targets) {
      std::vector<std::string> timings;
      const std::optional<std::string> cubin = Compile(target, timings);
      if (!cubin) return;
      try {
        RunProbe(device.ordinal, *cubin);
        ran.push_back(target);
      } catch (const Error& error) {
        Add(ProblemFinding(
            topic, description + "; a probe kernel for " + target + " failed: " + error.what(),
            "check the GPU with nvidia-smi (a process holding it in exclusive mode, an "
            "error state, a driver older than the toolkit)"));
        return;
      }
    }
    ++result_.usable_gpus;
    runnable_archs_.push_back(device);
    Add(OkFinding(
        topic, description + "; compiled, loaded and ran a probe kernel for " + Join(ran, ", ")));
  }

  void CheckTemplatesOnGpus() {
    if (options_.library == nullptr) return;
    std::vector<std::string> hopper;
    for (const KernelTemplate& t : options_.library->templates()) {
      const Manifest& manifest = t.manifest;
      if (manifest.arch_specific && manifest.min_sm == 90) hopper.push_back(manifest.name);
      std::vector<std::string> runs_on;
      std::vector<std::string> refused;
      for (const DeviceInfo& device : runnable_archs_) {
        std::string why;
        if (TemplateTarget(manifest, device.arch_info(), why)) {
          runs_on.push_back("gpu " + std::to_string(device.ordinal));
        } else {
          refused.push_back(fmt::format("gpu {} is {}", device.ordinal, device.arch()));
        }
      }
      const std::string topic = "template " + manifest.name;
      const std::string archs = TemplateArchs(manifest);
      if (!runs_on.empty()) {
        Add(OkFinding(topic, archs + ": runs on " + Join(runs_on, ", ")));
      } else if (!refused.empty()) {
        Add(NoteFinding(topic, archs + ": no GPU here can run it (" + Join(refused, ", ") + ")"));
      } else {
        const std::string oldest = "sm_" + std::to_string(manifest.min_sm);
        if (std::find(supported_.begin(), supported_.end(), oldest) == supported_.end()) {
          Add(ProblemFinding(topic, archs + ": this NVRTC cannot compile for " + oldest,
                             "install a CUDA toolkit whose NVRTC knows " + oldest));
        } else {
          Add(NoteFinding(topic, archs + ": NVRTC compiles for it here (evo compile -t " +
                                     manifest.name + " --arch " + oldest +
                                     "); running it needs a GPU"));
        }
      }
    }
    if (hopper.empty()) return;
    // The question people ask first on a new machine: can the fastest templates run here?
    bool hopper_gpu = false;
    for (const DeviceInfo& device : runnable_archs_)
      hopper_gpu = hopper_gpu || device.cc_major == 9;
    const std::string names = Join(hopper, ", ");
    if (!hopper_compiles_) {
      Add(ProblemFinding("hopper", "NVRTC cannot compile sm_90a, which " + names + " need",
                         "install the CUDA 13 toolkit at /usr/local/cuda"));
    } else if (hopper_gpu) {
      Add(OkFinding("hopper",
                    names + " (sm_90a) compile here and run on this machine's Hopper GPU"));
    } else {
      Add(NoteFinding("hopper",
                      names + " (sm_90a) compile here but cannot run here: they need a Hopper "
                              "GPU (sm_90, e.g. H100 or H200)"));
    }
  }

  void CheckCache() {
    const fs::path& folder = options_.cache_dir;
    std::error_code error;
    if (!fs::exists(folder, error)) {
      const fs::path parent = NearestExisting(folder);
      if (::access(parent.c_str(), W_OK) != 0) {
        Add(ProblemFinding(
            "cache",
            folder.string() + " does not exist and " + parent.string() + " cannot be written",
            "make " + parent.string() + " writable or pass --cache-dir to evo's commands"));
      } else {
        Add(NoteFinding("cache",
                        folder.string() + " does not exist yet; the first compile creates it"));
      }
      return;
    }
    if (!fs::is_directory(folder, error)) {
      Add(ProblemFinding("cache", folder.string() + " is not a folder",
                         "move it away or pass --cache-dir to evo's commands"));
      return;
    }
    uintmax_t bytes = 0;
    int64_t entries = 0;
    for (const auto& entry : fs::directory_iterator(folder, error)) {
      if (!entry.is_regular_file(error)) continue;
      bytes += entry.file_size(error);
      if (entry.path().extension() == ".json") ++entries;
    }
    const std::string text =
        fmt::format("{}: {} compiles, {}", folder.string(), entries, Bytes(bytes));
    if (::access(folder.c_str(), W_OK) != 0) {
      Add(ProblemFinding("cache", text + "; it cannot be written",
                         "make it writable, or compile with --no-cache or another --cache-dir"));
      return;
    }
    Add(OkFinding(
        "cache",
        text + (bytes > 0 ? " (evo never prunes it; delete it to reclaim the space)" : "")));
  }

  void CheckDisk() {
    const fs::path where = NearestExisting(options_.runs_dir);
    std::error_code error;
    const fs::space_info space = fs::space(where, error);
    if (error) {
      Add(ProblemFinding("disk",
                         "cannot read the free space of " + where.string() + ": " + error.message(),
                         "check that the file system is mounted"));
      return;
    }
    const std::string text =
        fmt::format("{} free under {}{}", Bytes(space.available), options_.runs_dir.string(),
                    where == fs::absolute(options_.runs_dir) ? "" : " (on " + where.string() + ")");
    if (space.available < kLowSpaceBytes) {
      Add(ProblemFinding("disk", text,
                         "free some space: searches write databases and compile caches "
                         "under runs/"));
    } else {
      Add(OkFinding("disk", text));
    }
  }

  const MachineCheckOptions& options_;
  MachineCheck result_;
  NvrtcCompiler nvrtc_;
  int nvrtc_major_ = 0;
  int nvrtc_minor_ = 0;
  std::vector<std::string> supported_;
  bool hopper_compiles_ = false;
  std::vector<DeviceInfo> devices_;
  std::vector<DeviceInfo> runnable_archs_;  // the GPUs that ran the probe
};

}  // namespace

MachineCheck CheckMachine(const MachineCheckOptions& options) {
  return MachineChecker(options).Run();
}

}  // namespace evo::cli
