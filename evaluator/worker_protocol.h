#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace evo {

// The line protocol between evo and a GPU worker process: one JSON object per line, each way.
//
//   evo -> worker   {"type":"evaluate","id":N,"payload":{...}}
//                   {"type":"health","id":N}
//   worker -> evo   {"id":N,"ok":true,"result":{...}}
//                   {"id":N,"ok":false,"error":"...","poisoned":true|false}
//
// Payloads and results are opaque here. Exactly one reply per request, in order; the worker's
// stdout carries nothing else (its logs go to stderr). `poisoned` means the worker's CUDA
// context is unusable (a sticky error such as an illegal address) and it must be replaced.
// Ids are unsigned and strictly increasing over the supervisor's life, across workers.

enum class RequestType { kEvaluate, kHealth };

struct WorkerRequest {
  RequestType type = RequestType::kEvaluate;
  uint64_t id = 0;
  nlohmann::json payload;  // kEvaluate only
};

struct WorkerReply {
  uint64_t id = 0;
  bool ok = false;
  nlohmann::json result;  // when ok
  std::string error;      // when not ok
  bool poisoned = false;  // when not ok
};

// Encoders return one line without its '\n'. Invalid UTF-8 in strings is replaced rather than
// thrown on, so an odd CUDA error text can never break the channel.
std::string EncodeEvaluateRequest(uint64_t id, const nlohmann::json& payload);
std::string EncodeHealthRequest(uint64_t id);
std::string EncodeReply(const WorkerReply& reply);

// A decoded message, or why the line is not one (`problem`); malformed input is data here, not
// an exception, since a misbehaving worker is an expected outcome.
template <typename Message>
struct Decoded {
  std::optional<Message> message;
  std::string problem;
  bool ok() const { return message.has_value(); }
};

// For workers.
Decoded<WorkerRequest> DecodeRequest(std::string_view line);

// A reply that is not JSON, lacks a field, has a field of the wrong type, or answers another id
// than `expected_id` is garbage, and `problem` says which.
Decoded<WorkerReply> DecodeReply(std::string_view line, uint64_t expected_id);

// At most `max_chars` of `text` in double quotes for a message, cut at a UTF-8 boundary and
// marked when cut, with control characters escaped so that the message stays on one line.
std::string QuoteForMessage(std::string_view text, size_t max_chars = 200);

}  // namespace evo
