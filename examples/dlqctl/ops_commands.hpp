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
///                               [--transform-timeout 30s]
///   dlqctl audit orders [--since 24h] [--limit 100] [--json]
///
/// Every mutation is written to the queue's audit trail with the actor: --actor, else
/// DLQ_ACTOR, else the OS user.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
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
  std::string set_payload;        ///< replay: file with the new payload ("-" = stdin)
  std::string transform_cmd;      ///< replay: shell command, old payload in, new payload out
  std::string transform_timeout;  ///< replay: how long transform_cmd may run ("" = 30s)
  bool keep_newline = false;      ///< replay: keep the edited payload's final line ending
  std::string error_type;  ///< filters beyond Args' (ids, error_contains, worker, older_than)
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
/// The filter options of replay, search and discard (one grammar), for messages.
inline constexpr const char* filter_option_names =
    "--error-contains, --error-type, --worker, --job-id, --older-than, --newer-than, "
    "--payload-contains, --id";

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

/// How long a --transform-cmd may run before it is killed (--transform-timeout).
inline constexpr std::chrono::seconds default_transform_timeout{30};
/// The most a --transform-cmd may print: beyond it the command is stopped and nothing is
/// replayed (a runaway command must not fill the memory before its timeout).
inline constexpr std::size_t transform_output_limit = std::size_t{64} << 20;

/// Thrown by run_transform when Io::cancel was set (Ctrl-C, SIGTERM) while it ran.
struct transform_interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The shell a transform runs in: bash when installed (pipefail is on there), else /bin/sh
/// (pipefail when that shell has it; Debian's dash has not).
inline const char* transform_shell() {
  return ::access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
}

/// Why run_transform stopped a command before it ended.
enum class transform_stop { no, timed_out, interrupted, too_large };

/// A started transform (start_transform): the shell's pid (its process group's id), the
/// write end of the command's stdin and the read end of its stdout, both non-blocking.
struct transform_process {
  pid_t pid;
  int in;
  int out;
};

/// Starts `command` in transform_shell() with pipefail, its stdin and stdout pipes, in a
/// process group of its own (see run_transform).
/// @throws usage_error when it cannot be started (`untouched` ends the message).
inline transform_process start_transform(const std::string& command, const std::string& untouched) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw usage_error("--transform-cmd: cannot create a pipe");
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    throw usage_error("--transform-cmd: cannot create a pipe");
  }
  // The child: stdin and stdout are the pipes (dup2 clears close-on-exec on 0 and 1), its
  // own process group, no blocked signals, SIGPIPE/SIGINT/SIGTERM at their defaults.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigemptyset(&defaults);
  for (const int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP})
    sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  const char* shell = transform_shell();
  const std::string script = "(set -o pipefail) 2>/dev/null && set -o pipefail\n" + command;
  char* const argv[] = {const_cast<char*>(shell), const_cast<char*>("-c"),
                        const_cast<char*>(script.c_str()), nullptr};
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, shell, &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(in[1]);
    ::close(out[0]);
    throw usage_error("--transform-cmd: cannot start " + std::string(shell) + " (" +
                      std::strerror(spawned) + "); " + untouched);
  }
  ::fcntl(in[1], F_SETFL, ::fcntl(in[1], F_GETFL) | O_NONBLOCK);
  ::fcntl(out[0], F_SETFL, ::fcntl(out[0], F_GETFL) | O_NONBLOCK);
  return {pid, in[1], out[0]};
}

