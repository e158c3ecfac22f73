#pragma once
// Warnings: what PyTorch reports with TORCH_WARN (and Python's warnings module shows once
// per place), kiln reports through one handler the user can replace. Each call site
// warns once per process (reset_warnings() forgets, for tests); the default handler
// prints one line on stderr.

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "kiln/core/scope.h"

namespace kiln {

/** One warning: where it comes from (a short stable name of the site) and what it says. */
struct Warning {
  std::string site;
  std::string message;
};

using WarningHandler = std::function<void(const Warning&)>;

/** Makes `handler` receive every warning (null: back to the default, a line on stderr);
 * returns the handler it replaces. Thread-safe. */
WarningHandler set_warning_handler(WarningHandler handler);

/** Reports `message` through the handler the first time `site` warns in this process. */
void warn_once(std::string_view site, std::string message);

/** Forgets which sites have warned. */
void reset_warnings();

/** Installs a handler for a scope and restores the previous one. */
class WarningHandlerGuard : ScopeGuard {
 public:
  explicit WarningHandlerGuard(WarningHandler handler)
      : before_(set_warning_handler(std::move(handler))) {}
  ~WarningHandlerGuard() { set_warning_handler(std::move(before_)); }

 private:
  WarningHandler before_;
};

}  // namespace kiln
