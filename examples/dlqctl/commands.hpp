// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlqctl/commands.hpp
/// The dlqctl command layer: the command line (CLI11), every command, output and exit codes.
/// It runs against any dlqctl::Store, so the unit tests drive it over dlq::MemoryStorage and
/// the binary over Redis or SQLite (see open_store.hpp).
///
/// Exit codes: 0 success; 1 bad usage or input; 2 the store failed (unreachable, timed out,
/// refused a command); 3 not found (an id, or nothing to act on); 4 `doctor` found a problem
/// (an ERROR, or a WARN with --strict); 130 a replay interrupted by Ctrl-C (it stopped
/// between batches, nothing lost). Errors are one line on stderr:
/// `dlqctl <command>: <what failed, where>; <what to try>`.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iostream>
#include <istream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <dlq/dlq.hpp>
#include <dlq/metrics/prometheus.hpp>
#include <dlq/redis/options.hpp>  // which store URLs are Redis ones (I/O-free)
#include <nlohmann/json.hpp>

#include "doctor_rules.hpp"
#include "format.hpp"
#include "ops_commands.hpp"
#include "store.hpp"

namespace dlqctl {

/// Exit codes of dlqctl.
enum exit_code : int {
  exit_ok = 0,            ///< success
  exit_usage = 1,         ///< bad usage or input
  exit_store = 2,         ///< the store is unreachable, timed out or refused the command
  exit_not_found = 3,     ///< an id (or the thing to act on) does not exist
  exit_doctor = 4,        ///< `doctor` found an ERROR (or a WARN with --strict)
  exit_interrupted = 130  ///< a replay stopped by Ctrl-C between batches (nothing lost)
};

static_assert(exit_doctor == doctor::exit_doctor_problem, "doctor_rules.hpp's exit code");

/// The process around a run: streams, terminals, Ctrl-C.
struct Io {
  Io(std::istream& in_, std::ostream& out_, std::ostream& err_) : in(in_), out(out_), err(err_) {}

  std::istream& in;         ///< the payload of `send` when --payload is absent
  std::ostream& out;        ///< results
  std::ostream& err;        ///< errors, reports, the progress bar
  bool in_is_tty = false;   ///< stdin is a terminal (send then needs --payload)
  bool err_is_tty = false;  ///< stderr is a terminal (the progress bar is drawn only then)
  /// Set (by a SIGINT handler) to stop a replay between batches; nullptr = cannot be set.
  const std::atomic<bool>* cancel = nullptr;
  /// Called with true before a replay starts and false after it: the binary arms its Ctrl-C
  /// handler only while a replay runs (elsewhere Ctrl-C ends dlqctl at once). May be empty.
  std::function<void(bool)> trap_interrupts;
  /// Runs `dlqctl doctor` (doctor.hpp; set by the binary when built with Redis): prints the
  /// report on the stream, returns 0 or exit_doctor. Empty: doctor says it is not built.
  std::function<int(const doctor::Request&, std::ostream&)> doctor;
  /// Runs `dlqctl migrate` (open_store.hpp's migrate_postgres; set by the binary when built
  /// with PostgreSQL): prints the schema version left. Empty: migrate says it is not built.
  std::function<int(const StoreSettings&, std::ostream&)> migrate;
  /// A replay must run this long before its progress bar appears.
  std::chrono::milliseconds progress_delay{500};
};

namespace detail {

/// One line: newlines of a message become spaces.
inline std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

inline std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

/// "3h ago" for a stored timestamp, or "" when it does not parse.
inline std::string age(const dlq::Entry& e) {
  if (!e.dead_lettered_time) return {};
  return short_duration(std::chrono::system_clock::now() - *e.dead_lettered_time) + " ago";
}

/// The payload bytes (the raw bytes of an unreadable entry); escape before printing.
inline const std::string& payload_bytes(const dlq::Entry& e) {
  return e.ok() ? e.payload : e.raw;
}

/// Every argument of every command (CLI11 writes into these).
struct Args {
  std::vector<std::string> command_line;  ///< as given, without the program name
  StoreSettings store;
  std::string timeout = "5s";
  std::string audit_max_age = "90d";
  std::string queue;
  std::vector<std::string> ids;
  std::string id;
  bool json = false;
  std::size_t start = 0;
  std::size_t count = 10;
  bool corrupt = false;
  bool yes = false;
  // send
  std::string error;
  std::int64_t attempt = 1;
  std::string worker;
  std::string payload;
  bool payload_given = false;
  bool lines = false;
  std::string error_type;
  std::string job_id;
  std::string context;
  // replay
  bool all = false;
  std::size_t replay_count = 0;
  std::string to;
  std::string error_contains;
  std::string older_than;
  double rate = 0;
  bool dry_run = false;
  bool keep_corrupt = false;
  // errors
  std::string by = "error";
  std::size_t max_examined = 0;
  // stats, metrics
  std::vector<std::string> queue_names;
  // trim
  std::string max_age;
  std::size_t max_length = 0;
  // search, discard, audit, edited replay (ops_commands.hpp)
  OpsArgs ops;
  // doctor (doctor_rules.hpp, doctor.hpp)
  std::string doctor_url;  ///< its URL argument (default: --store)
  doctor::Request doctor;
};

/// Runs one command once the command line is parsed.
class Commands {
 public:
  Commands(Io& io, const Opener& open, const Args& args, std::string command)
      : io_(io), open_(open), a_(args), command_(std::move(command)) {}

  int run() {
    if (command_ == "send") return send();
    if (command_ == "count") return count();
    if (command_ == "peek") return peek();
    if (command_ == "show") return show();
    if (command_ == "replay") return replay();
    if (command_ == "delete") return remove();
    if (command_ == "purge") return purge();
    if (command_ == "queues") return queues();
    if (command_ == "recover") return recover();
    if (command_ == "trim") return trim();
    if (command_ == "errors") return errors();
    if (command_ == "stats") return stats();
    if (command_ == "metrics") return metrics();
    if (command_ == "corrupt") return corrupt();
    if (command_ == "search") return ops_search(io_, store(), a_);
    if (command_ == "discard") return ops_discard(io_, store(), a_);
    if (command_ == "audit") return ops_audit(io_, store(), a_);
    throw usage_error("unknown command '" + command_ + "'");
  }

 private:
  Store& store() {
    if (!store_) store_ = open_(a_.store);
    return *store_;
  }

  // Prints `what` as this command's error line and returns `code`.
  int fail(int code, const std::string& what) {
    io_.err << "dlqctl " << command_ << ": " << one_line(what) << '\n';
    return code;
  }

