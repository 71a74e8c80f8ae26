// Key-value store suite fixtures (tests/contract/kv_store_suite.hpp) for the in-memory
// stores: dlq::kv::MemoryStore, and MinimalStore — a store with only the four required
// members, so that the adapter's fallbacks are tested too.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "dlq/kv/memory_store.hpp"
#include "dlq/kv/store.hpp"

namespace kvtest {

/// A store with only the four required members (no count, no remove_all): proves the
/// adapter's fallbacks give the same results.
class MinimalStore {
 public:
  void save(const std::vector<dlq::kv::Write>& writes) { inner_.save(writes); }
  std::optional<dlq::kv::Item> load(std::string_view c, std::string_view id) {
    return inner_.load(c, id);
  }
  std::vector<dlq::kv::Item> list(std::string_view c, const dlq::kv::Window& w) {
    return inner_.list(c, w);
  }
  std::size_t remove(const std::vector<dlq::kv::Removal>& r) { return inner_.remove(r); }

 private:
  dlq::kv::MemoryStore inner_;
};
static_assert(dlq::kv::is_store_v<MinimalStore>);
static_assert(!dlq::kv::detail::has_count<MinimalStore>::value);

struct MemoryKv {
  using store_type = dlq::kv::MemoryStore;
  static constexpr bool durable = false;
  store_type make() { return store_type{}; }
};

struct MinimalKv {
  using store_type = MinimalStore;
  static constexpr bool durable = false;
  store_type make() { return store_type{}; }
};

}  // namespace kvtest
