#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli/doctor_findings.h"

namespace evo::cli {

struct DatabaseCheck {
  std::vector<Finding> findings;
  // Why the file is not an evo database at all (missing, a folder, empty, not SQLite, another
  // application's, a newer evo's schema): bad input rather than a problem of a database. Empty
  // when the file is an evo database, sound or not.
  std::string refused;
};

// The schema, integrity (PRAGMA integrity_check and foreign_key_check), size, journal, and the
// runs with the unfinished ones (whether an evo run holds the database now, how to resume).
// Opens the file read-only after checking what it is; never writes to it. (SQLite may add the
// empty -wal and -shm files that any reader of a WAL database creates.)
DatabaseCheck CheckDatabase(const std::filesystem::path& path);

}  // namespace evo::cli
