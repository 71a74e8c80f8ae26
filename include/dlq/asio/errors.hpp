// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/errors.hpp
/// The one error type dlq::asio adds to the dlq::error hierarchy (dlq/errors.hpp):
/// dlq::asio::cancelled_error, for an operation completed by its cancellation slot.
#pragma once

#include "dlq/errors.hpp"

namespace dlq::asio {

/// An operation completed early because its cancellation slot was emitted (terminal
/// cancellation; see AsyncDeadLetterQueue). outcome_unknown() is true for a send: its
/// command may have gone out, and may still be stored (it is never sent again); false for
/// a read.
class cancelled_error : public dlq::storage_error {
 public:
  using storage_error::storage_error;
};

}  // namespace dlq::asio
