#include "common/status.h"

#include <catch2/catch.hpp>

namespace evo {
namespace {

TEST_CASE("statuses round-trip through their stored names", "[status]") {
  for (Status status : {Status::kInvalid, Status::kCompileError, Status::kResourceReject,
                        Status::kCompiled, Status::kRuntimeError, Status::kTimeout,
                        Status::kIncorrect, Status::kSlow, Status::kMeasured}) {
    const auto name = ToString(status);
    CHECK(name != "unknown");
    CHECK(StatusFromString(name) == status);
  }
  CHECK(ToString(Status::kResourceReject) == "resource_reject");
  CHECK_FALSE(StatusFromString("passed").has_value());
}

}  // namespace
}  // namespace evo
