// The SQLite store across processes: a writer killed with SIGKILL at random points loses no
// acknowledged entry and leaves a sound file; two processes sending to one file at once lose
// nothing and see no lock error; a replay killed between push and remove loses nothing and
// the next replay pushes again (at-least-once); the poison guard and Overflow::reject count
// and bound across processes; a version 1 file opened by two processes is migrated once.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/kv/sinks.hpp"
#include "kv_fixtures.hpp"
#include "sqlite_v1_file.hpp"
#include "support/catch.hpp"

using dlq::ListKind;
using dlq::Record;
using dlq::kv::SqliteOptions;
using dlq::kv::SqliteStore;

namespace {

/// Writes all of `line` to `fd` (the child's report to the parent; unbuffered, so it is
/// "flushed" the moment write returns).
void report(int fd, const std::string& line) {
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(3);
    done += static_cast<std::size_t>(n);
  }
}

/// Reads everything from `fd` until EOF or `deadline`.
std::string read_all(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string out;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

/// Reads from `fd` until the text read holds a complete line (or EOF, or `limit`).
std::string read_until_line(int fd, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string out;
  char c = 0;
  while (out.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 100);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.push_back(c);
  }
  return out;
}

/// Complete lines of `text` (a trailing line without '\n' was not fully reported: dropped).
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(text.substr(start, nl - start));
  return out;
}

/// Waits for `pid` up to `limit`; kills it with SIGKILL if it is still running then.
int wait_bounded(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL("child " << pid << " did not finish within " << limit.count() << " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { REQUIRE(::pipe(fd) == 0); }
  ~Pipe() {
    close_read();
    close_write();
  }
  void close_read() {
    if (fd[0] >= 0) ::close(fd[0]);
    fd[0] = -1;
  }
  void close_write() {
    if (fd[1] >= 0) ::close(fd[1]);
    fd[1] = -1;
  }
};

}  // namespace

TEST_CASE("a writer killed with SIGKILL at random points loses no acknowledged entry",
          "[kv][sqlite][durability]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  std::set<std::string> acknowledged;
  std::size_t kills_mid_stream = 0;

  for (int round = 0; round < 20; ++round) {
    const bool full = round % 2 == 0;
    INFO("round " << round << (full ? " synchronous=FULL" : " synchronous=NORMAL"));
    Pipe pipe;
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // the writer
      pipe.close_read();
      try {
        SqliteOptions o;
        o.synchronous = full ? dlq::kv::SqliteSync::full : dlq::kv::SqliteSync::normal;
        dlq::KeyValueStorage s(SqliteStore(path, o), dlq::kv::MemoryQueues{});
        const std::string envelope(200, 'e');
        for (int i = 0; i < 1000000; ++i) {
          const std::string id = "r" + std::to_string(round) + "-" + std::to_string(i);
          if (i % 5 == 4) {  // a batch of three in one transaction
            const std::string id2 = id + "b", id3 = id + "c";
            s.push_many({Record{"orders", id, id, envelope}, Record{"orders", id2, id2, envelope},
                         Record{"orders", id3, id3, envelope}});
            report(pipe.fd[1], id + "\n" + id2 + "\n" + id3 + "\n");
          } else {
            s.push(Record{"orders", id, id, envelope});
            report(pipe.fd[1], id + "\n");
          }
        }
      } catch (const std::exception& e) {
        report(pipe.fd[1], std::string("ERROR ") + e.what() + "\n");
      }
      ::_exit(0);
    }
    pipe.close_write();
    // Three rounds in four wait for the writer's first acknowledgement, so that most kills
    // land mid-stream even on a slow machine; the others may also hit the open and the
    // schema set-up. Then a random delay.
    std::string text;
    if (round % 4 != 0) text = read_until_line(pipe.fd[0], std::chrono::seconds(20));
    const int delay_ms = std::uniform_int_distribution<int>(0, 60)(rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    const int status = wait_bounded(pid, std::chrono::milliseconds(10000));
    CHECK(WIFSIGNALED(status));
    text += read_all(pipe.fd[0], std::chrono::steady_clock::now() + std::chrono::seconds(5));
    const auto reported = lines(text);
    for (const std::string& l : reported) {
      REQUIRE(l.rfind("ERROR", 0) != 0);  // the writer never saw an error
      acknowledged.insert(l);
    }
    if (!reported.empty()) ++kills_mid_stream;

    SqliteStore store(path);  // reopen after the crash (recovers the WAL)
    REQUIRE(store.integrity_check() == "ok");
    dlq::KeyValueStorage s(store, dlq::kv::MemoryQueues{});
    std::set<std::string> present;
    for (const auto& item : s.items("orders", ListKind::dead, dlq::kv::Window{}))
      present.insert(item.id);
    for (const std::string& id : acknowledged) {
      INFO("acknowledged id " << id);
      REQUIRE(present.count(id) == 1);
    }
  }
  CHECK(acknowledged.size() > 0);
  CHECK(kills_mid_stream >= 15);  // at least the rounds that waited for a first write
}

