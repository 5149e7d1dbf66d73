#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace evo::sqlite {

std::string LibraryVersion();

class Statement;

// One connection. Errors throw evo::Error with SQLite's message and the file's path.
class Database {
 public:
  // kReadOnlyImmutable reads the file as it is on disk, with no locks and no -shm file: for a
  // database in a folder this user cannot write to, where SQLite could make neither (it ignores
  // a write-ahead log, so the caller must make sure there is none to read).
  enum class Mode { kReadWriteCreate, kReadWrite, kReadOnly, kReadOnlyImmutable };

  Database(const std::filesystem::path& path, Mode mode);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  ~Database();

  void Execute(std::string_view sql);
  Statement Prepare(std::string_view sql);
  int64_t LastInsertRowId() const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() const;
  // True when the main database is read-only: opened so, or the file is write-protected.
  bool IsReadOnly() const;
  const std::filesystem::path& path() const { return path_; }
  sqlite3* handle() const { return db_; }

  [[noreturn]] void Fail(std::string_view what) const;

 private:
  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
};

// A prepared statement; Step() returns true while rows come.
class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& other) noexcept;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view text);
  Statement& BindNull(int index);
  // NULL when empty, so absent figures stay absent in SQL queries.
  template <typename T>
  Statement& Bind(int index, const std::optional<T>& value) {
    return value ? Bind(index, *value) : BindNull(index);
  }
  bool Step();
  void Reset();

  int64_t ColumnInt(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  Database* db_;
  sqlite3_stmt* statement_ = nullptr;
};

// Rolls back unless Commit() was called; the destructor never throws.
class Transaction {
 public:
  explicit Transaction(Database& db);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void Commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace evo::sqlite
