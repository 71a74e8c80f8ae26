// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/console_options.hpp
/// dlq::http::ConsoleOptions — the settings of a dlq::http::Console (dlq/http/console.hpp):
/// its prefix, tokens, read-only switch, the limits of each request and its log.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <dlq/http/console_identity.hpp>
#include <dlq/policies.hpp>
#include <dlq/queue_names.hpp>

namespace dlq {
namespace http {

/// Settings of a Console. Every default is usable as is on loopback.
struct ConsoleOptions {
  /// Path prefix the routes are mounted under, e.g. "/dlq"; "" (the default) = the root.
  /// Letters, digits, '/', '_' and '-' only.
  std::string prefix;
  /// Token every /api request and /metrics must carry; "" (the default) = none (loopback
  /// only: requests must name a loopback Host).
  std::string token;
  /// Named tokens (dlq/http/console_identity.hpp): a request carrying one of their secrets
  /// is that token's caller — the audit trail names it, and its role decides which routes
  /// answer (required_role(); others 403). Empty (the default) = none. With both `token` and
  /// `tokens` set, `token` is one more caller: role admin, no name of its own (the audit
  /// names the backend's actor). With either set, every /api request and /metrics needs a
  /// token (401 without one).
  std::vector<NamedToken> tokens;
  /// Refuse every mutation with 403 (the page hides its buttons). Default false.
  bool read_only = false;
  /// Largest request body accepted, in bytes. Default 1 MiB.
  std::size_t max_body_bytes = std::size_t{1} << 20;
  /// Largest page of entries (`limit`). Default 500.
  std::size_t max_page = 500;
  /// Entries one page request examines at most when filtering. Default 20000.
  std::size_t max_examined = 20000;
  /// Most ids one replay or delete request may name. Default 1000.
  std::size_t max_ids = 1000;
  /// Most background operations running at once (more gets 429). Default 2.
  std::size_t max_operations = 2;
  /// Finished operations kept for polling. Default 50.
  std::size_t keep_operations = 50;
  /// Largest text of any one field of /api/entry, in bytes: the payload views (payload_text,
  /// payload_base64 of that many bytes, payload_hex of a fifth of them), stored_text,
  /// context and every string field are cut to it; `truncated` says the payload was cut and
  /// `truncated_fields` names every field that was. Default 256 KiB.
  std::size_t max_payload_view = std::size_t{256} << 10;
  /// Stored bytes of the entries one /api/entries page holds: a page stops after the entry
  /// that reaches this many (at least one entry per page), and its `next` goes on from there.
  /// Default 8 MiB.
  std::size_t max_page_bytes = std::size_t{8} << 20;
  /// Most queues /api/queues and /metrics answer with, in the order the store lists them
  /// (sorted); the rest are counted (`omitted_queues`, gauge dlq_queues_omitted). Default
  /// 1000 (dlq::default_max_listed_queues).
  std::size_t max_listed_queues = default_max_listed_queues;
  /// Most bytes of queue names those answers hold: queues past them are counted the same way.
  /// Default 1 MiB (dlq::default_max_listed_name_bytes).
  std::size_t max_listed_name_bytes = default_max_listed_name_bytes;
  /// Where the console logs mutations and unexpected errors (one line each, URL passwords
  /// masked). Called from the server's threads and the replay threads, possibly at once; an
  /// exception it throws is swallowed. Empty (the default) = nowhere.
  std::function<void(LogLevel, std::string_view)> log;
};

}  // namespace http
}  // namespace dlq