/// Writes `input` to a started transform and reads what it prints into `result` until it
/// closes its stdout or is to be stopped (after `timeout`, when `*cancel` is set, beyond
/// transform_output_limit bytes), then waits for the shell itself within the deadline.
/// Closes both pipes; the caller kills the group and reaps the shell.
inline transform_stop exchange_with_transform(const transform_process& p, const std::string& input,
                                              std::chrono::milliseconds timeout,
                                              const std::atomic<bool>* cancel,
                                              std::string& result) {
  transform_stop why = transform_stop::no;
  std::size_t written = 0;
  bool in_open = true;
  if (input.empty()) {
    ::close(p.in);
    in_open = false;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto time_left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
  };
  const auto stopped = [&] {
    if (cancel != nullptr && cancel->load()) return transform_stop::interrupted;
    if (time_left().count() <= 0) return transform_stop::timed_out;
    return transform_stop::no;
  };
  char buffer[65536];
  for (bool out_open = true; out_open && why == transform_stop::no;) {
    if ((why = stopped()) != transform_stop::no) break;
    pollfd fds[2] = {{p.out, POLLIN, 0}, {p.in, POLLOUT, 0}};
    // at most 100 ms: the Ctrl-C flag is looked at between waits
    const int wait_ms = static_cast<int>(std::min<long long>(time_left().count(), 100));
    if (::poll(fds, in_open ? 2 : 1, std::max(wait_ms, 0)) < 0 && errno != EINTR) break;
    if (in_open && fds[1].revents != 0) {
      const std::size_t chunk = std::min<std::size_t>(input.size() - written, 65536);
      const ssize_t n = ::write(p.in, input.data() + written, chunk);
      if (n > 0) written += static_cast<std::size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) {
        ::close(p.in);  // all written (EOF for the command), or it closed its stdin
        in_open = false;
      }
    }
    if (fds[0].revents != 0) {
      const ssize_t n = ::read(p.out, buffer, sizeof buffer);
      if (n > 0) {
        result.append(buffer, static_cast<std::size_t>(n));
        if (result.size() > transform_output_limit) why = transform_stop::too_large;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        out_open = false;
      }
    }
  }
  if (in_open) ::close(p.in);
  ::close(p.out);
  // Stdout is closed: wait for the shell itself (it is the group's leader), still within
  // the deadline. It stays unreaped (WNOWAIT) until run_transform killed its group: while it
  // is a zombie its pid, the group's id, cannot be given to another process.
  while (why == transform_stop::no) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(p.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == p.pid)
      break;
    if ((why = stopped()) == transform_stop::no) ::usleep(10000);
  }
  return why;
}

/// Throws what a transform that was stopped (`why`) or that failed (its wait `status`) did
/// (see run_transform); returns when it exited 0.
inline void check_transform_end(transform_stop why, int status, const std::string& shown,
                                const std::string& shown_timeout, const std::string& untouched) {
  switch (why) {
    case transform_stop::interrupted:
      throw transform_interrupted(shown + " was interrupted and killed; " + untouched);
    case transform_stop::timed_out:
      throw usage_error(shown + " did not finish within " + shown_timeout +
                        " (--transform-timeout); it was killed with its process group; " +
                        untouched);
    case transform_stop::too_large:
      throw usage_error(shown + " printed more than " +
                        std::to_string(transform_output_limit >> 20) + " MiB; it was stopped; " +
                        untouched);
    case transform_stop::no:
      break;
  }
  if (WIFSIGNALED(status))
    throw usage_error(shown + " was killed by signal " + std::to_string(WTERMSIG(status)) + "; " +
                      untouched);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw usage_error(shown + " failed (exit status " +
                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + "); " +
                      untouched);
}