  // `queue` has no dead letters: say so on stderr (stdout stays what scripts read) and name
  // the queues that have some, or the key layout where they are.
  void say_empty(const char* command) {
    Store& s = store();
    const auto names = s.queues();
    io_.err << "dlqctl " << command << ": no dead letters in '" << printable(a_.queue) << "' ("
            << s.where() << ")";
    if (!names.empty()) {
      std::string list;
      for (std::size_t i = 0; i < names.size() && i < 10; ++i)
        list += (i == 0 ? "" : ", ") + printable(names[i]);
      if (names.size() > 10) list += ", … (" + std::to_string(names.size()) + " in all)";
      io_.err << "; queues that have some: " << list << '\n';
      return;
    }
    io_.err << "; no queue has any\n";
    hint_other_layout(command);
  }

  // No queue in the configured key layout: if another known layout has some, say which
  // flags read it.
  void hint_other_layout(const char* command) {
    const auto other = store().other_layout();
    if (!other) return;
    std::string list;
    for (std::size_t i = 0; i < other->queues.size() && i < 10; ++i)
      list += (i == 0 ? "" : ", ") + printable(other->queues[i]);
    io_.err << "dlqctl " << command << ": no queue in the configured key layout, but "
            << other->queues.size() << (other->queues.size() == 1 ? " queue" : " queues") << " in "
            << other->name << " (" << list << "); read them with: " << other->flags << '\n';
  }

  int send() {
    if (a_.error.empty())
      throw usage_error("--error is empty; say what went wrong, e.g. --error 'payment timeout'");
    dlq::Failure f;
    f.error = a_.error;
    f.attempt = a_.attempt;
    f.worker = a_.worker;
    f.error_type = a_.error_type;
    f.job_id = a_.job_id;
    if (!a_.context.empty()) {
      f.context = nlohmann::json::parse(a_.context, nullptr, false);
      if (f.context.is_discarded() || !f.context.is_object())
        throw usage_error(
            "--context must be a JSON object, e.g. --context '{\"gateway\":\"adyen\"}'");
    }
    if (a_.lines) return send_lines(f);
    std::string payload;
    if (a_.payload_given) {
      payload = a_.payload;
    } else {
      if (io_.in_is_tty)
        throw usage_error(
            "no payload: pass --payload TEXT, or pipe the payload in (dlqctl send orders "
            "--error E < job.json)");
      payload.assign(std::istreambuf_iterator<char>(io_.in), std::istreambuf_iterator<char>());
    }
    io_.out << store().send(a_.queue, payload, f) << '\n';
    return exit_ok;
  }

  // send --lines: every non-empty line of stdin is one payload; stored in batches of 1000
  // (one storage call each); prints one id per line.
  int send_lines(const dlq::Failure& f) {
    if (a_.payload_given)
      throw usage_error("--lines reads the payloads from stdin; drop --payload");
    if (io_.in_is_tty)
      throw usage_error("--lines reads one payload per line from stdin; pipe them in");
    if (!f.job_id.empty())
      throw usage_error("--job-id names one job; it cannot go with --lines (many jobs)");
    std::vector<dlq::FailedJob> batch;
    auto flush = [&] {
      for (const auto& id : store().send_batch(batch))
        io_.out << id << '\n';
      batch.clear();
    };
    for (std::string line; std::getline(io_.in, line);) {
      if (line.empty()) continue;
      batch.push_back(dlq::FailedJob{a_.queue, std::move(line), f});
      if (batch.size() == 1000) flush();
    }
    if (!batch.empty()) flush();
    return exit_ok;
  }

  int count() {
    const std::size_t n = a_.corrupt ? store().corrupt_size(a_.queue) : store().size(a_.queue);
    if (a_.json) {
      nlohmann::ordered_json j;
      j["queue"] = a_.queue;
      j[a_.corrupt ? "corrupt" : "dead"] = n;
      io_.out << dump(j) << '\n';
    } else {
      io_.out << n << '\n';
    }
    if (n == 0 && !a_.corrupt) say_empty("count");
    return exit_ok;
  }

  int peek() {
    const auto entries = store().peek(a_.queue, a_.start, a_.count);
    if (a_.json) {
      for (const auto& e : entries)
        io_.out << dump(e.to_json()) << '\n';
      return exit_ok;
    }
    Table t({{"POS", 0, true},
             {"ID", 40},
             {"DEAD-LETTERED (UTC)", 19},
             {"ATT", 0, true},
             {"WORKER", 16},
             {"ERROR", 40},
             {"PAYLOAD", 60}});
    std::size_t pos = a_.start;
    for (const auto& e : entries) {
      if (e.ok()) {
        t.add({std::to_string(pos), e.id, short_time(e.dead_lettered_at), std::to_string(e.attempt),
               e.worker, e.error, payload_bytes(e)});
      } else {
        t.add({std::to_string(pos), e.id, "", "", "", "(unreadable: " + e.problem + ")",
               payload_bytes(e)});
      }
      ++pos;
    }
    t.print(io_.out);
    const std::size_t total = store().size(a_.queue);
    if (entries.empty()) {
      io_.out << "(no entries at " << a_.start << "; '" << printable(a_.queue) << "' has " << total
              << ")\n";
      if (total == 0) say_empty("peek");
    } else {
      io_.out << "(" << a_.start + 1 << "-" << a_.start + entries.size() << " of " << total;
      if (a_.start + entries.size() < total)
        io_.out << "; more with --start " << a_.start + entries.size();
      io_.out << ")\n";
    }
    return exit_ok;
  }

  int not_found(const std::string& id) {
    return fail(exit_not_found, "no entry with id '" + printable(id) +
                                    "' in the dead letters of '" + printable(a_.queue) + "' (" +
                                    store().where() + "); list the ids with: dlqctl peek " +
                                    printable(a_.queue));
  }

