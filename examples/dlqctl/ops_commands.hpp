// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlqctl/ops_commands.hpp
/// dlqctl's operator operations (issue 14): `search`, `discard`, `audit`, and the edited
/// replay `replay --id ID --set-payload FILE | --transform-cmd CMD`. Included by
/// commands.hpp; the functions are templates over its Args so that this file stays apart.
///
///   dlqctl search orders --error-contains timeout --payload-contains sku-42 [--limit 20]
///   dlqctl discard orders --error-type ValidationError --dry-run      (then --yes)
///   dlqctl replay orders --id ID --set-payload fixed.json             (or - for stdin)
///   dlqctl replay orders --id ID --transform-cmd "jq '.amount = 10'"  (payload on stdin)
///   dlqctl audit orders [--since 24h] [--limit 100] [--json]
///
/// Every mutation is written to the queue's audit trail with the actor: --actor, else
/// DLQ_ACTOR, else the OS user.
#pragma once

#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <dlq/dlq.hpp>
#include <nlohmann/json.hpp>

#include "format.hpp"
#include "store.hpp"

namespace dlqctl::detail {

/// The arguments of the operator operations (a member of Args).
struct OpsArgs {
  std::string set_payload;    ///< replay: file with the new payload ("-" = stdin)
  std::string transform_cmd;  ///< replay: shell command, old payload in, new payload out
  std::string error_type;     ///< filters beyond Args' (ids, error_contains, worker, older_than)
  std::string job_id;
  std::string newer_than;
  std::string payload_contains;
  std::size_t limit = 0;     ///< discard: most entries; search: most results (default 20)
  std::string continuation;  ///< search: go on from this token
  std::size_t examine = 0;   ///< search: most entries examined per call (0 = 10 000)
  std::string since;         ///< audit: records of the last DURATION
};

// The exit codes of commands.hpp (0 ok, 1 usage, 3 not found, 130 interrupted) are written
// as numbers here: this file is included before they are declared.

inline std::string ops_dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

/// The OS user, for the audit trail's actor: $USER, else the password database, else "".
inline std::string os_user() {
  if (const char* u = std::getenv("USER"); u != nullptr && *u != '\0') return u;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_name != nullptr)
    return pw->pw_name;
  return {};
}

/// Adds the filter options of search and discard to `c`.
template <class A>
void add_filter_options(CLI::App* c, A& a) {
  c->add_option("--id", a.ids, "only these entries (one or more ids)");
  c->add_option("--error-contains", a.error_contains, "only entries whose error contains TEXT");
  c->add_option("--error-type", a.ops.error_type, "only entries of this error type");
  c->add_option("--worker", a.worker, "only entries dead-lettered by this worker");
  c->add_option("--job-id", a.ops.job_id, "only the entry of this job id");
  c->add_option("--older-than", a.older_than,
                "only entries dead-lettered at least this long ago (90s, 15m, 2h, 7d)");
  c->add_option("--newer-than", a.ops.newer_than,
                "only entries dead-lettered at most this long ago");
  c->add_option("--payload-contains", a.ops.payload_contains,
                "only entries whose payload contains TEXT");
}

template <class A>
dlq::Filter filter_of(const A& a) {
  dlq::Filter f;
  f.ids = a.ids;
  f.error_contains = a.error_contains;
  f.error_type = a.ops.error_type;
  f.worker = a.worker;
  f.job_id = a.ops.job_id;
  f.payload_contains = a.ops.payload_contains;
  const auto duration = [](const std::string& text) {
    return std::chrono::duration_cast<std::chrono::system_clock::duration>(parse_duration(text));
  };
  if (!a.older_than.empty()) f.older_than = duration(a.older_than);
  if (!a.ops.newer_than.empty()) f.newer_than = duration(a.ops.newer_than);
  return f;
}

