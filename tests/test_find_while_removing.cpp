// dlq — get(id) and remove(id) page through the list by offset (512 items
// a page) on storages without find() (MemoryStorage, RedisListStorage). When another client
// removes entries before the scan's position between two page reads — a replay running, a
// trim, another remove — the list moves left under the scan and the entries that slid across
// the page boundary are never looked at: get() says "no such entry" and remove() returns
// false for an entry that is there the whole time.
//
// The storage below is a real MemoryStorage; the wrapper only lets the test act as "another
// client" at an exact moment (right before the scan reads its second page).
#include <functional>
#include <string>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/storage/memory.hpp"
#include "support/catch.hpp"

namespace test_find_while_removing {

namespace {

struct Interleaved {
  dlq::MemoryStorage* inner = nullptr;
  std::function<void(std::size_t start)> before_range;  // called before every range()

  using replay_cursor = dlq::MemoryStorage::replay_cursor;
  std::size_t push(const dlq::Record& r) { return inner->push(r); }
  void push_many(const std::vector<dlq::Record>& r) { inner->push_many(r); }
  std::size_t size(std::string_view q, dlq::ListKind k) { return inner->size(q, k); }
  std::vector<std::string> range(std::string_view q, dlq::ListKind k, std::size_t start,
                                 std::size_t count) {
    if (before_range) before_range(start);
    return inner->range(q, k, start, count);
  }
  bool remove(std::string_view q, dlq::ListKind k, std::string_view id, std::string_view raw) {
    return inner->remove(q, k, id, raw);
  }
  std::size_t purge(std::string_view q, dlq::ListKind k) { return inner->purge(q, k); }
  std::vector<std::string> queues() { return inner->queues(); }
  std::vector<std::size_t> sizes(const std::vector<std::string>& q) { return inner->sizes(q); }
  dlq::StepResult replay_step(std::string_view q, replay_cursor& c, std::size_t n, dlq::Decider d) {
    return inner->replay_step(q, c, n, d);
  }
};

}  // namespace

TEST_CASE("get and remove find an entry while entries before it are removed", "[memory]") {
  for (std::size_t removed_per_page : {1u, 5u, 511u, 700u}) {
    for (const bool use_remove : {false, true}) {
      // The entry right after the first page, and one further down.
      for (const std::size_t target : {std::size_t{512}, std::size_t{1700}}) {
        INFO(removed_per_page << " entries removed before the scan's position per page read; "
                              << (use_remove ? "remove " : "get ") << "entry " << target);
        dlq::MemoryStorage storage;
        dlq::DeadLetterQueue<Interleaved> q(Interleaved{&storage, {}});
        dlq::DeadLetterQueue<dlq::MemoryStorage&> other(storage);  // "another client"
        std::vector<dlq::FailedJob> jobs(3000, dlq::FailedJob{"orders", "{}", {}});
        const std::vector<std::string> ids = q.send_batch(jobs);
        std::size_t next_victim = 0;  // the oldest entries go first, as a replay takes them
        q.storage().before_range = [&](std::size_t start) {
          if (start == 0) return;  // the first page is read before anything changes
          for (std::size_t i = 0; i < removed_per_page && next_victim < target; ++i)
            REQUIRE(other.remove("orders", ids[next_victim++]));
        };
        if (use_remove) {
          CHECK(q.remove("orders", ids[target]));
          CHECK(q.size("orders") == 3000 - next_victim - 1);
        } else {
          CHECK(q.get("orders", ids[target]).has_value());
        }
      }
    }
  }
}

TEST_CASE("remove_ids finds every id while a replay overtakes the scan again and again",
          "[memory]") {
  // A replay of the odd entries runs ahead of the scan: right before each read after the
  // first, every odd entry up to and including the one at the read's start (the last entry
  // the scan examined) is gone. The even ones (the ids asked for) stay. Before the fix the
  // scan kept one anchor (the last entry of the page before): once it was replayed the scan
  // started over, and after 3 restarts it gave up and reported ids that were there the whole
  // time as not found (test_contract_redis[_cluster], "remove_ids finds every id while a
  // replay takes entries from the head", failed this way under load).
  dlq::MemoryStorage storage;
  dlq::DeadLetterQueue<Interleaved> q(Interleaved{&storage, {}});
  dlq::DeadLetterQueue<dlq::MemoryStorage&> other(storage);  // "another client"
  std::vector<dlq::FailedJob> jobs;
  for (int i = 0; i < 3000; ++i)
    jobs.push_back({"orders", std::to_string(i), {}});
  const std::vector<std::string> ids = q.send_batch(jobs);
  std::vector<std::string> even;
  for (std::size_t i = 0; i < ids.size(); i += 2)
    even.push_back(ids[i]);
  std::size_t replayed = 0;
  q.storage().before_range = [&](std::size_t start) {
    if (start == 0) return;
    for (const auto& e : other.peek("orders", 0, start + 1))
      if (std::stoi(e.payload) % 2 == 1 && other.remove("orders", e.id)) ++replayed;
  };
  const dlq::RemoveReport r = q.remove_ids("orders", even);
  INFO(replayed << " odd entries removed by the other client during the scan");
  CHECK(replayed > 0);
  CHECK(r.removed == even);
  CHECK(r.not_found.empty());
}

}  // namespace test_find_while_removing