  int show() {
    auto e = store().get(a_.queue, a_.id);
    if (!e) return not_found(a_.id);
    if (a_.json) {
      io_.out << dump(e->to_json()) << '\n';
      return exit_ok;
    }
    auto line = [&](const char* name, const std::string& value) {
      io_.out << name << std::string(18 - std::string_view(name).size(), ' ') << value << '\n';
    };
    line("id", printable(e->id) + (e->id_derived ? "  (derived from the bytes)" : ""));
    if (!e->ok()) {
      line("problem", e->problem);
      line("raw", printable(e->raw) + "  (" + std::to_string(e->raw.size()) + " bytes)");
      return exit_ok;
    }
    line("queue", printable(e->queue));
    const std::string ago = age(*e);
    line("dead_lettered_at",
         printable(e->dead_lettered_at) + (ago.empty() ? "" : "  (" + ago + ")"));
    line("error", printable(e->error));
    if (!e->error_type.empty()) line("error_type", printable(e->error_type));
    line("attempt", std::to_string(e->attempt));
    line("worker", printable(e->worker));
    if (!e->job_id.empty()) line("job_id", printable(e->job_id));
    if (!e->context.is_null())
      line("context",
           printable(e->context.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    if (e->dead_letter_count > 0) line("dead_letters", std::to_string(e->dead_letter_count));
    if (e->parked) line("parked", "yes (replay it with --id)");
    const bool binary = e->payload_encoding == dlq::PayloadEncoding::base64;
    line("payload", std::to_string(e->payload.size()) + " bytes, " +
                        (binary ? "not JSON (stored as base64; shown escaped)" : "JSON"));
    io_.out << printable(payload_bytes(*e)) << '\n';
    return exit_ok;
  }

  int replay() {
    if (!a_.ops.set_payload.empty() || !a_.ops.transform_cmd.empty() ||
        !a_.ops.transform_timeout.empty())
      return ops_replay_edited(io_, store(), a_);
    dlq::ReplayOptions o = replay_options();
    Store& s = store();
    ProgressBar bar(io_.err, io_.err_is_tty, io_.progress_delay, "replay " + printable(a_.queue));
    o.on_progress = [&bar](const dlq::ReplayProgress& p) {
      bar.update(p.examined, p.examined + p.remaining, p.replayed);
    };
    struct trap {
      Io& io;
      explicit trap(Io& i) : io(i) {
        if (io.trap_interrupts) io.trap_interrupts(true);
      }
      ~trap() {
        if (io.trap_interrupts) io.trap_interrupts(false);
      }
    };
    dlq::ReplayReport r;
    {
      trap armed(io_);
      r = s.replay(a_.queue, o);
    }
    bar.finish();
    return replay_outcome(r, s);
  }

  // The options of `dlqctl replay` (without an edit), checked.
  // The selection: --all, --count N or --id, each narrowed by the filters (search's and
  // discard's grammar, filter_of), or the filters alone: every entry they match.
  dlq::ReplayOptions replay_options() const {
    dlq::ReplayOptions o;
    static_cast<dlq::Filter&>(o) = filter_of(a_);
    check_selection(o, a_.all, a_.replay_count, "replay");
    o.limit = a_.replay_count;
    o.to_queue = a_.to;
    if (a_.rate < 0) throw usage_error("--rate must be 0 (no limit) or more entries per second");
    o.rate = a_.rate;
    o.dry_run = a_.dry_run;
    o.set_aside_corrupt = !a_.keep_corrupt;
    o.cancel = io_.cancel;
    return o;
  }

  // What `dlqctl replay` did: the summary on stderr, the count (or --json) on stdout, and
  // the exit code.
  int replay_outcome(const dlq::ReplayReport& r, Store& s) {
    const std::string dest = printable(a_.to.empty() ? a_.queue : a_.to);
    std::size_t corrupt = 0, parked = 0;
    std::vector<std::string> missing;
    for (const auto& k : r.skipped) {
      if (k.reason == dlq::SkipReason::corrupt) ++corrupt;
      if (k.reason == dlq::SkipReason::parked) ++parked;
      if (k.reason == dlq::SkipReason::not_found) missing.push_back(k.id);
    }
    io_.err << (r.dry_run ? "dry run: would replay " : "replayed ") << r.replayed << " of "
            << r.examined << " entries examined in '" << printable(a_.queue) << "' to '" << dest
            << "'";
    if (r.examined > r.replayed + r.set_aside)
      io_.err << "; " << r.examined - r.replayed - r.set_aside << " left in place";
    io_.err << " (" << r.batches << (r.batches == 1 ? " batch" : " batches") << ")\n";
    const std::string destination = s.destination(a_.to.empty() ? a_.queue : a_.to);
    if (!destination.empty() && r.replayed > 0)
      io_.err << (r.dry_run ? "they would go to " : "they went to ") << destination << '\n';
    if (r.examined == 0) say_empty("replay");
    if (corrupt > 0) {
      io_.err << (r.dry_run         ? "dry run: would set aside "
                  : a_.keep_corrupt ? "left "
                                    : "set aside ")
              << corrupt << " unreadable " << (corrupt == 1 ? "entry" : "entries")
              << (a_.keep_corrupt ? " in place" : " to the corrupt list")
              << "; inspect with: dlqctl corrupt " << printable(a_.queue) << '\n';
    }
    if (parked > 0)
      io_.err << "passed over " << parked << " parked " << (parked == 1 ? "entry" : "entries")
              << "; replay them by id with --id\n";
    int code = exit_ok;
    if (r.cancelled) {
      io_.err << "dlqctl replay: interrupted; stopped between batches after " << r.replayed
              << " replayed, " << s.size(a_.queue)
              << " still in the dead letters; nothing was lost, run the replay again to go on\n";
      code = exit_interrupted;
    }
    if (!missing.empty()) {
      std::string list;
      for (const auto& m : missing)
        list += (list.empty() ? "'" : ", '") + printable(m) + "'";
      fail(exit_not_found, "no entry with id " + list + " in the dead letters of '" +
                               printable(a_.queue) + "'; list the ids with: dlqctl peek " +
                               printable(a_.queue));
      if (code == exit_ok) code = exit_not_found;
    }
    if (!a_.json) {
      io_.out << r.replayed << '\n';
      return code;
    }
    nlohmann::ordered_json j;
    j["queue"] = a_.queue;
    j["to"] = a_.to.empty() ? a_.queue : a_.to;
    j["destination"] = destination;
    j["dry_run"] = r.dry_run;
    j["examined"] = r.examined;
    j["replayed"] = r.replayed;
    j["set_aside"] = r.set_aside;
    j["left_in_place"] = r.examined - std::min(r.examined, r.replayed + r.set_aside);
    j["batches"] = r.batches;
    j["corrupt"] = corrupt;
    j["parked"] = parked;
    j["not_found"] = missing;
    j["cancelled"] = r.cancelled;
    io_.out << dump(j) << '\n';
    return code;
  }

  int remove() {  // one scan and one audit record for all the ids
    const dlq::RemoveReport done = store().remove_ids(a_.queue, a_.ids);
    io_.out << done.removed.size() << '\n';
    for (const auto& id : done.not_found)
      not_found(id);
    return done.not_found.empty() ? exit_ok : exit_not_found;
  }

  int purge() {
    if (!a_.yes) {
      const std::size_t n = a_.corrupt ? store().corrupt_size(a_.queue) : store().size(a_.queue);
      throw usage_error("purge deletes all " + std::to_string(n) + " " +
                        (a_.corrupt ? "corrupt items" : "dead letters") + " of '" +
                        printable(a_.queue) + "' for good; add --yes to do it");
    }
    io_.out << (a_.corrupt ? store().purge_corrupt(a_.queue) : store().purge(a_.queue)) << '\n';
    return exit_ok;
  }

  // Lists every queue with its depths. A queue whose keys cannot be read (e.g. a Redis key
  // of another type under the same pattern) is listed with the reason instead of failing
  // the whole listing; the other errors (store unreachable) fail it as usual.
  int queues() {
    Store& s = store();
    const dlq::QueueNames found = s.list_queues();
    const std::vector<std::string>& names = found.names;
    std::map<std::string, std::size_t> depth;
    try {
      depth = s.summary(names);  // one round trip
    } catch (const dlq::reply_error&) {
      // one of them is unreadable: ask each below
    }
    Table t({{"QUEUE", 48}, {"DEAD", 0, true}, {"CORRUPT", 0, true}, {"WAITING", 0, true}});
    std::size_t unreadable = 0;
    for (const auto& q : names) {
      std::size_t dead = 0, corrupt_n = 0;
      std::optional<std::size_t> waiting;
      std::string problem;
      try {
        const auto it = depth.find(q);
        dead = it != depth.end() ? it->second : s.size(q);
        corrupt_n = s.corrupt_size(q);
        waiting = s.waiting(q);
      } catch (const dlq::reply_error& e) {
        problem = one_line(e.what());
        ++unreadable;
      }
      if (a_.json) {
        nlohmann::ordered_json j;
        j["queue"] = q;
        if (!problem.empty()) {
          j["error"] = problem;
        } else {
          j["dead"] = dead;
          j["corrupt"] = corrupt_n;
          if (waiting) j["waiting"] = *waiting;
        }
        io_.out << dump(j) << '\n';
      } else if (!problem.empty()) {
        t.add({q, "?", "?", "?"});
      } else {
        t.add({q, std::to_string(dead), std::to_string(corrupt_n),
               waiting ? std::to_string(*waiting) : "-"});
      }
    }
    if (!a_.json) {
      t.print(io_.out);
      if (names.empty()) io_.out << "(no dead letters in " << s.where() << ")\n";
    }
    if (names.empty()) hint_other_layout("queues");
    if (unreadable > 0)
      io_.err << "dlqctl queues: " << unreadable << (unreadable == 1 ? " queue" : " queues")
              << " could not be read (shown with ?; --json says why)\n";
    say_skipped("queues", found);
    return exit_ok;
  }

  // Names the listing left out (dlq refuses them, see dlq/queue_names.hpp): said on stderr,
  // so that stdout stays what scripts read.
  void say_skipped(const char* command, const dlq::QueueNames& found) {
    if (found.skipped.empty()) return;
    std::string list;
    for (std::size_t i = 0; i < found.skipped.size() && i < 5; ++i)
      list += (i == 0 ? "" : ", ") + printable_cut(found.skipped[i]);
    if (found.skipped.size() > 5) list += ", …";
    const std::size_t n = found.skipped.size();
    io_.err << "dlqctl " << command << ": " << n << (n == 1 ? " queue name" : " queue names")
            << " skipped (" << list
            << "): dlq refuses such names (empty, a NUL byte, over 1024 bytes) or cannot read "
               "their lists (a key of another type), so they are keys of another program; look at "
               "them with "
               "redis-cli\n";
  }

  int recover() {
    io_.out << store().recover(a_.queue) << '\n';
    return exit_ok;
  }

  int trim() {
    dlq::Retention r;
    r.max_length = a_.max_length;
    if (!a_.max_age.empty())
      r.max_age = std::chrono::duration_cast<std::chrono::seconds>(parse_duration(a_.max_age));
    if (a_.max_age.empty() && a_.max_length == 0)
      throw usage_error("say what to keep with --max-age DURATION and/or --max-length N");
    if (!a_.max_age.empty() && r.max_age.count() <= 0)
      throw usage_error("--max-age must be at least 1s");
    if (!a_.yes)
      throw usage_error("trim deletes the dead letters of '" + printable(a_.queue) +
                        "' beyond that for good; add --yes to do it");
    const dlq::TrimReport t = store().trim(a_.queue, r);
    io_.err << "trimmed '" << printable(a_.queue) << "': " << t.evicted_for_age << " older than "
            << (a_.max_age.empty() ? "-" : a_.max_age) << ", " << t.evicted_for_length
            << " beyond the newest " << (a_.max_length ? std::to_string(a_.max_length) : "-")
            << "; " << store().size(a_.queue) << " left\n";
    io_.out << t.evicted() << '\n';
    return exit_ok;
  }

  // Groups through the library (dlq::DeadLetterQueue::errors): one scan in windows of 1000,
  // a progress bar on a terminal, Ctrl-C stops it between windows (the groups so far are
  // printed, marked as a sample).
  int errors() {
    if (a_.by != "error" && a_.by != "error_type" && a_.by != "worker")
      throw usage_error("--by takes error, error_type or worker (not '" + printable(a_.by) + "')");
    dlq::ErrorsOptions o;
    o.by_worker = a_.by == "worker";
    o.max_examined = a_.max_examined;
    o.cancel = io_.cancel;
    ProgressBar bar(io_.err, io_.err_is_tty, io_.progress_delay, "errors " + printable(a_.queue));
    o.on_progress = [&bar](const dlq::ErrorsProgress& p) {
      bar.update(p.examined, std::max(p.depth, p.examined), p.examined);
    };
    if (io_.trap_interrupts) io_.trap_interrupts(true);
    dlq::ErrorsReport r;
    try {
      r = store().errors(a_.queue, o);
    } catch (...) {
      if (io_.trap_interrupts) io_.trap_interrupts(false);
      throw;
    }
    if (io_.trap_interrupts) io_.trap_interrupts(false);
    bar.finish();
    const auto& groups = a_.by == "error"        ? r.by_error
                         : a_.by == "error_type" ? r.by_error_type
                                                 : r.by_worker;
    auto key_of = [](const dlq::ErrorGroup& g) {
      return g.readable ? g.key : "(unreadable: " + g.key + ")";
    };
    auto time_of = [](const std::optional<std::chrono::system_clock::time_point>& t) {
      return t ? dlq::detail::iso_time::format(*t) : std::string();
    };
    if (a_.json) {
      for (const auto& g : groups) {
        nlohmann::ordered_json j;
        j[a_.by] = key_of(g);
        j["count"] = g.count;
        j["first_dead_lettered_at"] = time_of(g.oldest);
        j["last_dead_lettered_at"] = time_of(g.newest);
        j["untimed"] = g.untimed;
        j["max_attempt"] = g.max_attempt;
        j["example_id"] = g.example_id;
        io_.out << dump(j) << '\n';
      }
    } else {
      std::string header = a_.by;
      std::transform(header.begin(), header.end(), header.begin(),
                     [](char c) { return c == '_' ? ' ' : static_cast<char>(c - 'a' + 'A'); });
      Table t({{"COUNT", 0, true},
               {header, 60},
               {"FIRST (UTC)", 19},
               {"LAST (UTC)", 19},
               {"EXAMPLE ID", 40}});
      for (const auto& g : groups) {
        const std::string key = key_of(g);
        t.add({std::to_string(g.count), key.empty() ? "(none)" : key, short_time(time_of(g.oldest)),
               short_time(time_of(g.newest)), g.example_id});
      }
      t.print(io_.out);
      io_.out << "(" << r.examined << (r.examined == 1 ? " entry" : " entries") << " in '"
              << printable(a_.queue) << "', " << groups.size()
              << (groups.size() == 1 ? " group" : " groups") << ")\n";
    }
    if (!r.exact) {
      std::string why = r.cancelled ? "interrupted"
                        : r.changed ? "the list changed during the scan (a replay or trim ran)"
                                    : "stopped at --max " + std::to_string(a_.max_examined);
      io_.err << "dlqctl errors: the counts are a sample of " << r.examined << " of about "
              << std::max(r.depth_at_start, r.examined) << " entries (" << why << ")\n";
    }
    return r.cancelled ? exit_interrupted : exit_ok;
  }

  // The queues named on the command line, else every queue with dead letters (names dlq
  // refuses are then in `skipped`).
  dlq::QueueNames chosen_queues() {
    if (a_.queue_names.empty()) return store().list_queues();
    return dlq::QueueNames{a_.queue_names, {}};
  }

  // The stats of the queues found (dlq::listed_stats: a queue a key of another type makes
  // unreadable is skipped) or of the queues named (their errors are the command's).
  std::vector<dlq::QueueStats> listed_stats(dlq::QueueNames& found) {
    if (!a_.queue_names.empty()) return store().stats(found.names);
    return dlq::listed_stats(found, [this](const auto& names) { return store().stats(names); });
  }

  // Depths and ages in one call per store (dlq::DeadLetterQueue::stats).
  int stats() {
    dlq::QueueNames found = chosen_queues();
    const auto all = listed_stats(found);
    say_skipped("stats", found);
    auto time_of = [](const std::optional<std::chrono::system_clock::time_point>& t) {
      return t ? dlq::detail::iso_time::format(*t) : std::string();
    };
    if (a_.json) {
      for (const auto& s : all) {
        nlohmann::ordered_json j;
        j["queue"] = s.queue;
        j["dead"] = s.dead.depth;
        j["corrupt"] = s.corrupt.depth;
        j["oldest_dead_lettered_at"] =
            s.dead.oldest ? nlohmann::ordered_json(time_of(s.dead.oldest)) : nullptr;
        j["newest_dead_lettered_at"] =
            s.dead.newest ? nlohmann::ordered_json(time_of(s.dead.newest)) : nullptr;
        const auto age = s.oldest_age();
        j["oldest_age_seconds"] =
            age ? nlohmann::ordered_json(std::chrono::duration<double>(*age).count()) : nullptr;
        j["oldest_untimed"] = s.dead.oldest_untimed;
        j["newest_untimed"] = s.dead.newest_untimed;
        io_.out << dump(j) << '\n';
      }
      return exit_ok;
    }
    auto end_text = [&](const dlq::ListStats& l,
                        const std::optional<std::chrono::system_clock::time_point>& t,
                        bool untimed) {
      if (l.depth == 0) return std::string("-");
      if (untimed || !t) return std::string("(no time)");
      return short_time(time_of(t));
    };
    Table t({{"QUEUE", 40},
             {"DEAD", 0, true},
             {"CORRUPT", 0, true},
             {"OLDEST (UTC)", 19},
             {"NEWEST (UTC)", 19},
             {"AGE", 0, true}});
    for (const auto& s : all) {
      const auto age = s.oldest_age();
      t.add({s.queue, std::to_string(s.dead.depth), std::to_string(s.corrupt.depth),
             end_text(s.dead, s.dead.oldest, s.dead.oldest_untimed),
             end_text(s.dead, s.dead.newest, s.dead.newest_untimed),
             age ? short_duration(*age) : "-"});
    }
    t.print(io_.out);
    if (all.empty()) io_.out << "(no dead letters in " << store().where() << ")\n";
    return exit_ok;
  }

  // The Prometheus text exposition of the stats (gauges only: dlqctl's own counters would
  // count only this run), for a node-exporter textfile collector or a cron job.
  int metrics() {
    dlq::metrics::PrometheusOptions o;
    o.counters = false;
    dlq::QueueNames found = chosen_queues();
    std::string text = dlq::metrics::prometheus_text(listed_stats(found), o);
    if (a_.queue_names.empty()) dlq::metrics::write_skipped_queues(text, found.skipped.size(), o);
    io_.out << text;
    say_skipped("metrics", found);
    return exit_ok;
  }

  int corrupt() {
    const auto items = store().corrupt(a_.queue, a_.start, a_.count);
    if (a_.json) {
      for (const auto& e : items)
        io_.out << dump(e.to_json()) << '\n';
      return exit_ok;
    }
    Table t({{"POS", 0, true}, {"ID", 40}, {"PROBLEM", 50}, {"RAW", 70}});
    std::size_t pos = a_.start;
    for (const auto& e : items)
      t.add({std::to_string(pos++), e.id, e.ok() ? "(readable)" : e.problem, e.raw});
    t.print(io_.out);
    io_.out << "(" << store().corrupt_size(a_.queue) << " in the corrupt list of '"
            << printable(a_.queue) << "')\n";
    return exit_ok;
  }

  Io& io_;
  const Opener& open_;
  const Args& a_;
  std::string command_;
  std::unique_ptr<Store> store_;
};

}  // namespace detail

/// A CLI11 check for a count: digits only, and more than 0 when `positive` (CLI11's own
/// number checks print the range of a double, ~300 digits, for "abc").
inline CLI::Validator whole_number(bool positive) {
  return CLI::Validator(
      [positive](std::string& v) -> std::string {
        const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || v.size() > 18)
          return "'" + printable(v) + "' is not a whole number (" +
                 (positive ? "1, 2, 3" : "0, 1, 2") + ", …)";
        if (positive && v.find_first_not_of('0') == std::string::npos)
          return "must be 1 or more (not " + v + ")";
        return {};
      },
      positive ? "N>0" : "N>=0");
}

/// Registers --audit-max-age and --audit-max-records (global options of every command and of
/// `serve`): the audit trail's retention this process applies when it writes a record.
inline void add_audit_options(CLI::App& app, std::string& max_age, dlq::AuditRetention& retention) {
  app.add_option("--audit-max-age", max_age,
                 "the audit trail keeps records this long (0 = forever); every process that "
                 "writes it trims it: give the services' value")
      ->envname("DLQ_AUDIT_MAX_AGE")
      ->capture_default_str();
  app.add_option("--audit-max-records", retention.max_records,
                 "most audit records per queue, a bound on memory (0 = none); records it "
                 "removes before their max age are counted and marked")
      ->envname("DLQ_AUDIT_MAX_RECORDS")
      ->check(whole_number(false))
      ->capture_default_str();
}

/// The value of --audit-max-age. @throws usage_error for what is not a duration.
inline std::chrono::seconds audit_max_age(const std::string& text) {
  return std::chrono::duration_cast<std::chrono::seconds>(parse_duration(text));
}

/// The description shown by `dlqctl --help` and `--version`.
inline std::string description() {
  return "dlqctl: inspect and replay dead-letter queues (dlq " + std::to_string(DLQ_VERSION_MAJOR) +
         "." + std::to_string(DLQ_VERSION_MINOR) + "." + std::to_string(DLQ_VERSION_PATCH) + ")";
}

/// Adds dlqctl's global options to `app`: where the store is (--store, the Redis key
/// patterns, --timeout) and who operates (--actor). Declared once, here, for run() and
/// `dlqctl serve` (serve.hpp); is_serve() reads from it which of them take a value. Each
/// goes before the command or after it.
inline void add_global_options(CLI::App& app, StoreSettings& store, std::string& timeout,
                               std::string& audit_max_age) {
  app.add_option("--store", store.url, "where the dead letters are")
      ->envname("DLQ_STORE")
      ->capture_default_str();
  app.add_option("--dlq-key", store.dlq_key,
                 "Redis key pattern of dead-letter lists, * = queue (default dlq:{*}; the "
                 "Python seed: dlq:*)")
      ->envname("DLQ_DLQ_KEY");
  app.add_option("--queue-key", store.queue_key,
                 "Redis key pattern of source queues replay pushes to (default queue:{*}; the "
                 "Python seed: queue:*)")
      ->envname("DLQ_QUEUE_KEY");
  app.add_option("--corrupt-key", store.corrupt_key,
                 "Redis key pattern of corrupt lists (default dlq:{*}:corrupt)")
      ->envname("DLQ_CORRUPT_KEY");
  app.add_option("--actor", store.actor, "who operates, for the audit trail (default: the OS user)")
      ->envname("DLQ_ACTOR");
  app.add_option("--timeout", timeout,
                 "connect/command timeout (Redis), lock wait (SQLite): 500ms, 5s, 1m")
      ->envname("DLQ_TIMEOUT")
      ->capture_default_str();
  add_audit_options(app, audit_max_age, store.audit_retention);
}

/// True when `args` (the command line without the program name) runs `dlqctl serve`: its
/// first word that is neither an option nor the value of a global option is `serve`.
inline bool is_serve(const std::vector<std::string>& args) {
  StoreSettings store;
  std::string timeout;
  std::string audit_max_age;
  CLI::App globals;
  add_global_options(globals, store, timeout, audit_max_age);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 1 && a[0] == '-') {
      const CLI::Option* o = globals.get_option_no_throw(a);  // "--x=v" is none: one word
      if (o != nullptr && o->get_items_expected_min() > 0) ++i;
      continue;
    }
    return a == "serve";
  }
  return false;
}

