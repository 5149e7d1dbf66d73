#include "evaluator/worker_protocol.h"

#include <algorithm>
#include <cstdio>

namespace evo {
namespace {

using nlohmann::json;

std::string Dump(const json& message) {
  return message.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Ids are unsigned; a negative or fractional number is not an id.
std::optional<uint64_t> IdOf(const json& message) {
  const auto it = message.find("id");
  if (it == message.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}

std::optional<json> ParseObject(std::string_view line, std::string& problem) {
  json message = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) {
    problem = "not JSON";
    return std::nullopt;
  }
  if (!message.is_object()) {
    problem = "not a JSON object";
    return std::nullopt;
  }
  return message;
}

}  // namespace

std::string EncodeEvaluateRequest(uint64_t id, const nlohmann::json& payload) {
  return Dump({{"type", "evaluate"}, {"id", id}, {"payload", payload}});
}

std::string EncodeHealthRequest(uint64_t id) { return Dump({{"type", "health"}, {"id", id}}); }

std::string EncodeReply(const WorkerReply& reply) {
  if (reply.ok) return Dump({{"id", reply.id}, {"ok", true}, {"result", reply.result}});
  return Dump(
      {{"id", reply.id}, {"ok", false}, {"error", reply.error}, {"poisoned", reply.poisoned}});
}

Decoded<WorkerRequest> DecodeRequest(std::string_view line) {
  Decoded<WorkerRequest> decoded;
  const std::optional<json> message = ParseObject(line, decoded.problem);
  if (!message) return decoded;
  const std::optional<uint64_t> id = IdOf(*message);
  if (!id) {
    decoded.problem = "no unsigned integer \"id\"";
    return decoded;
  }
  const auto type = message->find("type");
  if (type == message->end() || !type->is_string()) {
    decoded.problem = "no string \"type\"";
    return decoded;
  }
  WorkerRequest request;
  request.id = *id;
  if (*type == "health") {
    request.type = RequestType::kHealth;
  } else if (*type == "evaluate") {
    request.type = RequestType::kEvaluate;
    const auto payload = message->find("payload");
    if (payload == message->end()) {
      decoded.problem = "evaluate request without \"payload\"";
      return decoded;
    }
    request.payload = *payload;
  } else {
    decoded.problem = "unknown request type \"" + type->get<std::string>() + "\"";
    return decoded;
  }
  decoded.message = std::move(request);
  return decoded;
}

Decoded<WorkerReply> DecodeReply(std::string_view line, uint64_t expected_id) {
  Decoded<WorkerReply> decoded;
  std::optional<json> message = ParseObject(line, decoded.problem);
  if (!message) return decoded;
  const std::optional<uint64_t> id = IdOf(*message);
  if (!id) {
    decoded.problem = "no unsigned integer \"id\"";
    return decoded;
  }
  if (*id != expected_id) {
    decoded.problem =
        "reply to request " + std::to_string(*id) + ", expected " + std::to_string(expected_id);
    return decoded;
  }
  const auto ok = message->find("ok");
  if (ok == message->end() || !ok->is_boolean()) {
    decoded.problem = "no boolean \"ok\"";
    return decoded;
  }
  WorkerReply reply;
  reply.id = *id;
  reply.ok = ok->get<bool>();
  if (reply.ok) {
    const auto result = message->find("result");
    if (result == message->end()) {
      decoded.problem = "ok reply without \"result\"";
      return decoded;
    }
    reply.result = std::move(*result);
  } else {
    const auto error = message->find("error");
    if (error == message->end() || !error->is_string()) {
      decoded.problem = "error reply without a string \"error\"";
      return decoded;
    }
    const auto poisoned = message->find("poisoned");
    if (poisoned == message->end() || !poisoned->is_boolean()) {
      decoded.problem = "error reply without a boolean \"poisoned\"";
      return decoded;
    }
    reply.error = error->get<std::string>();
    reply.poisoned = poisoned->get<bool>();
  }
  decoded.message = std::move(reply);
  return decoded;
}

std::string QuoteForMessage(std::string_view text, size_t max_chars) {
  size_t cut = std::min(text.size(), max_chars);
  // Back up over UTF-8 continuation bytes so no character is split.
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  std::string quoted = "\"";
  for (const char c : text.substr(0, cut)) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (c == '\n') {
      quoted += "\\n";
    } else if (c == '\r') {
      quoted += "\\r";
    } else if (c == '\t') {
      quoted += "\\t";
    } else if (byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      quoted += escaped;
    } else {
      quoted += c;
    }
  }
  quoted += '"';
  if (cut < text.size()) quoted += "... (" + std::to_string(text.size()) + " bytes in all)";
  return quoted;
}

}  // namespace evo
