// MemoryStorage on its own: the lists, the source queues and the replay-step protocol.
#include "dlq/storage/memory.hpp"

#include <string>
#include <vector>

#include "support/catch.hpp"

namespace {
dlq::Record rec(std::string_view q, std::string_view raw) {
  return {q, {}, {}, raw};
}
}  // namespace

TEST_CASE("lists keep insertion order and answer sizes and ranges", "[memory]") {
  dlq::MemoryStorage s;
  s.push(rec("a", "1"));
  s.push_many({rec("a", "2"), rec("b", "x"), rec("a", "3")});
  CHECK(s.size("a", dlq::ListKind::dead) == 3);
  CHECK(s.range("a", dlq::ListKind::dead, 1, 10) == std::vector<std::string>{"2", "3"});
  CHECK(s.range("a", dlq::ListKind::dead, 5, 10).empty());
  CHECK(s.sizes({"a", "b", "c"}) == std::vector<std::size_t>{3, 1, 0});
  CHECK(s.queues() == std::vector<std::string>{"a", "b"});
  CHECK(s.remove("a", dlq::ListKind::dead, "", "2"));
  CHECK_FALSE(s.remove("a", dlq::ListKind::dead, "", "2"));
  CHECK(s.purge("a", dlq::ListKind::dead) == 2);
  CHECK(s.queues() == std::vector<std::string>{"b"});
}

TEST_CASE("source queues are first in, first out", "[memory]") {
  dlq::MemoryStorage s;
  CHECK_FALSE(s.source_pop("jobs").has_value());
  s.source_push("jobs", "a");
  s.source_push("jobs", "b");
  CHECK(s.source_size("jobs") == 2);
  CHECK(s.source_pop("jobs") == std::optional<std::string>("a"));
  CHECK(s.source_range("jobs") == std::vector<std::string>{"b"});
}

TEST_CASE("a replay step applies keep, replay and set-aside together", "[memory]") {
  dlq::MemoryStorage s;
  for (const char* v : {"r1", "k1", "bad", "r2", "k2"})
    s.push(rec("q", v));
  dlq::MemoryStorage::replay_cursor cursor;
  auto decide = [](std::string_view raw, dlq::Decision& d) {
    if (raw[0] == 'r') {
      d.action = dlq::Action::replay;
      d.destination = "dest";
      d.payload = raw.substr(1);
    } else if (raw == "bad") {
      d.action = dlq::Action::set_aside;
    }
  };
  const auto r = s.replay_step("q", cursor, 10, decide);
  CHECK(r.examined == 5);
  CHECK_FALSE(r.conflict);
  CHECK(cursor.offset == 2);
  CHECK(s.range("q", dlq::ListKind::dead, 0, 10) == std::vector<std::string>{"k1", "k2"});
  CHECK(s.range("q", dlq::ListKind::corrupt, 0, 10) == std::vector<std::string>{"bad"});
  CHECK(s.source_range("dest") == std::vector<std::string>{"1", "2"});
  CHECK(s.replay_step("q", cursor, 10, decide).examined == 0);
}

TEST_CASE("a replay step whose window changed applies nothing", "[memory]") {
  dlq::MemoryStorage s;
  for (const char* v : {"a", "b", "c"})
    s.push(rec("q", v));
  dlq::MemoryStorage::replay_cursor cursor;
  bool removed = false;
  auto decide = [&](std::string_view, dlq::Decision& d) {
    if (!removed) removed = s.remove("q", dlq::ListKind::dead, "", "b");  // someone else acts
    d.action = dlq::Action::replay;
    d.destination = "dest";
    d.payload = "x";
  };
  const auto r = s.replay_step("q", cursor, 10, decide);
  CHECK(r.conflict);
  CHECK(r.examined == 0);
  CHECK(s.source_size("dest") == 0);
  CHECK(s.size("q", dlq::ListKind::dead) == 2);
  // Pushes at the tail do not disturb a window at the head.
  auto tail_push = [&](std::string_view, dlq::Decision& d) {
    s.push(rec("q", "late"));
    d.action = dlq::Action::replay;
    d.destination = "dest";
    d.payload = "x";
  };
  CHECK_FALSE(s.replay_step("q", cursor, 2, tail_push).conflict);
  CHECK(s.range("q", dlq::ListKind::dead, 0, 10) == std::vector<std::string>{"late", "late"});
}

TEST_CASE("a MemoryStorage can be moved with its contents", "[memory]") {
  dlq::MemoryStorage a;
  a.push(rec("q", "1"));
  dlq::MemoryStorage b = std::move(a);
  CHECK(b.size("q", dlq::ListKind::dead) == 1);
}

namespace {
void decide_replay_all(std::string_view raw, dlq::Decision& d) {
  d.action = dlq::Action::replay;
  d.destination = "dest";
  d.payload = raw;
}
}  // namespace

TEST_CASE("a plain function can be the decider", "[memory]") {
  dlq::MemoryStorage s;
  s.push(rec("q", "a"));
  dlq::MemoryStorage::replay_cursor cursor;
  CHECK(s.replay_step("q", cursor, 10, decide_replay_all).examined == 1);
  CHECK(s.source_range("dest") == std::vector<std::string>{"a"});
}