namespace {
/// Forks `processes` children that start together and each run `child(index)`; returns what
/// each one returned (or "ERROR <what>" if it threw), checking that each exited cleanly.
std::vector<std::string> run_together(int processes, const std::function<std::string(int)>& child) {
  Pipe go;
  std::vector<pid_t> pids;
  std::vector<int> outputs;
  for (int p = 0; p < processes; ++p) {
    Pipe out;
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      out.close_read();
      go.close_write();
      char c = 0;
      if (::read(go.fd[0], &c, 1) != 1) ::_exit(4);
      int code = 0;
      try {
        report(out.fd[1], child(p));
      } catch (const std::exception& e) {
        report(out.fd[1], std::string("ERROR ") + e.what());
        code = 1;
      }
      ::_exit(code);
    }
    out.close_write();
    pids.push_back(pid);
    outputs.push_back(::dup(out.fd[0]));
  }
  go.close_read();
  const std::string start(static_cast<std::size_t>(processes), 'g');
  REQUIRE(::write(go.fd[1], start.data(), start.size()) == static_cast<ssize_t>(start.size()));
  go.close_write();
  std::vector<std::string> results;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    const int status = wait_bounded(pids[i], std::chrono::milliseconds(120000));
    results.push_back(
        read_all(outputs[i], std::chrono::steady_clock::now() + std::chrono::seconds(5)));
    ::close(outputs[i]);
    INFO("child " << i << " reported: " << results.back());
    CHECK(results.back().rfind("ERROR", 0) != 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  return results;
}

std::vector<long long> numbers(const std::string& text) {
  std::vector<long long> out;
  std::istringstream in(text);
  for (long long v; in >> v;)
    out.push_back(v);
  return out;
}
}  // namespace

TEST_CASE("two processes sending to one new file at once lose nothing and see no lock error",
          "[kv][sqlite][processes]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");  // does not exist yet: both race to create it
  constexpr int processes = 2;
  constexpr int per_process = 300;
  const auto results = run_together(processes, [&](int p) {
    dlq::KeyValueStorage s(SqliteStore(path), dlq::kv::MemoryQueues{});
    for (int i = 0; i < per_process; ++i) {
      const std::string id = "p" + std::to_string(p) + "-" + std::to_string(i);
      s.push(Record{"orders", id, id, "{\"n\":" + std::to_string(i) + "}"});
      if (i % 50 == 0) (void)s.range("orders", ListKind::dead, 0, 10);
    }
    return std::string("done");
  });
  for (const auto& r : results)
    CHECK(r == "done");
  SqliteStore store(path);
  dlq::KeyValueStorage s(store, dlq::kv::MemoryQueues{});
  CHECK(s.size("orders", ListKind::dead) == processes * per_process);
  for (int p = 0; p < processes; ++p)
    for (int i = 0; i < per_process; i += 37) {
      const std::string id = "p" + std::to_string(p) + "-" + std::to_string(i);
      CHECK(s.find("orders", ListKind::dead, id) ==
            std::optional<std::string>("{\"n\":" + std::to_string(i) + "}"));
    }
  CHECK(store.integrity_check() == "ok");
}

