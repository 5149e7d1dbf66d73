#include "population/sqlite.h"

#include <sqlite3.h>

#include <cstdio>
#include <string>
#include <utility>

#include "common/error.h"

namespace evo::sqlite {

std::string LibraryVersion() { return sqlite3_libversion(); }

Database::Database(const std::filesystem::path& path, Mode mode) : path_(path) {
  int flags = SQLITE_OPEN_FULLMUTEX;
  switch (mode) {
    case Mode::kReadWriteCreate:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
    case Mode::kReadWrite:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case Mode::kReadOnly:
    case Mode::kReadOnlyImmutable:
      flags |= SQLITE_OPEN_READONLY;
      break;
  }
  std::string name = path.string();
  if (mode == Mode::kReadOnlyImmutable) {
    // A URI filename: the characters a URI gives meaning to are escaped.
    std::string uri = "file:";
    for (const char c : name) {
      if (c == '%' || c == '?' || c == '#') {
        char escaped[4];
        std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
        uri += escaped;
      } else {
        uri += c;
      }
    }
    name = uri + "?immutable=1";
    flags |= SQLITE_OPEN_URI;
  }
  const int result = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (result != SQLITE_OK) {
    const std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(result);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw Error("cannot open database '" + path.string() + "': " + message);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Database::~Database() { sqlite3_close_v2(db_); }

namespace {

// SQLite's "database is locked" names no cause: after the busy timeout, another connection
// still held a lock it needed. Said here, with how to find that connection.
std::string BusyCause(sqlite3* db, const std::filesystem::path& path) {
  if ((sqlite3_errcode(db) & 0xff) != SQLITE_BUSY) return "";
  return " (another process held a lock on it for longer than evo waits: a write transaction "
         "of another evo command, or a sqlite3 shell with a transaction open; `evo doctor --db " +
         path.string() + "` names an evo run that holds it)";
}

}  // namespace

void Database::Fail(std::string_view what) const {
  throw Error("database '" + path_.string() + "': " + std::string(what) + ": " +
              sqlite3_errmsg(db_) + BusyCause(db_, path_));
}

void Database::Execute(std::string_view sql) {
  const std::string text(sql);
  char* message = nullptr;
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string why = message ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    throw Error("database '" + path_.string() + "': " + why + BusyCause(db_, path_));
  }
}

Statement Database::Prepare(std::string_view sql) { return Statement(*this, sql); }

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

int64_t Database::Changes() const { return sqlite3_changes64(db_); }

bool Database::IsReadOnly() const { return sqlite3_db_readonly(db_, "main") == 1; }

Statement::Statement(Database& db, std::string_view sql) : db_(&db) {
  if (sqlite3_prepare_v2(db.handle(), sql.data(), static_cast<int>(sql.size()), &statement_,
                         nullptr) != SQLITE_OK) {
    db.Fail("cannot prepare '" + std::string(sql) + "'");
  }
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), statement_(std::exchange(other.statement_, nullptr)) {}

Statement::~Statement() { sqlite3_finalize(statement_); }

Statement& Statement::Bind(int index, int64_t value) {
  if (sqlite3_bind_int64(statement_, index, value) != SQLITE_OK) db_->Fail("bind");
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  if (sqlite3_bind_double(statement_, index, value) != SQLITE_OK) db_->Fail("bind");
  return *this;
}

Statement& Statement::Bind(int index, std::string_view text) {
  if (sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()),
                        SQLITE_TRANSIENT) != SQLITE_OK) {
    db_->Fail("bind");
  }
  return *this;
}

Statement& Statement::BindNull(int index) {
  if (sqlite3_bind_null(statement_, index) != SQLITE_OK) db_->Fail("bind");
  return *this;
}

bool Statement::Step() {
  const int result = sqlite3_step(statement_);
  if (result == SQLITE_ROW) return true;
  if (result == SQLITE_DONE) return false;
  db_->Fail("step");
}

void Statement::Reset() {
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
}

int64_t Statement::ColumnInt(int column) const { return sqlite3_column_int64(statement_, column); }

double Statement::ColumnDouble(int column) const {
  return sqlite3_column_double(statement_, column);
}

std::string Statement::ColumnText(int column) const {
  const auto* text = sqlite3_column_text(statement_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
}

bool Statement::ColumnIsNull(int column) const {
  return sqlite3_column_type(statement_, column) == SQLITE_NULL;
}

Transaction::Transaction(Database& db) : db_(db) { db_.Execute("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::Commit() {
  db_.Execute("COMMIT");
  done_ = true;
}

}  // namespace evo::sqlite
