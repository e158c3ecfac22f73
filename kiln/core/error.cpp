#include "kiln/core/error.h"

namespace kiln {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::value: return "value";
    case ErrorKind::device_mismatch: return "device_mismatch";
    case ErrorKind::device: return "device";
    case ErrorKind::shape: return "shape";
    case ErrorKind::dtype: return "dtype";
    case ErrorKind::index: return "index";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::out_of_memory: return "out_of_memory";
    case ErrorKind::backend: return "backend";
    case ErrorKind::data_dependent: return "data_dependent";
    case ErrorKind::constraint: return "constraint";
    case ErrorKind::frozen_mutation: return "frozen_mutation";
    case ErrorKind::format: return "format";
    case ErrorKind::invalid_graph: return "invalid_graph";
    case ErrorKind::internal: return "internal";
  }
  return "unknown";
}

namespace {
thread_local const char* t_user_op = nullptr;
}  // namespace

OpNameScope::OpNameScope(const char* op) : outermost_(t_user_op == nullptr) {
  if (outermost_) t_user_op = op;
}

OpNameScope::~OpNameScope() {
  if (outermost_) t_user_op = nullptr;
}

const char* current_user_op() { return t_user_op; }

std::string in_user_op(std::string message) {
  if (!t_user_op || message.empty() || message[0] != '[') return message;
  size_t close = message.find(']');
  if (close == std::string::npos) return message;
  std::string_view inner(message.data() + 1, close - 1);
  if (inner == t_user_op) return message;
  return fmt::format("[{}]{} (raised by {})", t_user_op,
                     std::string_view(message).substr(close + 1), inner);
}

}  // namespace kiln