namespace {
/// A durable destination queue: a second SQLite file, one record per pushed payload.
struct SqliteQueueSink {
  SqliteStore dest;
  std::string tag;  // makes record ids unique per process
  long n = 0;
  void push_many(const std::vector<dlq::kv::Message>& messages) {
    std::vector<std::string> ids;
    ids.reserve(messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i)
      ids.push_back(tag + std::to_string(n++));
    std::vector<dlq::kv::Write> writes;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      writes.push_back(dlq::kv::Write{"queue", ids[i], messages[i].payload});
    }
    dest.save(writes);
  }
  std::vector<std::string> contents() {
    std::vector<std::string> out;
    for (auto& item : dest.list("queue", dlq::kv::Window{}))
      out.push_back(item.value);
    return out;
  }
};

void replay_all(dlq::KeyValueStorage<SqliteStore, std::reference_wrapper<SqliteQueueSink>>& s) {
  std::remove_reference_t<decltype(s)>::replay_cursor cursor;
  for (int guard = 0; guard < 1000; ++guard) {
    auto r = s.replay_step("orders", cursor, 100, [](std::string_view raw, dlq::Decision& d) {
      d.action = dlq::Action::replay;
      d.destination = "orders";
      d.payload = raw;
    });
    if (r.examined == 0) return;
  }
  FAIL("replay did not finish");
}
}  // namespace

TEST_CASE("a replay killed between push and remove leaves the records; the next pushes again",
          "[kv][sqlite][durability][replay]") {
  kvtest::TempDir dir;
  const std::string dlq_path = dir.file("dlq.db");
  const std::string queue_path = dir.file("queue.db");
  {
    dlq::KeyValueStorage s(SqliteStore(dlq_path), dlq::kv::MemoryQueues{});
    s.push_many({Record{"orders", "job-1", "job-1", "one"},
                 Record{"orders", "job-2", "job-2", "two"},
                 Record{"orders", "job-3", "job-3", "three"}});
  }
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the replayer: dies right after the sink stored the payloads
    try {
      SqliteStore store(dlq_path);
      SqliteStore dest(queue_path);
      dlq::KeyValueStorage s(store, [&](const std::vector<dlq::kv::Message>& messages) {
        SqliteQueueSink sink{dest, "child-"};
        sink.push_many(messages);
        ::raise(SIGKILL);
      });
      std::remove_reference_t<decltype(s)>::replay_cursor cursor;
      s.replay_step("orders", cursor, 100, [](std::string_view raw, dlq::Decision& d) {
        d.action = dlq::Action::replay;
        d.destination = "orders";
        d.payload = raw;
      });
    } catch (...) {
    }
    ::_exit(5);  // not reached when the kill lands
  }
  const int status = wait_bounded(pid, std::chrono::milliseconds(30000));
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);

  SqliteQueueSink sink{SqliteStore(queue_path), "parent-"};
  CHECK(sink.contents() == std::vector<std::string>{"one", "two", "three"});  // pushed
  dlq::KeyValueStorage s(SqliteStore(dlq_path), std::ref(sink));
  CHECK(s.size("orders", ListKind::dead) == 3);  // ... and not removed: nothing lost

  replay_all(s);  // the next replay pushes them again: duplicates, the price of never losing
  CHECK(s.size("orders", ListKind::dead) == 0);
  CHECK(sink.contents() == std::vector<std::string>{"one", "two", "three", "one", "two", "three"});
}

