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
    case ErrorKind::frozen_mutation: return "frozen_mutation";
    case ErrorKind::format: return "format";
    case ErrorKind::invalid_graph: return "invalid_graph";
    case ErrorKind::internal: return "internal";
  }
  return "unknown";
}

}  // namespace kiln
