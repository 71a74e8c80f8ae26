// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// dlqctl: the operator's command line for dlq dead-letter queues. See commands.hpp for the
// commands and exit codes, open_store.hpp for the stores, `dlqctl --help` for usage.
//
// Ctrl-C (or SIGTERM) during a replay sets a flag the replay checks between batches: it
// stops cleanly, reports what it moved, and exits 130 — nothing is lost. During the
// --transform-cmd of an edited replay the same flag kills the command's process group and
// nothing is replayed (exit 130). A second Ctrl-C ends dlqctl at once (still safe: every
// batch moves atomically, and a transform's input is a pipe, never a file left behind).
// Elsewhere Ctrl-C ends it at once.
#include <atomic>
#include <csignal>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "commands.hpp"
#include "open_store.hpp"
#if DLQCTL_WITH_REDIS
#include "doctor.hpp"
#endif
#if DLQCTL_WITH_HTTP
#include "serve.hpp"
#endif

namespace {

std::atomic<bool> g_cancel{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGINT flag must be lock-free");

extern "C" void on_interrupt(int) {
  g_cancel.store(true);
  static const char msg[] = "\ndlqctl: stopping cleanly (Ctrl-C again to quit at once)\n";
  const ssize_t n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)n;
}

// Arms (true) or disarms (false) the Ctrl-C / SIGTERM handler. The handler resets itself
// (SA_RESETHAND), so a second signal has the default effect: dlqctl ends at once.
void trap_interrupts(bool on) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  if (on) {
    sa.sa_handler = on_interrupt;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;  // SA_RESTART: a store call in flight goes on
  } else {
    sa.sa_handler = SIG_DFL;
  }
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  dlqctl::Io io(std::cin, std::cout, std::cerr);
  io.in_is_tty = ::isatty(STDIN_FILENO) == 1;
  io.err_is_tty = ::isatty(STDERR_FILENO) == 1;
  io.cancel = &g_cancel;
  io.trap_interrupts = trap_interrupts;
#if DLQCTL_WITH_REDIS
  io.doctor = dlqctl::doctor::run;
#endif
#if DLQCTL_WITH_POSTGRES
  io.migrate = dlqctl::migrate_postgres;
#endif
#if DLQCTL_WITH_HTTP
  if (dlqctl::is_serve(args)) return dlqctl::serve(args, io, dlqctl::open_store);
#endif
  const int code = dlqctl::run(args, io, dlqctl::open_store);
  std::cout.flush();
  return code;
}