TEST_CASE(
    "a DeadLetterQueue replay killed after its first push loses nothing; the rerun "
    "finishes it",
    "[kv][sqlite][durability][replay][front-end]") {
  kvtest::TempDir dir;
  const std::string dlq_path = dir.file("dlq.db");
  const std::string queue_path = dir.file("queue.db");
  {
    dlq::KeyValueStorage s(SqliteStore(dlq_path), dlq::kv::MemoryQueues{});
    dlq::DeadLetterQueue<decltype(s)&> q(s);
    for (int i = 0; i < 10; ++i) {
      dlq::Failure f;
      f.error = "e";
      f.job_id = "job-" + std::to_string(i);
      q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", f);
    }
  }
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the operator's replay: killed right after the first batch was pushed
    try {
      SqliteStore dest(queue_path);
      dlq::KeyValueStorage s(SqliteStore(dlq_path), [&](const std::vector<dlq::kv::Message>& m) {
        SqliteQueueSink sink{dest, "child-"};
        sink.push_many(m);
        ::raise(SIGKILL);
      });
      dlq::DeadLetterQueue<decltype(s)&> q(s);
      q.replay_all("orders");
    } catch (...) {
    }
    ::_exit(5);
  }
  const int status = wait_bounded(pid, std::chrono::milliseconds(30000));
  REQUIRE(WIFSIGNALED(status));

  SqliteQueueSink sink{SqliteStore(queue_path), "parent-"};
  const auto first_run = sink.contents();
  CHECK(first_run == std::vector<std::string>{"{\"n\":0}"});  // the front end's first batch is 1
  dlq::KeyValueStorage s(SqliteStore(dlq_path), std::ref(sink));
  dlq::DeadLetterQueue<decltype(s)&> q(s);
  CHECK(q.size("orders") == 10);  // pushed but not removed: still there
  const auto report = q.replay_all("orders");
  CHECK(report.replayed == 10);
  CHECK(q.size("orders") == 0);
  std::vector<std::string> expected{"{\"n\":0}"};  // the duplicate: the price of never losing
  for (int i = 0; i < 10; ++i)
    expected.push_back("{\"n\":" + std::to_string(i) + "}");
  CHECK(sink.contents() == expected);
}

// --- policies across processes: the poison guard's counts and Overflow::reject live in the
// file, so every process sharing it counts and bounds together

