#include "evaluator/ptxas_report.h"

#include <charconv>
#include <optional>

namespace evo {
namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '.')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

// The text between the first pair of single quotes after `from`.
std::optional<std::string_view> Quoted(std::string_view text, size_t from = 0) {
  const size_t open = text.find('\'', from);
  if (open == std::string_view::npos) return std::nullopt;
  const size_t close = text.find('\'', open + 1);
  if (close == std::string_view::npos) return std::nullopt;
  return text.substr(open + 1, close - open - 1);
}

// Splits "Used 40 registers, used 1 barriers, 8192 bytes smem" into (number, what) items.
template <typename Visit>
void ForEachFigure(std::string_view list, Visit visit) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = Trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (item.starts_with("Used ") || item.starts_with("used ")) item.remove_prefix(5);
    int64_t number = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), number);
    if (ec != std::errc()) continue;
    visit(number, Trim(item.substr(static_cast<size_t>(end - item.data()))));
  }
}

}  // namespace

std::vector<KernelResources> ParsePtxasReport(std::string_view log) {
  std::vector<KernelResources> kernels;
  // Properties lines name any function (entry or not); Used lines follow an entry's header.
  std::string properties_of;
  KernelResources* current = nullptr;
  // A performance note names its function and comes before that function's entry lines.
  std::vector<std::pair<std::string, std::string>> losses;
  while (!log.empty()) {
    const size_t newline = log.find('\n');
    const std::string_view line = log.substr(0, newline);
    log = newline == std::string_view::npos ? std::string_view() : log.substr(newline + 1);
    if (!line.starts_with("ptxas")) continue;
    const size_t colon = line.find(':');
    const std::string_view body =
        Trim(colon == std::string_view::npos ? line.substr(5) : line.substr(colon + 1));
    constexpr std::string_view kLoss = "Potential Performance Loss: ";
    constexpr std::string_view kInFunction = " in the function ";
    if (const size_t loss = body.find(kLoss); loss != std::string_view::npos) {
      std::string_view note = body.substr(loss + kLoss.size());
      const size_t in = note.rfind(kInFunction);
      const auto function =
          in == std::string_view::npos ? std::nullopt : Quoted(note, in + kInFunction.size());
      if (!function) continue;
      note = note.substr(0, in);
      const std::string_view code = Trim(body.substr(0, loss));
      losses.emplace_back(std::string(*function),
                          (code.empty() ? "" : std::string(code) + " ") + std::string(note));
    } else if (body.starts_with("Compiling entry function")) {
      const auto function = Quoted(body);
      const auto arch =
          function ? Quoted(body, body.find('\'') + function->size() + 2) : std::nullopt;
      kernels.push_back({});
      current = &kernels.back();
      current->function = function ? std::string(*function) : "";
      current->arch = arch ? std::string(*arch) : "";
      properties_of.clear();
    } else if (body.starts_with("Function properties for ")) {
      properties_of = std::string(Trim(body.substr(24)));
    } else if (body.find("stack frame") != std::string_view::npos) {
      KernelResources* target = nullptr;
      for (KernelResources& kernel : kernels) {
        if (kernel.function == properties_of) target = &kernel;
      }
      if (target == nullptr) continue;
      ForEachFigure(body, [&](int64_t number, std::string_view what) {
        if (what == "bytes stack frame") target->stack_frame = number;
        if (what == "bytes spill stores") target->spill_stores = number;
        if (what == "bytes spill loads") target->spill_loads = number;
      });
    } else if (body.starts_with("Used ") && current != nullptr) {
      ForEachFigure(body, [&](int64_t number, std::string_view what) {
        if (what == "registers") current->registers = static_cast<int>(number);
        if (what == "barriers") current->barriers = static_cast<int>(number);
        if (what == "bytes smem") current->smem_static = number;
        if (what == "bytes cmem[0]") current->cmem0 = number;
        if (what == "bytes cumulative stack size") current->cumulative_stack = number;
      });
    }
  }
  for (const auto& [function, note] : losses) {
    for (KernelResources& kernel : kernels) {
      if (kernel.function == function) kernel.performance_losses.push_back(note);
    }
  }
  return kernels;
}

const KernelResources* FindKernel(const std::vector<KernelResources>& kernels,
                                  std::string_view function) {
  for (const KernelResources& kernel : kernels) {
    if (kernel.function == function) return &kernel;
  }
  return nullptr;
}

}  // namespace evo