/// Runs `command` with /bin/sh, `input` on its stdin; returns its stdout.
/// @throws usage_error when it cannot be run or exits non-zero.
inline std::string run_transform(const std::string& command, const std::string& input) {
  char path[] = "/tmp/dlqctl-payload-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) throw usage_error("--transform-cmd: cannot create a temporary file in /tmp");
  std::size_t written = 0;
  while (written < input.size()) {
    const ssize_t n = ::write(fd, input.data() + written, input.size() - written);
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  ::close(fd);
  const std::string full = "(" + command + ") < '" + path + "'";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (pipe == nullptr) {
    ::unlink(path);
    throw usage_error("--transform-cmd: cannot start /bin/sh");
  }
  std::string out;
  char buffer[65536];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    out.append(buffer, n);
  const int status = ::pclose(pipe);
  ::unlink(path);
  if (written != input.size())
    throw usage_error("--transform-cmd: could not write the payload to a temporary file");
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw usage_error("--transform-cmd '" + printable(command) + "' failed (exit status " +
                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                      "); nothing was replayed");
  return out;
}

/// replay --id ID --set-payload FILE | --transform-cmd CMD: replays one entry with a new
/// payload in one atomic step; the audit record keeps both payloads' SHA-256.
template <class A, class IoT>
int ops_replay_edited(IoT& io, Store& store, const A& a) {
  if (!a.ops.set_payload.empty() && !a.ops.transform_cmd.empty())
    throw usage_error("give either --set-payload or --transform-cmd, not both");
  if (a.ids.size() != 1 || a.all || a.replay_count > 0 || !a.error_contains.empty() ||
      !a.worker.empty() || !a.older_than.empty())
    throw usage_error("an edited replay is for one entry: give exactly one --id and no filter");
  const std::string& id = a.ids.front();
  const auto entry = store.get(a.queue, id);
  if (!entry) {
    io.err << "dlqctl replay: no entry with id '" << printable(id) << "' in the dead letters of '"
           << printable(a.queue) << "'; list the ids with: dlqctl peek " << printable(a.queue)
           << '\n';
    return 3;
  }
  if (!entry->ok())
    throw usage_error("entry '" + printable(id) + "' is unreadable (" + entry->problem +
                      "); it has no payload to edit — see: dlqctl show " + printable(a.queue) +
                      " " + printable(id));
  std::string payload;
  if (!a.ops.set_payload.empty()) {
    if (a.ops.set_payload == "-") {
      payload.assign(std::istreambuf_iterator<char>(io.in), std::istreambuf_iterator<char>());
    } else {
      std::ifstream in(a.ops.set_payload, std::ios::binary);
      if (!in)
        throw usage_error("--set-payload: cannot read '" + printable(a.ops.set_payload) + "'");
      payload.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  } else {
    payload = run_transform(a.ops.transform_cmd, entry->payload);
  }
  const std::string old_payload = entry->payload;
  dlq::ReplayOptions o = dlq::ReplayOptions::by_ids({id});
  o.to_queue = a.to;
  o.dry_run = a.dry_run;
  o.transform = [&](const dlq::Entry& e) -> std::optional<std::string> {
    if (e.payload != old_payload)  // re-sent meanwhile: the edit was made for other bytes
      throw usage_error("entry '" + printable(id) +
                        "' changed since its payload was read; nothing was replayed, run the "
                        "command again");
    return payload;
  };
  const dlq::ReplayReport r = store.replay(a.queue, o);
  const std::string dest = printable(a.to.empty() ? a.queue : a.to);
  if (r.replayed == 0) {
    io.err << "dlqctl replay: entry '" << printable(id)
           << "' was not replayed (removed or replayed by someone else meanwhile)\n";
    io.out << "0\n";
    return 3;
  }
  io.err << (r.dry_run ? "dry run: would replay " : "replayed ") << "entry '" << printable(id)
         << "' to '" << dest << "' with an edited payload (" << old_payload.size() << " -> "
         << payload.size() << " bytes, sha256 "
         << dlq::detail::sha256_hex(old_payload).substr(0, 12) << " -> "
         << dlq::detail::sha256_hex(payload).substr(0, 12) << ")\n";
  io.out << r.replayed << '\n';
  return 0;
}

/// discard QUEUE FILTERS (--dry-run | --yes) [--limit N] [--json]
template <class A, class IoT>
int ops_discard(IoT& io, Store& store, const A& a) {
  dlq::DiscardOptions o;
  static_cast<dlq::Filter&>(o) = filter_of(a);
  if (o.empty())
    throw usage_error(
        "say which entries to discard with a filter (--error-contains, "
        "--error-type, --worker, --job-id, --older-than, --newer-than, "
        "--payload-contains, --id); to delete them all use: dlqctl purge " +
        printable(a.queue) + " --yes");
  o.limit = a.ops.limit;
  o.dry_run = a.dry_run || !a.yes;
  o.cancel = io.cancel;
  const dlq::DiscardReport r = store.discard(a.queue, o);
  if (!a.dry_run && !a.yes) {
    io.err << "dlqctl discard: " << r.discarded << " of " << r.examined
           << " entries examined match and would be deleted for good; add --yes to do it "
              "(or --dry-run to list them)\n";
    return 1;
  }
  if (a.json) {
    for (const auto& id : r.discarded_ids) {
      nlohmann::ordered_json j;
      j["id"] = id;
      j[r.dry_run ? "would_discard" : "discarded"] = true;
      io.out << ops_dump(j) << '\n';
    }
  } else {
    for (const auto& id : r.discarded_ids)
      io.err << (r.dry_run ? "would discard " : "discarded ") << printable(id) << '\n';
  }
  io.err << (r.dry_run ? "dry run: would discard " : "discarded ") << r.discarded << " of "
         << r.examined << " entries examined in '" << printable(a.queue) << "' (" << r.batches
         << (r.batches == 1 ? " batch" : " batches") << ")\n";
  if (!a.json) io.out << r.discarded << '\n';
  return r.cancelled ? 130 : 0;
}

/// search QUEUE FILTERS [--limit N] [--continuation TOKEN] [--examine N] [--json]
template <class A, class IoT>
int ops_search(IoT& io, Store& store, const A& a) {
  const dlq::Filter f = filter_of(a);
  const std::size_t wanted = a.ops.limit == 0 ? 20 : a.ops.limit;
  std::string token = a.ops.continuation;
  std::vector<dlq::Entry> found;
  ProgressBar bar(io.err, io.err_is_tty, io.progress_delay, "search " + printable(a.queue));
  bool done = false;
  while (found.size() < wanted) {
    if (io.cancel != nullptr && io.cancel->load()) break;
    auto page = store.search(a.queue, f, token, wanted - found.size(), a.ops.examine);
    bar.update(page.position, std::max(page.size, page.position), found.size());
    if (page.restarted())
      io.err << "dlqctl search: the entries examined last were removed meanwhile; searching "
                "again from the oldest (some results may repeat)\n";
    for (auto& e : page.entries)
      found.push_back(std::move(e));
    token = page.continuation;
    if (page.done()) {
      done = true;
      break;
    }
  }
  bar.finish();
  if (a.json) {
    for (const auto& e : found)
      io.out << ops_dump(e.to_json()) << '\n';
  } else {
    Table t(
        {{"ID", 40}, {"DEAD-LETTERED (UTC)", 19}, {"WORKER", 16}, {"ERROR", 40}, {"PAYLOAD", 60}});
    for (const auto& e : found) {
      if (e.ok())
        t.add({e.id, short_time(e.dead_lettered_at), e.worker, e.error, e.payload});
      else
        t.add({e.id, "", "", "(unreadable: " + e.problem + ")", e.raw});
    }
    t.print(io.out);
    io.out << "(" << found.size() << (found.size() == 1 ? " match" : " matches")
           << (done ? "; end of the list" : "") << ")\n";
  }
  if (!done)
    io.err << "more: dlqctl search " << printable(a.queue) << " … --continuation " << token << '\n';
  return 0;
}

/// audit QUEUE [--since DURATION] [--limit N] [--json]
template <class A, class IoT>
int ops_audit(IoT& io, Store& store, const A& a) {
  std::chrono::system_clock::time_point since{};
  if (!a.ops.since.empty())
    since = std::chrono::system_clock::now() -
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                parse_duration(a.ops.since));
  const std::size_t limit = a.ops.limit == 0 ? 100 : a.ops.limit;
  const auto records = store.audit(a.queue, since, limit);
  // The trail keeps months of records, oldest first: say when there may be more.
  const auto more = [&] {
    if (records.size() >= limit)
      io.err << "dlqctl audit: the oldest " << limit << " records"
             << (a.ops.since.empty() ? "" : " of the last " + a.ops.since)
             << "; there may be more: narrow --since (e.g. 24h) or raise --limit\n";
  };
  if (a.json) {
    for (const auto& r : records)
      io.out << ops_dump(r.to_json()) << '\n';
    more();
    return 0;
  }
  Table t({{"TIME (UTC)", 19},
           {"ACTOR", 16},
           {"OPERATION", 0},
           {"OUTCOME", 20},
           {"COUNTS", 50},
           {"FILTER", 40},
           {"IDS", 50}});
  for (const auto& r : records) {
    std::string counts;
    for (const auto& [k, v] : r.counts.items())
      if (!(v.is_number() && v == 0))  // zero counts say nothing
        counts += (counts.empty() ? "" : " ") + k + "=" + ops_dump(v);
    std::string ids;
    for (const auto& id : r.ids)
      ids += (ids.empty() ? "" : " ") + id;
    if (r.ids_omitted > 0) ids += " (+" + std::to_string(r.ids_omitted) + " more)";
    const std::string filter = r.filter.empty() ? "" : ops_dump(r.filter);
    t.add({short_time(dlq::detail::iso_time::format(r.time)), r.actor, r.operation, r.outcome,
           counts, filter, ids});
  }
  t.print(io.out);
  io.out << "(" << records.size() << (records.size() == 1 ? " record" : " records") << " of '"
         << printable(a.queue) << "'" << (a.ops.since.empty() ? "" : " since " + a.ops.since)
         << ")\n";
  more();
  return 0;
}

/// Registers search, discard and audit, and the edit options of replay.
template <class A>
void add_ops_commands(CLI::App& app, A& a, CLI::App* replay) {
  replay->add_option("--set-payload", a.ops.set_payload,
                     "with one --id: replay it with the payload in FILE (- = stdin)");
  replay->add_option("--transform-cmd", a.ops.transform_cmd,
                     "with one --id: replay it with what CMD prints (its stdin: the payload)");

  auto queue_arg = [&a](CLI::App* c) {
    c->add_option("queue", a.queue, "the source queue's name (e.g. orders)")->required();
  };
  auto* search = app.add_subcommand(
      "search", "find dead letters by error, worker, job id, age or payload text (paged)");
  queue_arg(search);
  add_filter_options(search, a);
  search->add_option("--limit", a.ops.limit, "at most N matches (default 20)");
  search->add_option("--continuation", a.ops.continuation,
                     "go on where an earlier search stopped (the token it printed)");
  search->add_option("--examine", a.ops.examine, "entries examined per store call (default 10000)");
  search->add_flag("--json", a.json, "JSON Lines: one stored entry per line");

  auto* discard = app.add_subcommand(
      "discard", "delete the dead letters a filter matches; prints the number deleted");
  queue_arg(discard);
  add_filter_options(discard, a);
  discard->add_option("--limit", a.ops.limit, "delete at most N entries, oldest first");
  discard->add_flag("--dry-run", a.dry_run, "list what would be deleted; delete nothing");
  discard->add_flag("--yes", a.yes, "yes, delete them for good");
  discard->add_flag("--json", a.json, "JSON Lines: one line per id");

  auto* audit = app.add_subcommand(
      "audit", "who replayed, edited or deleted what, when (the queue's audit trail)");
  queue_arg(audit);
  audit->add_option("--since", a.ops.since, "only records of the last DURATION (24h, 7d)");
  audit->add_option("--limit", a.ops.limit, "at most N records, oldest first (default 100)");
  audit->add_flag("--json", a.json, "JSON Lines: one record per line");
}

}  // namespace dlqctl::detail
