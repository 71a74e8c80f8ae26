// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The optional storage member range_bytes (dlq::BoundedRange) checked the same way on every
// storage that has it: tests/test_memory.cpp (MemoryStorage) and
// tests/redis/test_redis_list.cpp (RedisListStorage, a script reading in chunks of <= 64).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dlq/storage.hpp"
#include "support/catch.hpp"

namespace dlq::test {

/// Pushes 80 items of 10 bytes then 20 of 1000 to `queue`'s dead list of `storage` and
/// checks range_bytes over them, then empty items in `queue`-empty (both must be empty
/// before).
template <class Storage>
void check_range_bytes(Storage& storage, const std::string& queue) {
  std::vector<std::string> items;
  for (std::size_t i = 0; i < 100; ++i) {
    std::string item = std::to_string(i) + ":";
    item.resize(i < 80 ? 10 : 1000, 'x');
    items.push_back(item);
    storage.push(Record{queue, "", "", items.back()});
  }
  const auto read = [&](std::size_t start, std::size_t count, std::size_t least,
                        std::size_t bytes) {
    return storage.range_bytes(queue, ListKind::dead, start, count, least, bytes);
  };
  const auto slice = [&](std::size_t from, std::size_t n) {
    return std::vector<std::string>(items.begin() + from, items.begin() + from + n);
  };
  BoundedRange r = read(0, 200, 1, 1 << 20);  // the end: not capped
  CHECK(r.items == items);
  CHECK_FALSE(r.capped);
  r = read(0, 100, 1, 1 << 20);  // count reached
  CHECK(r.items.size() == 100);
  CHECK_FALSE(r.capped);
  r = read(0, 100, 1, 805);  // 80 x 10 bytes fit, the next 1000 do not (over one chunk)
  CHECK(r.items == slice(0, 80));
  CHECK(r.capped);
  r = read(80, 10, 1, 500);  // at least one item, whatever its size
  CHECK(r.items == slice(80, 1));
  CHECK(r.capped);
  r = read(78, 10, 5, 1500);  // at least min_count items, then none beyond the budget
  CHECK(r.items == slice(78, 5));
  CHECK(r.capped);
  r = read(95, 10, 1, 3000);  // within the budget up to the end
  CHECK(r.items == slice(95, 3));
  CHECK(r.capped);
  r = read(99, 10, 1, 10);  // the last item alone: the end, not the cap
  CHECK(r.items == slice(99, 1));
  CHECK_FALSE(r.capped);
  CHECK(read(100, 10, 1, 10).items.empty());
  CHECK_FALSE(read(100, 10, 1, 10).capped);
  CHECK(read(0, 0, 1, 10).items.empty());
  CHECK(storage.range_bytes(queue + "-none", ListKind::dead, 0, 10, 1, 10).items.empty());
  CHECK(storage.range_bytes(queue, ListKind::corrupt, 0, 10, 1, 10).items.empty());
  // Empty items after min_count items already over the budget: none of them fits (the
  // total is over max_bytes whatever they add), as the Redis script decides.
  const std::string empties = queue + "-empty";
  for (const std::string item : {"0123456789", "", "", "ab"})
    storage.push(Record{empties, "", "", item});
  r = storage.range_bytes(empties, ListKind::dead, 0, 10, 1, 4);
  CHECK(r.items == std::vector<std::string>{"0123456789"});
  CHECK(r.capped);
  r = storage.range_bytes(empties, ListKind::dead, 1, 10, 1, 0);  // within a budget of 0
  CHECK(r.items == std::vector<std::string>{"", ""});
  CHECK(r.capped);
}

}  // namespace dlq::test
