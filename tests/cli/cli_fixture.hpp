// Runs dlqctl's command layer in-process over a dlq::MemoryStorage the test owns, with a
// fake clock and sleep, and captures stdout, stderr and the exit code.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <dlq/dlq.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "store.hpp"

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;

  /// stdout split into lines (without the newlines).
  std::vector<std::string> lines() const {
    std::vector<std::string> v;
    std::istringstream s(out);
    for (std::string l; std::getline(s, l);)
      v.push_back(l);
    return v;
  }
  /// stdout as JSON Lines.
  std::vector<nlohmann::json> json_lines() const {
    std::vector<nlohmann::json> v;
    for (const auto& l : lines())
      v.push_back(nlohmann::json::parse(l));
    return v;
  }
};

struct CliFixture {
  dlq::MemoryStorage storage;
  std::chrono::system_clock::time_point now =
      std::chrono::system_clock::time_point(std::chrono::seconds(1796009539));
  std::chrono::nanoseconds slept{0};
  std::atomic<bool> cancel{false};
  std::function<void()> on_sleep;       // runs at every (fake) sleep of a paced replay
  std::function<void()> on_open;        // runs when the command opens the store (may throw)
  std::vector<bool> traps;              // every trap_interrupts(on) call
  dlqctl::StoreSettings last_settings;  // what the command line asked to open
  std::function<std::string(std::string_view)> destination;  // Store::destination, if set
  std::function<std::optional<dlqctl::Store::OtherLayout>()> other_layout;  // likewise
  bool opened = false;

  dlq::Options options() {
    dlq::Options o;
    o.clock = [this] { return now; };
    o.sleep = [this](std::chrono::nanoseconds d) {
      slept += d;
      now += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
      if (on_sleep) on_sleep();
    };
    return o;
  }

  /// A front end over the same storage, for arranging and checking.
  dlq::DeadLetterQueue<dlq::MemoryStorage&> dlq() {
    return dlq::DeadLetterQueue<dlq::MemoryStorage&>(storage, options());
  }

  CliResult run(std::vector<std::string> args, const std::string& stdin_bytes = {},
                bool stdin_tty = false, bool stderr_tty = false) {
    std::istringstream in(stdin_bytes);
    std::ostringstream out, err;
    dlqctl::Io io(in, out, err);
    io.in_is_tty = stdin_tty;
    io.err_is_tty = stderr_tty;
    io.cancel = &cancel;
    io.trap_interrupts = [this](bool on) { traps.push_back(on); };
    io.progress_delay = std::chrono::milliseconds(0);
    opened = false;
    const dlqctl::Opener open =
        [this](const dlqctl::StoreSettings& s) -> std::unique_ptr<dlqctl::Store> {
      last_settings = s;
      opened = true;
      if (on_open) on_open();
      dlq::Options o = options();
      o.actor = s.actor;
      auto store = std::make_unique<dlqctl::DlqStore<dlq::MemoryStorage&>>(
          "memory", storage, std::move(o),
          [this](std::string_view q) -> std::optional<std::size_t> {
            return storage.source_size(q);
          });
      if (destination) store->set_destination(destination);
      if (other_layout) store->set_other_layout(other_layout);
      return store;
    };
    CliResult r;
    r.code = dlqctl::run(args, io, open);
    r.out = out.str();
    r.err = err.str();
    return r;
  }
};