TEST_CASE("two processes incrementing one counter see every value exactly once",
          "[kv][sqlite][processes][policies]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  { SqliteStore create(path); }
  constexpr int per_process = 150;
  const auto results = run_together(2, [&](int) {
    SqliteOptions o;
    o.synchronous = dlq::kv::SqliteSync::normal;  // the lock is what is tested, not the disk
    SqliteStore store(path, o);
    std::string text;
    for (int i = 0; i < per_process; ++i)
      text += std::to_string(
                  store.increment("dlq:{orders}:dead", "job:x", std::chrono::seconds(3600))) +
              " ";
    return text;
  });
  std::vector<long long> all;
  for (const std::string& r : results) {
    const auto mine = numbers(r);
    CHECK(mine.size() == per_process);
    CHECK(std::is_sorted(mine.begin(), mine.end()));
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<long long> expected(2 * per_process);
  for (std::size_t i = 0; i < expected.size(); ++i)
    expected[i] = static_cast<long long>(i + 1);
  CHECK(all == expected);
  CHECK(SqliteStore(path).increment("dlq:{orders}:dead", "job:x", std::chrono::seconds(3600)) ==
        2 * per_process + 1);
}

TEST_CASE("two worker processes sharing a file reach the poison park limit together",
          "[kv][sqlite][processes][policies][poison]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  { SqliteStore create(path); }
  constexpr int per_process = 20;
  constexpr int park_after = 10;
  const auto results = run_together(2, [&](int p) {
    SqliteOptions o;
    o.synchronous = dlq::kv::SqliteSync::normal;
    dlq::KeyValueStorage s(SqliteStore(path, o), dlq::kv::MemoryQueues{});
    dlq::Options options;
    options.poison_guard.park_after = park_after;
    options.worker = "w" + std::to_string(p);
    dlq::DeadLetterQueue<decltype(s)&> q(s, options);
    for (int i = 0; i < per_process; ++i) {
      dlq::Failure f;
      f.error = "still broken";
      f.job_id = "job-7";
      q.send_to_dlq("orders", R"({"job":7})", f);
    }
    return std::to_string(q.counters().parked);
  });
  long long parked = 0;
  for (const std::string& r : results)
    for (long long v : numbers(r))
      parked += v;
  // 40 failures of one job across the two processes: failures 11..40 are parked. With
  // per-process counts no process would have passed 20, and only 20 would be parked.
  CHECK(parked == 2 * per_process - park_after);
  dlq::KeyValueStorage s(SqliteStore(path), dlq::kv::MemoryQueues{});
  dlq::DeadLetterQueue<decltype(s)&> q(s);
  const auto e = q.get("orders", "job-7");
  REQUIRE(e);
  // The stored entry is the one whose save landed last; its count is that process's last
  // bump — 40 for the process that bumped last, at least 20 for the other (a process that
  // is descheduled between its last bump and its save writes last with a lower count). The
  // shared count itself is proven by `parked` above (per-process counts would park 20).
  CHECK(e->dead_letter_count >= per_process);
  CHECK(e->dead_letter_count <= 2 * per_process);
  CHECK(e->parked);
  CHECK(q.size("orders") == 1);
}

TEST_CASE("two processes sending into a rejecting queue never take it past max_length",
          "[kv][sqlite][processes][policies][retention]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  { SqliteStore create(path); }
  constexpr int per_process = 50;
  constexpr std::size_t max_length = 60;
  const auto results = run_together(2, [&](int p) {
    SqliteOptions o;
    o.synchronous = dlq::kv::SqliteSync::normal;
    dlq::KeyValueStorage s(SqliteStore(path, o), dlq::kv::MemoryQueues{});
    dlq::Options options;
    options.retention.max_length = max_length;
    options.retention.overflow = dlq::Overflow::reject;
    dlq::DeadLetterQueue<decltype(s)&> q(s, options);
    int stored = 0;
    for (int i = 0; i < per_process; ++i) {
      try {
        q.send_to_dlq("orders", "{}", "e", 1, "p" + std::to_string(p));
        ++stored;
      } catch (const dlq::queue_full_error&) {
      }
    }
    return std::to_string(stored) + " " + std::to_string(q.counters().rejected);
  });
  long long stored = 0, rejected = 0;
  for (const std::string& r : results) {
    const auto v = numbers(r);
    REQUIRE(v.size() == 2);
    stored += v[0];
    rejected += v[1];
  }
  CHECK(stored == static_cast<long long>(max_length));
  CHECK(rejected == 2 * per_process - static_cast<long long>(max_length));
  CHECK(SqliteStore(path).count("dlq:{orders}:dead") == max_length);
}

TEST_CASE("two processes opening one version 1 file at once migrate it once",
          "[kv][sqlite][processes][compat]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("v1.db");
  kvtest::write_sqlite_v1_file(path, 500);
  const auto results = run_together(2, [&](int p) {
    dlq::KeyValueStorage s(SqliteStore(path), dlq::kv::MemoryQueues{});
    const std::string id = "new-" + std::to_string(p);
    s.push(Record{"orders", id, id, "n"});
    return std::string("ok");
  });
  for (const std::string& r : results)
    CHECK(r == "ok");
  SqliteStore store(path);
  CHECK(store.count("dlq:{orders}:dead") == 2 + 500 + 2);
  CHECK(store.list("dlq:{orders}:dead", dlq::kv::Window{}).size() == 2 + 500 + 2);
  CHECK(store.count("dlq:{orders}:corrupt") == 1);
  CHECK(store.integrity_check() == "ok");
}

TEST_CASE("a process killed with SIGKILL while it migrates a version 1 file leaves it whole",
          "[kv][sqlite][durability][compat]") {
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  constexpr int extra = 20000;
  for (int round = 0; round < 6; ++round) {
    INFO("round " << round);
    kvtest::TempDir dir;
    const std::string path = dir.file("v1.db");
    kvtest::write_sqlite_v1_file(path, extra);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        SqliteStore store(path);  // migrates
        ::_exit(0);
      } catch (...) {
        ::_exit(1);
      }
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 20000)(rng)));
    ::kill(pid, SIGKILL);
    (void)wait_bounded(pid, std::chrono::milliseconds(30000));
    // Wherever the kill landed — before, during or after the migration's transaction — the
    // file opens (migrated now if it was not), whole and with exact counts.
    SqliteStore store(path);
    CHECK(store.integrity_check() == "ok");
    CHECK(store.count("dlq:{orders}:dead") == 2 + extra);
    CHECK(store.list("dlq:{orders}:dead", dlq::kv::Window{}).size() == 2 + extra);
    CHECK(store.count("dlq:{orders}:corrupt") == 1);
    CHECK(store.increment("dlq:{orders}:dead", "job:x", std::chrono::seconds(60)) == 1);
  }
}
