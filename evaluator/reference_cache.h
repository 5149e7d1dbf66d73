#pragma once

#include <cstddef>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

#include "kernel_templates/configuration.h"

namespace evo {

// Everything a reference output of the correctness gate depends on: the template's version (its
// manifest and sources), the check problem and its place among the check problems, the seed (the
// inputs are drawn from those), the arch, and each reference argument's name, dtype and shape.
// Equal keys mean equal outputs; anything that could change an output changes the key.
std::string ReferenceKey(const KernelTemplate& kernel_template, const Problem& check_problem,
                         size_t problem_index, int seed, const ArchInfo& arch);

// The least recently used entries go first once the bytes held pass the budget. Values stay
// where they are (a list), so a pointer from Find is good until the next Insert.
template <typename Value>
class LruCache {
 public:
  explicit LruCache(size_t byte_budget) : budget_(byte_budget) {}

  Value* Find(const std::string& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    return &it->second->value;
  }

  // Keeps `value` unless it alone is over the budget; returns it where it is kept, else null.
  Value* Insert(const std::string& key, Value value, size_t bytes) {
    if (const auto it = index_.find(key); it != index_.end()) Erase(it->second);
    if (bytes > budget_) return nullptr;
    while (!entries_.empty() && held_ + bytes > budget_) Erase(std::prev(entries_.end()));
    entries_.push_front(Entry{key, std::move(value), bytes});
    index_[key] = entries_.begin();
    held_ += bytes;
    return &entries_.front().value;
  }

  void Clear() {
    entries_.clear();
    index_.clear();
    held_ = 0;
  }
  size_t size() const { return entries_.size(); }
  size_t bytes() const { return held_; }

 private:
  struct Entry {
    std::string key;
    Value value;
    size_t bytes;
  };
  void Erase(typename std::list<Entry>::iterator entry) {
    held_ -= entry->bytes;
    index_.erase(entry->key);
    entries_.erase(entry);
  }

  size_t budget_;
  size_t held_ = 0;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
};

}  // namespace evo