namespace detail {

// The positional QUEUE argument of a command.
inline void add_queue_arg(Args& a, CLI::App* c) {
  c->add_option("queue", a.queue, "the source queue's name (e.g. orders)")->required();
}

// The commands send, count, peek and show; returns send's --payload option.
inline CLI::Option* add_entry_commands(CLI::App& app, Args& a) {
  auto* send = app.add_subcommand("send", "dead-letter one job by hand; prints the entry id");
  add_queue_arg(a, send);
  send->add_option("--error", a.error, "what went wrong")->required();
  send->add_option("--attempt", a.attempt, "attempts made")->capture_default_str();
  send->add_option("--worker", a.worker, "the worker that gave up");
  auto* payload_opt = send->add_option("--payload", a.payload,
                                       "the job's payload (default: read stdin, any bytes)");
  send->add_flag("--lines", a.lines,
                 "bulk: every line of stdin is one payload; prints one id per line");
  send->add_option("--error-type", a.error_type, "the kind of error, e.g. TimeoutError");
  send->add_option("--job-id", a.job_id, "the job's id");
  send->add_option("--context", a.context, "a JSON object of extra fields");

  auto* count = app.add_subcommand("count", "print the number of dead letters");
  add_queue_arg(a, count);
  count->add_flag("--corrupt", a.corrupt, "count the corrupt list instead");
  count->add_flag("--json", a.json, "JSON: {queue, dead} (or {queue, corrupt})");

  auto* peek = app.add_subcommand("peek", "list dead letters, oldest first, without removing");
  add_queue_arg(a, peek);
  peek->add_option("--start", a.start, "position of the first entry (0 = oldest)")
      ->check(whole_number(false))
      ->capture_default_str();
  peek->add_option("--count", a.count, "how many entries")
      ->check(whole_number(false))
      ->capture_default_str();
  peek->add_flag("--json", a.json, "JSON Lines: one stored entry (with its id) per line");

  auto* show = app.add_subcommand("show", "show one dead letter in full");
  add_queue_arg(a, show);
  show->add_option("id", a.id, "the entry id (see peek)")->required();
  show->add_flag("--json", a.json, "the stored entry as JSON");
  return payload_opt;
}

// The command replay (the edit options are added by add_ops_commands).
inline CLI::App* add_replay_command(CLI::App& app, Args& a) {
  auto* replay = app.add_subcommand(
      "replay", "move dead letters back to their queue; prints the number replayed last");
  add_queue_arg(a, replay);
  replay->add_flag("--all", a.all, "every entry present when the replay starts");
  replay->add_option("--count", a.replay_count, "at most N entries, oldest first")
      ->check(whole_number(true));
  add_filter_options(replay, a);  // search's and discard's (ops_commands.hpp): one grammar
  replay->add_option("--to", a.to, "replay to this queue instead of the source queue");
  replay->add_option("--rate", a.rate, "at most N entries per second (0 = no limit)")
      ->capture_default_str();
  replay->add_flag("--dry-run", a.dry_run, "report what would be replayed; move nothing");
  replay->add_flag("--keep-corrupt", a.keep_corrupt,
                   "leave unreadable entries in place (default: move them to the corrupt list)");
  replay->footer(
      "Where replayed jobs go: on redis:// the list --queue-key names (default queue:{QUEUE}); "
      "on sqlite:// the dlq::kv::JobQueue in the same file, jobs:{QUEUE}:ready (what "
      "JobQueue::take reads; an application with its own queue replays from its own code with "
      "its own sink). The report names the destination.\n" +
      app.get_footer());
  replay->add_flag("--json", a.json,
                   "print the report as one JSON object (queue, to, destination, examined, "
                   "replayed, set_aside, left_in_place, batches, corrupt, parked, not_found, "
                   "cancelled) instead of the number");
  return replay;
}

// The commands over a whole queue or the store: delete, purge, queues, recover, trim.
inline void add_store_commands(CLI::App& app, Args& a) {
  auto* del = app.add_subcommand("delete", "delete dead letters by id; prints the number deleted");
  add_queue_arg(a, del);
  del->add_option("id", a.ids, "entry ids")->required();

  auto* purge =
      app.add_subcommand("purge", "delete every dead letter of a queue; prints the number");
  add_queue_arg(a, purge);
  purge->add_flag("--yes", a.yes, "yes, delete them for good");
  purge->add_flag("--corrupt", a.corrupt, "purge the corrupt list instead");

  auto* queues =
      app.add_subcommand("queues", "list the queues that have dead letters, with depths");
  queues->add_flag("--json", a.json, "JSON Lines: {queue, dead, corrupt, waiting}");

  auto* recover = app.add_subcommand(
      "recover", "finish replays that were interrupted; prints the number of items fixed");
  add_queue_arg(a, recover);

  auto* trim = app.add_subcommand(
      "trim", "delete old dead letters now (retention); prints the number deleted");
  add_queue_arg(a, trim);
  trim->add_option("--max-age", a.max_age, "delete entries dead-lettered longer ago (30d, 12h)");
  trim->add_option("--max-length", a.max_length, "keep at most the newest N entries")
      ->check(whole_number(true));
  trim->add_flag("--yes", a.yes, "yes, delete them for good");
}

// The reports: errors, stats, metrics, corrupt.
inline void add_report_commands(CLI::App& app, Args& a) {
  auto* errors = app.add_subcommand(
      "errors", "dead letters grouped by error, most frequent first (reads every entry)");
  add_queue_arg(a, errors);
  errors->add_option("--by", a.by, "group by error, error_type or worker")->capture_default_str();
  errors->add_flag("--json", a.json, "JSON Lines: one group per line");
  errors
      ->add_option("--max", a.max_examined,
                   "read at most N entries (oldest first; the counts are then a sample)")
      ->check(CLI::PositiveNumber);

  auto* stats = app.add_subcommand(
      "stats", "depth, corrupt depth, oldest and newest entry and age per queue (cheap)");
  stats->add_option("queues", a.queue_names, "queues (default: every queue with dead letters)");
  stats->add_flag("--json", a.json,
                  "JSON Lines: {queue, dead, corrupt, oldest_dead_lettered_at, "
                  "newest_dead_lettered_at, oldest_age_seconds, oldest_untimed, newest_untimed}");

  auto* metrics = app.add_subcommand(
      "metrics", "print the stats in the Prometheus text format (for a textfile collector)");
  metrics->add_option("queues", a.queue_names,
                      "queues (default: every queue with dead letters; name them to keep a "
                      "queue's series at 0 when it empties)");

  auto* corrupt = app.add_subcommand("corrupt", "list the items replay set aside as unreadable");
  add_queue_arg(a, corrupt);
  corrupt->add_option("--start", a.start, "position of the first item")
      ->check(whole_number(false))
      ->capture_default_str();
  corrupt->add_option("--count", a.count, "how many items")
      ->check(whole_number(false))
      ->capture_default_str();
  corrupt->add_flag("--json", a.json, "JSON Lines: {id, problem, raw or raw_base64}");
}

// The command doctor: the server's configuration judged for dead letters (doctor.hpp).
inline void add_doctor_command(CLI::App& app, Args& a) {
  auto* doctor =
      app.add_subcommand("doctor",
                         "check a Redis server for dead letters: TLS, role, cluster, eviction, "
                         "persistence, memory, queues, Lua; exit 4 on an ERROR");
  doctor->add_option("url", a.doctor_url,
                     "the server's URL, as the services give it (default --store)");
  doctor->add_flag("--json", a.doctor.json,
                   "the report as one JSON object: {server, cluster, findings [{level, check, "
                   "node, finding, fix}], queues, scan, summary, exit_code}");
  doctor->add_flag("--strict", a.doctor.strict, "exit 4 on a WARN too");
  doctor
      ->add_option("--max-keys", a.doctor.max_keys,
                   "SCAN examines about this many keys per server looking for dead-letter lists")
      ->check(whole_number(true))
      ->capture_default_str();
}

// The command migrate: creates or upgrades a PostgreSQL store's tables (open_store.hpp).
inline void add_migrate_command(CLI::App& app) {
  app.add_subcommand("migrate",
                     "create or upgrade the dlq tables of a postgres:// store (idempotent; "
                     "prints the schema version it leaves)");
}

// Runs `dlqctl migrate` through io.migrate (the binary sets it when built with PostgreSQL).
inline int run_migrate(Io& io, const Args& a) {
  if (!io.migrate) {
    throw dlq::invalid_argument(dlq::detail::message(
        "dlqctl", "migrate", "this dlqctl was built without PostgreSQL support",
        "rebuild it with libpq and SQLite installed (apt-get install libpq-dev libsqlite3-dev)"));
  }
  return io.migrate(a.store, io.out);
}

/// What `serve` does, in the command list and in serve.hpp's own parser (one wording).
inline constexpr const char* serve_summary =
    "serve the operator console: the web UI, /metrics, /healthz (dlqctl serve --help)";

// `serve` in the command list: the binary parses it apart (serve.hpp) when it has the
// console; this entry names it in --help and, in a dlqctl without it, says how to get it.
inline void add_serve_entry(CLI::App& app) {
  app.add_subcommand("serve", serve_summary)
      ->fallthrough(false)  // its options are serve.hpp's: taken whole, never the globals'
      ->allow_extras()
      ->prefix_command();
}

// Runs `dlqctl doctor` through io.doctor (the binary sets it when built with Redis).
inline int run_doctor(Io& io, Args& a) {
  if (!io.doctor) {
    throw dlq::invalid_argument(
        dlq::detail::message("dlqctl", "doctor", "this dlqctl was built without Redis support",
                             "rebuild it with hiredis installed (apt-get install libhiredis-dev)"));
  }
  doctor::Request r = a.doctor;
  r.url = a.store.url;
  if (!a.store.dlq_key.empty()) r.dlq_key = a.store.dlq_key;
  r.corrupt_key = a.store.corrupt_key;
  r.timeout = a.store.timeout;
  if (!dlq::redis::is_url(r.url)) {  // the URL parser's schemes (one list)
    throw usage_error("doctor checks Redis servers: give " + std::string(dlq::redis::url_forms) +
                      " (not '" + dlq::redact_url(r.url) + "')");
  }
  return io.doctor(r, io.out);
}

// One error line on io.err, through dlq::redact_secrets (dlq/redact.hpp): no store URL shows
// its credentials, not even one typed where no argument goes.
inline void say(Io& io, const std::string& line) {
  io.err << dlq::redact_secrets(one_line(line)) << '\n';
}

// The line a command-line error is reported with: what CLI11 says, or for a missing or
// unknown command the list of commands (from the parser itself: it cannot go stale).
inline std::string parse_error_line(CLI::App& app, const CLI::ParseError& e) {
  const auto subs = app.get_subcommands();
  const std::string name = subs.empty() ? "" : subs.front()->get_name();
  std::string what = one_line(e.what());
  const auto extra = app.remaining();
  const bool no_command = what.find("subcommand") != std::string::npos;
  if (subs.empty() && (no_command || !extra.empty())) {
    what =
        extra.empty() ? "no command given" : "'" + printable(extra.front()) + "' is not a command";
    std::string names;  // every command, from the parser itself: the list cannot go stale
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    what += " (commands: " + names + ")";
  }
  return "dlqctl" + (name.empty() ? "" : " " + name) + ": " + what + "; see: dlqctl " +
         (name.empty() ? "" : name + " ") + "--help";
}

// Runs the parsed `command`: the global settings checked, then the command; every failure
// is one line on io.err and an exit code.
inline int run_command(Io& io, const Opener& open, Args& a, const std::string& command) {
  const std::string where = "dlqctl " + command + ": ";
  try {
    a.store.timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(parse_duration(a.timeout));
    a.store.audit_retention.max_age = audit_max_age(a.audit_max_age);
    if (a.store.timeout.count() <= 0) throw usage_error("--timeout must be more than 0");
    a.store.create_if_missing = command == "send";
    if (a.store.actor.empty()) a.store.actor = os_user();
    if (command == "doctor") return run_doctor(io, a);
    if (command == "migrate") return run_migrate(io, a);
    if (command == "serve") {  // the binary handles serve before run() when it has it
      throw dlq::invalid_argument(dlq::detail::message(
          "dlqctl", "serve", "this dlqctl was built without the console",
          "rebuild it with cpp-httplib installed (apt-get install libcpp-httplib-dev)"));
    }
    Commands commands(io, open, a, command);
    return commands.run();
  } catch (const usage_error& e) {
    say(io, where + e.what());
    return exit_usage;
  } catch (const dlq::connection_error& e) {
    say(io, where + e.what() + " (store " + dlq::redact_url(a.store.url) +
                "; set it with --store or DLQ_STORE)");
    return exit_store;
  } catch (const dlq::timeout_error& e) {
    // The library's advice names its C++ options; a CLI user sets --timeout.
    std::string what = one_line(e.what());
    const std::string cxx = "raise ConnectionOptions timeouts";
    const std::string flag = "raise --timeout (now " + a.timeout + ")";
    const auto at = what.find(cxx);
    if (at != std::string::npos) what.replace(at, cxx.size(), flag);
    say(io, where + what + " (store " + dlq::redact_url(a.store.url) +
                (at != std::string::npos ? ")" : "; a longer --timeout may help)"));
    return exit_store;
  } catch (const dlq::storage_error& e) {
    say(io, where + e.what());
    return exit_store;
  } catch (const dlq::error& e) {  // invalid_argument, format_error, queue_full_error
    say(io, where + e.what());
    return exit_usage;
  } catch (const std::exception& e) {
    say(io, where + "unexpected error: " + e.what());
    return exit_usage;
  }
}

}  // namespace detail

