#include "kiln/core/warning.h"

#include <cstdio>
#include <mutex>
#include <set>

namespace kiln {

namespace {

struct Warnings {
  std::mutex mu;
  WarningHandler handler;
  std::set<std::string, std::less<>> warned;
};

Warnings& warnings() {
  static Warnings* w = new Warnings;  // usable from static destructors too
  return *w;
}

}  // namespace

WarningHandler set_warning_handler(WarningHandler handler) {
  Warnings& w = warnings();
  std::lock_guard lock(w.mu);
  return std::exchange(w.handler, std::move(handler));
}

void warn_once(std::string_view site, std::string message) {
  Warnings& w = warnings();
  WarningHandler handler;
  {
    std::lock_guard lock(w.mu);
    if (!w.warned.emplace(site).second) return;
    handler = w.handler;
  }
  Warning warning{std::string(site), std::move(message)};
  if (handler)
    handler(warning);  // outside the lock: a handler may warn or throw
  else
    std::fprintf(stderr, "kiln: warning: %s\n", warning.message.c_str());
}

void reset_warnings() {
  Warnings& w = warnings();
  std::lock_guard lock(w.mu);
  w.warned.clear();
}

}  // namespace kiln
