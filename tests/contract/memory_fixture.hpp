// Contract-suite fixture for dlq::MemoryStorage.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dlq/storage/memory.hpp"

struct MemoryFixture {
  using storage_type = dlq::MemoryStorage;

  storage_type& storage() { return storage_; }

  std::vector<std::string> source(std::string_view queue) { return storage_.source_range(queue); }

  void push_raw(std::string_view queue, std::string_view raw) {
    storage_.push(dlq::Record{queue, {}, {}, raw});
  }

 private:
  storage_type storage_;
};
