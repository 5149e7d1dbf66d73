#include "population/sqlite.h"

#include <catch2/catch.hpp>

#include "common/error.h"
#include "tests/test_support.h"

namespace evo {
namespace {

TEST_CASE("sqlite handles: statements, bindings and transactions", "[sqlite]") {
  test::TempDir dir;
  sqlite::Database db(dir.path() / "t.db", sqlite::Database::Mode::kReadWriteCreate);
  db.Execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL)");
  db.Prepare("INSERT INTO t (name, score) VALUES (?, ?)").Bind(1, "a").Bind(2, 1.5).Step();
  CHECK(db.LastInsertRowId() == 1);
  {
    sqlite::Transaction rolled_back(db);
    db.Prepare("INSERT INTO t (name, score) VALUES ('lost', 0)").Step();
  }
  {
    sqlite::Transaction committed(db);
    db.Prepare("INSERT INTO t (name) VALUES ('kept')").Step();
    committed.Commit();
  }
  auto rows = db.Prepare("SELECT name, score FROM t ORDER BY id");
  REQUIRE(rows.Step());
  CHECK(rows.ColumnText(0) == "a");
  CHECK(rows.ColumnDouble(1) == 1.5);
  REQUIRE(rows.Step());
  CHECK(rows.ColumnText(0) == "kept");
  CHECK(rows.ColumnIsNull(1));
  CHECK_FALSE(rows.Step());
  CHECK_THROWS_WITH(db.Execute("SELECT * FROM missing"),
                    Catch::Contains("no such table") && !Catch::Contains("another process"));
}

TEST_CASE("sqlite says what may hold a database that stays locked", "[sqlite]") {
  test::TempDir dir;
  const auto path = dir.path() / "t.db";
  sqlite::Database writer(path, sqlite::Database::Mode::kReadWriteCreate);
  writer.Execute("CREATE TABLE t (id INTEGER PRIMARY KEY)");
  writer.Execute("BEGIN IMMEDIATE");
  writer.Execute("INSERT INTO t DEFAULT VALUES");
  sqlite::Database other(path, sqlite::Database::Mode::kReadWrite);
  other.Execute("PRAGMA busy_timeout = 0");
  // Catch's combined matchers hold their parts by reference: built where they are used.
  const std::string doctor = "evo doctor --db " + path.string();
  CHECK_THROWS_WITH(other.Execute("INSERT INTO t DEFAULT VALUES"),
                    Catch::Contains("database is locked") &&
                        Catch::Contains("another process held a lock on it") &&
                        Catch::Contains(doctor));
  CHECK_THROWS_WITH(other.Prepare("INSERT INTO t DEFAULT VALUES").Step(),
                    Catch::Contains("step: database is locked") &&
                        Catch::Contains("another process held a lock on it") &&
                        Catch::Contains(doctor));
  writer.Execute("COMMIT");
  CHECK_NOTHROW(other.Execute("INSERT INTO t DEFAULT VALUES"));
}

TEST_CASE("sqlite refuses a file that is not a database and leaves it alone", "[sqlite]") {
  test::TempDir dir;
  const auto path = dir.path() / "notes.txt";
  const std::string content = "these are not the pages of a database\n";
  test::WriteFile(path, content);
  sqlite::Database db(path, sqlite::Database::Mode::kReadWrite);
  CHECK_THROWS_WITH(db.Execute("SELECT count(*) FROM sqlite_master"),
                    Catch::Contains("file is not a database"));
  CHECK(std::filesystem::file_size(path) == content.size());
  CHECK_THROWS_WITH(sqlite::Database(dir.path() / "missing.db", sqlite::Database::Mode::kReadWrite),
                    Catch::Contains("cannot open database"));
}

}  // namespace
}  // namespace evo
