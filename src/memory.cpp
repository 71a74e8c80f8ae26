// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Compiled mode (CMake DLQ_COMPILED=ON): the core's shipped instantiations, built once into
// dlq::dlq. The umbrella headers declare them `extern template` (end of dlq/dlq.hpp and
// dlq/kv.hpp), so users' translation units only call them. The definitions of
// the core's non-template functions (the `-inl.hpp` files; see DLQ_INLINE in
// dlq/detail/compiled.hpp) are compiled here, once: the headers only declare them.
#include "dlq/dlq.hpp"
#include "dlq/kv.hpp"

#include "dlq/audit-inl.hpp"
#include "dlq/detail/counter_map-inl.hpp"
#include "dlq/detail/id-inl.hpp"
#include "dlq/detail/queue_core-inl.hpp"
#include "dlq/entry-inl.hpp"
#include "dlq/operations-inl.hpp"
#include "dlq/replay-inl.hpp"
#include "dlq/retention-inl.hpp"
#include "dlq/search-inl.hpp"
#include "dlq/stats-inl.hpp"
#include "dlq/storage/memory-inl.hpp"

namespace dlq {
namespace detail {
template ErrorsReport summarize_errors<range_reader>(std::string_view, const ErrorsOptions&,
                                                     std::size_t, range_reader);
}  // namespace detail
template class DeadLetterQueue<MemoryStorage>;
template class DeadLetterQueue<MemoryStorage&>;
template class KeyValueStorage<kv::MemoryStore>;
template class DeadLetterQueue<KeyValueStorage<kv::MemoryStore>>;
template class DeadLetterQueue<KeyValueStorage<kv::MemoryStore>&>;
}  // namespace dlq
