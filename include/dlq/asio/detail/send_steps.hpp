// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/send_steps.hpp
/// Internal to dlq::asio: what a send carries from its initiating call to its completion —
/// the job prepared in the call (detail::one_send), its completion (detail::send_done) and
/// the error of a failed poison count (detail::count_failed). Not part of the API.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/asio/detail/completion.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"

namespace dlq::asio::detail {

// A job kept for the poison guard: its envelope is built once its count is known.
struct counted_job {
  std::string payload;
  Failure failure;
  std::chrono::system_clock::time_point now;  // the send's clock, read in the initiating call
};

// One send_to_dlq on an asynchronous storage, prepared in the initiating call: the job is
// not copied, only its envelope, id and queue are kept (and Failure::error when an
// on_event hook will report it) — except with the poison guard on, where the job is kept
// (`job`) and the envelope is built after its count.
struct one_send {
  std::string queue;
  std::string id;
  std::string envelope;
  std::string error;
  std::exception_ptr refused;        // the job was refused before anything was sent
  std::unique_ptr<counted_job> job;  // poison guard: the job, its envelope not built yet
};

// A send's completion: the ids of a batch, or the one id of send_to_dlq.
struct send_done {
  once_fn<std::vector<std::string>> batch;
  once_fn<std::string> one;
  void operator()(std::exception_ptr e, std::vector<std::string> ids) {
    if (one) return one(e, ids.empty() ? std::string() : std::move(ids.front()));
    batch(e, std::move(ids));
  }
};

// The error of a send whose poison count failed: the same type (and reply code), but not
// outcome_unknown — the entry was not written, whatever happened to the count.
// A counter key holding something else (another type, or text INCR refuses) fails every
// send of that job until it is deleted or expires: the hint says so, not "send it again".
inline std::exception_ptr count_failed(const std::exception_ptr& e, const char* where) {
  const auto text = [where](const std::exception& x, const char* hint) {
    return dlq::detail::message(
        "asio", where,
        std::string("the poison guard's count failed, the entry was not stored (") + x.what() + ")",
        hint);
  };
  const char* const again = "send it again; the count may or may not have been bumped";
  try {
    std::rethrow_exception(e);
  } catch (const reply_error& x) {
    const bool not_a_count = x.code() == "WRONGTYPE" ||
                             std::string_view(x.what()).find("not an integer") != std::string::npos;
    return std::make_exception_ptr(reply_error(
        text(x, not_a_count ? "the counter key named above holds something that is not a poison "
                              "count, so every send of this job fails the same way: delete that "
                              "key (it was not bumped) before sending the job again"
                            : again),
        x.code(), false));
  } catch (const timeout_error& x) {
    return std::make_exception_ptr(timeout_error(text(x, again), false));
  } catch (const connection_error& x) {
    return std::make_exception_ptr(connection_error(text(x, again), false));
  } catch (const protocol_error& x) {
    return std::make_exception_ptr(protocol_error(text(x, again), false));
  } catch (const conflict_error& x) {
    return std::make_exception_ptr(conflict_error(text(x, again), false));
  } catch (const storage_error& x) {
    return std::make_exception_ptr(storage_error(text(x, again), false));
  } catch (...) {
    return e;
  }
}

}  // namespace dlq::asio::detail