/// Runs `command` in transform_shell() with pipefail, `input` on its stdin through a pipe
/// (never a file: the payload is on no disk), in a process group of its own, and returns
/// what it printed on stdout (its stderr is dlqctl's). After `timeout`, when more than
/// transform_output_limit bytes came out, or when `*cancel` becomes true, the whole group
/// is killed (SIGKILL); when the command ends, whatever it left running in its group is
/// killed too.
/// @param shown_timeout the timeout as the user wrote it, for the message
/// @throws usage_error when it cannot be started, fails (a non-zero exit status, also of
///         any stage of a pipeline), is killed by a signal, times out or prints too much;
///         transform_interrupted when `*cancel` was set.
inline std::string run_transform(const std::string& command, const std::string& input,
                                 std::chrono::milliseconds timeout,
                                 const std::string& shown_timeout,
                                 const std::atomic<bool>* cancel) {
  const std::string shown = "--transform-cmd '" + printable(command) + "'";
  const std::string untouched = "nothing was replayed, the dead letter is unchanged";
  const transform_process p = start_transform(command, untouched);
  // A command that does not read all its input closes the pipe: that is its choice, and
  // the write must then fail with EPIPE instead of killing dlqctl.
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &previous);
  std::string result;
  const transform_stop why = exchange_with_transform(p, input, timeout, cancel, result);
  ::kill(-p.pid, SIGKILL);  // the whole pipeline on a stop; what it left running otherwise
  int status = 0;
  while (::waitpid(p.pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::sigaction(SIGPIPE, &previous, nullptr);
  check_transform_end(why, status, shown, shown_timeout, untouched);
  return result;
}

/// --transform-timeout, checked (default_transform_timeout when it is not given).
template <class A>
std::chrono::milliseconds transform_timeout(const A& a) {
  std::chrono::milliseconds timeout = default_transform_timeout;
  if (!a.ops.transform_timeout.empty()) {
    if (a.ops.transform_cmd.empty())
      throw usage_error("--transform-timeout goes with --transform-cmd");
    timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
        parse_duration(a.ops.transform_timeout));
    if (timeout.count() <= 0) throw usage_error("--transform-timeout must be more than 0");
  }
  return timeout;
}

/// The new payload of an edited replay: --set-payload's file (or stdin), or what
/// --transform-cmd printed for `old_payload`; nullopt when the transform was interrupted
/// (reported on io.err).
/// @throws usage_error when it cannot be read, the transform fails, or the payload is empty
///         or only whitespace.
template <class A, class IoT>
std::optional<std::string> edited_payload(IoT& io, const A& a, const std::string& old_payload,
                                          std::chrono::milliseconds timeout,
                                          const std::string& shown_timeout) {
  std::string payload;
  std::string source;  // where the payload came from, for the message of a blank one
  if (!a.ops.set_payload.empty()) {
    if (a.ops.set_payload == "-") {
      payload.assign(std::istreambuf_iterator<char>(io.in), std::istreambuf_iterator<char>());
      source = "--set-payload - read ";
    } else {
      std::ifstream in(a.ops.set_payload, std::ios::binary);
      if (!in)
        throw usage_error("--set-payload: cannot read '" + printable(a.ops.set_payload) + "'");
      payload.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      source = "--set-payload '" + printable(a.ops.set_payload) + "' holds ";
    }
  } else {
    struct trap {  // Ctrl-C / SIGTERM set io.cancel instead of ending dlqctl at once
      IoT& io;
      explicit trap(IoT& i) : io(i) {
        if (io.trap_interrupts) io.trap_interrupts(true);
      }
      ~trap() {
        if (io.trap_interrupts) io.trap_interrupts(false);
      }
    };
    try {
      trap armed(io);
      payload = run_transform(a.ops.transform_cmd, old_payload, timeout, shown_timeout, io.cancel);
    } catch (const transform_interrupted& e) {
      io.err << "dlqctl replay: " << e.what() << '\n';
      return std::nullopt;
    }
    source = "--transform-cmd '" + printable(a.ops.transform_cmd) + "' exited 0 and printed ";
  }
  // A file saved by an editor or `echo`, and `jq -c`, end in a line ending the job never had:
  // one is removed (and said) unless --keep-newline. The library itself stores bytes as given.
  const std::size_t given = payload.size();
  if (!a.ops.keep_newline && strip_final_line_ending(payload)) {
    io.err << "dlqctl replay: removed the payload's final newline (" << given << " -> "
           << payload.size() << " bytes); --keep-newline keeps it\n";
  }
  // The library refuses such an edit too (dlq::invalid_argument); here the message can say
  // which option gave it.
  if (dlq::detail::blank_payload(payload))
    throw usage_error(source +
                      (payload.empty() && given > 0 ? std::string("only a line ending")
                       : payload.empty()            ? std::string("nothing")
                                         : "only whitespace (" + std::to_string(payload.size()) +
                                               (payload.size() == 1 ? " byte)" : " bytes)")) +
                      ", and an empty payload is never a valid job; nothing was replayed, the "
                      "dead letter is unchanged");
  return payload;
}

