#pragma once

#include <optional>
#include <string>

#include "kernel_templates/arch.h"
#include "kernel_templates/expression.h"
#include "kernel_templates/genome.h"
#include "kernel_templates/template_library.h"

namespace evo {

// The values a manifest's expressions may use that no knob changes: the problem parameters and
// the arch's limits.
Bindings FixedBindings(const Problem& problem, const ArchInfo& arch);

// Every value a manifest's expressions may use before launch: knobs, problem parameters, the
// arch's limits and the derived values, evaluated in the manifest's order. A derived value that
// cannot be evaluated for this configuration (a division by zero) throws evo::Error naming it;
// the compile gate and the search space count such a configuration as invalid.
Bindings CompileBindings(const Manifest& manifest, const Genome& genome, const Problem& problem,
                         const ArchInfo& arch);

struct ConstraintViolation {
  std::string name;
  std::string expr;
  std::string doc;
  // Why the constraint could not be evaluated for the configuration (a division by zero in a
  // template's expression); empty where it evaluated to false.
  std::string failure;
};

// The first constraint, in the manifest's order, that the bindings break, or that cannot be
// evaluated for them: a configuration a template's own rules cannot judge is not one to run.
std::optional<ConstraintViolation> FirstViolatedConstraint(const Manifest& manifest,
                                                           const Bindings& bindings);

// The macro evo/dtype.cuh defines for a manifest dtype: "f16" -> "EVO_DTYPE_F16".
std::string DtypeMacro(std::string_view dtype);

// The source NVRTC compiles: the knobs (none for the reference) and the compile-time problem
// parameters as #defines, each argument's `define` as its dtype, then `#line 1` so compiler
// messages point at the template's own lines.
std::string InstantiateSource(const KernelTemplate& kernel_template, const KernelSpec& kernel,
                              const Genome* genome, const Problem& problem);

// Stable identity of a configuration: the template's version, the knob values, the problem and
// the arch. The database and the search key on it.
std::string ConfigurationId(const KernelTemplate& kernel_template, const Genome& genome,
                            const Problem& problem, std::string_view arch);
// The same, from the template's name and version hash (a run stores those).
std::string ConfigurationId(std::string_view template_name, std::string_view template_hash,
                            const Genome& genome, const Problem& problem, std::string_view arch);

}  // namespace evo