/// Runs dlqctl with `args` (the command line without the program name) and returns its exit
/// code. Never throws: every failure is one line on io.err and an exit code.
inline int run(const std::vector<std::string>& args, Io& io, const Opener& open) {
  detail::Args a;
  a.command_line = args;
  CLI::App app(description(), "dlqctl");
  app.fallthrough();  // global options are accepted after the command too
  app.require_subcommand(1);
  app.set_version_flag("--version", description());
  app.footer("Store URLs: Redis " + std::string(dlq::redis::url_forms) +
             "; SQLite sqlite:///path/file.db; PostgreSQL postgres://user@host/db\n"
             "Exit codes: 0 ok, 1 bad usage or input, 2 store unreachable/failed, 3 not found, "
             "4 doctor found a problem, 130 replay interrupted (nothing lost)\n"
             "Run 'dlqctl COMMAND --help' for a command's options.");
  add_global_options(app, a.store, a.timeout, a.audit_max_age);
  CLI::Option* payload_opt = detail::add_entry_commands(app, a);
  CLI::App* replay = detail::add_replay_command(app, a);
  detail::add_store_commands(app, a);
  detail::add_report_commands(app, a);
  detail::add_ops_commands(app, a, replay);
  detail::add_doctor_command(app, a);
  detail::add_migrate_command(app);
  detail::add_serve_entry(app);

  std::vector<const char*> argv;
  argv.push_back("dlqctl");
  for (const auto& s : args)
    argv.push_back(s.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    io.out << app.help();
    return exit_ok;
  } catch (const CLI::CallForAllHelp&) {
    io.out << app.help("", CLI::AppFormatMode::All);
    return exit_ok;
  } catch (const CLI::CallForVersion& e) {
    io.out << e.what() << '\n';
    return exit_ok;
  } catch (const CLI::ParseError& e) {
    detail::say(io, detail::parse_error_line(app, e));
    return exit_usage;
  }
  const std::string command = app.get_subcommands().front()->get_name();
  a.payload_given = payload_opt->count() > 0;
  if (!a.doctor_url.empty()) a.store.url = a.doctor_url;  // `doctor URL`: the URL checked
  return detail::run_command(io, open, a, command);
}

}  // namespace dlqctl