/// The selection rule of `replay` (plain and edited): exactly one of --all, --count N or
/// --id, each narrowed by the filters, or the filters alone; --id takes no other filter.
/// `verb` names the command in the message ("replay", "edit and replay").
/// @throws usage_error otherwise.
inline void check_selection(const dlq::Filter& f, bool all, std::size_t count, const char* verb) {
  dlq::Filter beyond_id = f;
  beyond_id.ids.clear();
  const int chosen = (all ? 1 : 0) + (count > 0 ? 1 : 0) + (f.ids.empty() ? 0 : 1);
  if (chosen > 1 || (chosen == 0 && beyond_id.empty()))
    throw usage_error("say which entries to " + std::string(verb) +
                      " with one of --all, --count N, --id ID..., or filters alone (" +
                      std::string(filter_option_names) + "; they narrow --all and --count)");
  if (!f.ids.empty() && !beyond_id.empty())
    throw usage_error("--id replays exactly those entries; the other filters do not apply with it");
}

template <class A, class IoT>
int ops_replay_edited_many(IoT& io, Store& store, const A& a);

/// replay --id ID --set-payload FILE | --transform-cmd CMD: replays one entry with a new
/// payload in one atomic step; the audit record keeps both payloads' SHA-256. An edit that
/// yields an empty or whitespace-only payload is refused (dlq/detail/edit.hpp); so is a
/// transform that fails, times out or is interrupted (exit 130): nothing moves then.
/// Any other selection (filters, --all, --count, several --id) with --transform-cmd:
/// ops_replay_edited_many.
template <class A, class IoT>
int ops_replay_edited(IoT& io, Store& store, const A& a) {
  if (!a.ops.set_payload.empty() && !a.ops.transform_cmd.empty())
    throw usage_error("give either --set-payload or --transform-cmd, not both");
  dlq::Filter beyond_id = filter_of(a);
  beyond_id.ids.clear();
  if (a.ids.size() != 1 || a.all || a.replay_count > 0 || !beyond_id.empty())
    return ops_replay_edited_many(io, store, a);
  const std::string shown_timeout = a.ops.transform_timeout.empty()
                                        ? std::to_string(default_transform_timeout.count()) + "s"
                                        : a.ops.transform_timeout;
  const std::chrono::milliseconds timeout = transform_timeout(a);
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
  const std::optional<std::string> edited =
      edited_payload(io, a, entry->payload, timeout, shown_timeout);
  if (!edited) return 130;  // the transform was interrupted
  const std::string& payload = *edited;
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

/// What became of one entry of ops_replay_edited_many.
enum class edit_outcome { replayed, gone, interrupted };

/// One entry of ops_replay_edited_many: the command edits `e`'s payload, then one replay by
/// id moves it with the edited bytes if its payload is still `e`'s (else it is left: gone).
/// `before`: how many went before it, for the message of a failed edit.
/// @throws usage_error when the edit fails (after saying which entry it stopped at).
template <class A, class IoT>
edit_outcome edit_and_replay_one(IoT& io, Store& store, const A& a, const dlq::Entry& e,
                                 std::chrono::milliseconds timeout,
                                 const std::string& shown_timeout, std::size_t before) {
  std::optional<std::string> edited;
  try {
    edited = edited_payload(io, a, e.payload, timeout, shown_timeout);
  } catch (const usage_error&) {
    io.err << "dlqctl replay: replayed " << before << " edited entries before entry '"
           << printable(e.id) << "'; it and the entries after it stay in the dead letters\n";
    throw;
  }
  if (!edited) return edit_outcome::interrupted;  // said by edited_payload
  struct changed_meanwhile {};
  dlq::ReplayOptions o = dlq::ReplayOptions::by_ids({e.id});
  o.to_queue = a.to;
  o.dry_run = a.dry_run;
  o.transform = [&](const dlq::Entry& now) -> std::optional<std::string> {
    if (now.payload != e.payload) throw changed_meanwhile{};  // edited for other bytes
    return *edited;
  };
  try {
    if (store.replay(a.queue, o).replayed != 1) return edit_outcome::gone;
  } catch (const changed_meanwhile&) {
    return edit_outcome::gone;
  }
  io.err << (a.dry_run ? "dry run: would replay " : "replayed ") << "entry '" << printable(e.id)
         << "' (" << e.payload.size() << " -> " << edited->size() << " bytes)\n";
  return edit_outcome::replayed;
}

/// The ids of the entries of `queue` that `f` matches now, for ops_replay_edited_many: the
/// entries present at the start, as replay takes (dlq/replay.hpp) — a job dead-lettered again
/// during the run (a search returns entries sent meanwhile) is not edited again, and a job
/// that keeps failing cannot keep the run going. `count` > 0 (--count): stops once it holds
/// that many entries to edit (readable, and not parked unless asked for by id), so a
/// --count 10 over millions holds and reads little. Empty optional: interrupted (Ctrl-C).
template <class IoT>
std::optional<std::set<std::string>> ids_at_start(IoT& io, Store& store, const std::string& queue,
                                                  const dlq::Filter& f, std::size_t examine,
                                                  std::size_t count) {
  std::set<std::string> ids;
  std::size_t editable = 0;
  std::string token;
  do {
    if (io.cancel != nullptr && io.cancel->load()) return std::nullopt;
    dlq::SearchPage page = store.search(queue, f, token, 50, examine);
    for (const dlq::Entry& e : page.entries) {
      if (count > 0 && editable >= count) return ids;
      if (ids.insert(e.id).second && e.ok() && (!e.parked || !f.ids.empty())) ++editable;
    }
    token = page.continuation;
  } while (!token.empty() && (count == 0 || editable < count));
  return ids;
}

/// replay QUEUE SELECTION --transform-cmd CMD: the edit of ops_replay_edited for every entry
/// the selection matches (filters alone, --all or --count N narrowed by filters, several
/// --id), oldest first. Each entry is its own step, as the one-entry edit: its payload is
/// read by a search, the command runs on it outside any store lock (a slow jq holds up no
/// sender), and one replay by id moves it with the edited bytes only if its payload is still
/// the one edited — atomic per entry, as the library's. The first edit that fails (the
/// command fails, times out or prints nothing) stops the run: the entries before it stay
/// replayed, it and the ones after keep their payloads, and the message says how many went.
/// Unreadable entries have nothing to edit and stay; parked ones (the poison-loop guard) stay
/// unless asked for by --id, as replay leaves them. --set-payload is refused here: it
/// would give every entry the same bytes.
template <class A, class IoT>
int ops_replay_edited_many(IoT& io, Store& store, const A& a) {
  if (!a.ops.set_payload.empty())
    throw usage_error(
        "--set-payload gives every entry the same bytes, so it takes exactly one "
        "--id; to edit many entries use --transform-cmd (it runs once per entry, "
        "on that entry's payload)");
  const dlq::Filter f = filter_of(a);
  check_selection(f, a.all, a.replay_count, "edit and replay");
  const std::string shown_timeout = a.ops.transform_timeout.empty()
                                        ? std::to_string(default_transform_timeout.count()) + "s"
                                        : a.ops.transform_timeout;
  const std::chrono::milliseconds timeout = transform_timeout(a);
  const std::string dest = printable(a.to.empty() ? a.queue : a.to);
  // Only the entries there at the start, each once (a search restarted by the removals may
  // show an entry again; one sent meanwhile joins the search at the tail).
  std::optional<std::set<std::string>> pending =
      ids_at_start(io, store, a.queue, f, a.ops.examine, a.replay_count);
  std::size_t replayed = 0, unreadable = 0, gone = 0, parked = 0;
  const auto summary = [&] {
    io.err << (a.dry_run ? "dry run: would replay " : "replayed ") << replayed
           << (replayed == 1 ? " entry" : " entries") << " of '" << printable(a.queue) << "' to '"
           << dest << "' with edited payloads";
    if (unreadable > 0) io.err << "; " << unreadable << " unreadable left in place";
    if (parked > 0)
      io.err << "; " << parked << " parked by the poison-loop guard left in place (--id forces one)";
    if (gone > 0) io.err << "; " << gone << " removed or changed meanwhile, left as they are";
    io.err << '\n';
  };
  std::string token;
  for (bool done = false; !done;) {
    if (!pending || (io.cancel != nullptr && io.cancel->load())) {
      summary();
      io.out << replayed << '\n';
      return 130;  // exit_interrupted (commands.hpp): stopped by Ctrl-C, nothing lost
    }
    dlq::SearchPage page = store.search(a.queue, f, token, 50, a.ops.examine);
    for (const dlq::Entry& e : page.entries) {
      if (a.replay_count > 0 && replayed >= a.replay_count) break;
      if (pending->erase(e.id) == 0) continue;  // seen, or not there at the start
      if (!e.ok()) {
        ++unreadable;
        continue;
      }
      if (e.parked && f.ids.empty()) {  // as replay: only asking by id forces a parked one
        ++parked;
        continue;
      }
      const edit_outcome done_one =
          edit_and_replay_one(io, store, a, e, timeout, shown_timeout, replayed);
      if (done_one == edit_outcome::interrupted) {
        summary();
        io.out << replayed << '\n';
        return 130;  // exit_interrupted (commands.hpp): stopped by Ctrl-C, nothing lost
      }
      if (done_one == edit_outcome::replayed) ++replayed;
      if (done_one == edit_outcome::gone) ++gone;
    }
    token = page.continuation;
    done = page.done() || pending->empty() || (a.replay_count > 0 && replayed >= a.replay_count);
  }
  summary();
  if (replayed == 0 && unreadable == 0 && gone == 0 && parked == 0)
    io.err << "dlqctl replay: no entry of '" << printable(a.queue) << "' matches\n";
  io.out << replayed << '\n';
  return 0;
}

/// discard QUEUE FILTERS (--dry-run | --yes) [--limit N] [--json]
template <class A, class IoT>
int ops_discard(IoT& io, Store& store, const A& a) {
  dlq::DiscardOptions o;
  static_cast<dlq::Filter&>(o) = filter_of(a);
  if (o.empty())
    throw usage_error("say which entries to discard with a filter (" +
                      std::string(filter_option_names) +
                      "); to delete them all use: dlqctl purge " + printable(a.queue) + " --yes");
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
    // redacted argument by argument (next_page_command): the joined line again would run a
    // password= value (or a URL's user-info) on over the arguments after it, token included
    io.err << "more: " << next_page_command(a.command_line, token) << '\n';
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
                     "replay each selected entry with what CMD prints for it (its stdin: the "
                     "entry's payload; run by bash, else /bin/sh, with pipefail; empty output "
                     "is refused and stops the run)");
  replay->add_flag("--keep-newline", a.ops.keep_newline,
                   "keep the new payload's final newline (by default one final \\n or \\r\\n "
                   "of the file or the command's output is removed, and said)");
  replay->add_option("--transform-timeout", a.ops.transform_timeout,
                     "kill --transform-cmd (its whole process group) after this long and "
                     "replay nothing (default 30s)");

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
