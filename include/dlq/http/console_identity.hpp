// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/console_identity.hpp
/// Who is asking the console, and what they may do: named tokens with a role, the token
/// file that lists them, and the one table of which role each route needs. I/O-free (the
/// file's text is parsed here; reading it is the caller's), so every decision is tested
/// without a server (tests/http/test_console_identity.cpp).
///
/// A token file has one token per line, three fields separated by spaces or tabs:
///
///     # name      role       SHA-256 of the secret, hex
///     alice       admin      2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b
///     oncall-bot  operator   9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
///     grafana     viewer     fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9
///
/// (`printf %s "$SECRET" | sha256sum` gives the hash). Blank lines and lines starting with
/// '#' are ignored. Names are 1 to 64 of letters, digits and `._@-`, each once; the file
/// holds hashes only, so it is not a secret itself, and a secret is never logged.
///
/// Roles, each allowing what the ones before it allow (required_role() is the table):
/// - viewer: every read — the page, /api/* GETs, /metrics;
/// - operator: the changes to entries — replay, delete by filter (/api/discard), delete by
///   ids (/api/delete), cancel, recover;
/// - admin: also purge (the whole dead-letter or corrupt list).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlq/detail/sha256.hpp>
#include <dlq/errors.hpp>

namespace dlq {
namespace http {

/// What a console caller may do (see the file comment); ordered: each allows what the
/// ones before it allow.
enum class Role { viewer = 0, operator_ = 1, admin = 2 };

/// "viewer", "operator" or "admin".
inline const char* role_name(Role r) noexcept {
  switch (r) {
    case Role::viewer:
      return "viewer";
    case Role::operator_:
      return "operator";
    case Role::admin:
      return "admin";
  }
  return "viewer";
}

/// The role named `text` ("viewer", "operator", "admin"); nullopt for anything else.
inline std::optional<Role> role_from_name(std::string_view text) noexcept {
  if (text == "viewer") return Role::viewer;
  if (text == "operator") return Role::operator_;
  if (text == "admin") return Role::admin;
  return std::nullopt;
}

/// One named token: who (the audit trail's actor), the SHA-256 of its secret (64 lower-case
/// hex digits) and its role.
struct NamedToken {
  std::string name;         ///< who, as the audit trail names them
  std::string secret_hash;  ///< SHA-256 of the secret, lower-case hex
  Role role = Role::viewer; ///< what they may do
};

/// The caller of one request, once the token rules let it in.
struct Caller {
  /// The token's name; "" when the console has no named tokens (a single
  /// ConsoleOptions::token, or none on loopback): the audit then names the backend's own
  /// actor (Options::actor; `dlqctl serve`: --actor, else $USER).
  std::string name;
  /// What the caller may do: the token's role; admin for the single token and for loopback
  /// without a token (as before named tokens existed).
  Role role = Role::admin;
};

/// The role a request needs: `mutation` = a POST to `route` (the path after the console's
/// prefix, e.g. "/api/purge"). The one table of the console's permissions:
/// - every read (GET), whatever its path: viewer;
/// - POST /api/purge, and a POST to a path not listed here: admin;
/// - POST /api/replay, /api/discard, /api/delete, /api/cancel, /api/recover: operator.
inline Role required_role(std::string_view route, bool mutation) noexcept {
  if (!mutation) return Role::viewer;
  constexpr std::string_view operator_routes[] = {"/api/replay", "/api/discard", "/api/delete",
                                                  "/api/cancel", "/api/recover"};
  for (const auto r : operator_routes)
    if (route == r) return Role::operator_;
  return Role::admin;
}

/// True when `have` allows what `need` allows.
inline bool role_allows(Role have, Role need) noexcept {
  return static_cast<int>(have) >= static_cast<int>(need);
}

namespace detail {

// `a` equals `b` (both of the same length for a match), compared in time independent of
// where they differ: every byte of `a` is read.
inline bool same_text_constant_time(std::string_view a, std::string_view b) noexcept {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (b.empty() ? 0 : b[i % b.size()]));
  return diff == 0;
}

inline bool token_name_ok(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace detail

/// The token of `tokens` whose secret is `secret`, or nullptr. The secret's SHA-256 is
/// compared with every token's hash in constant time (all of them, no early exit), so the
/// time taken says nothing about which token or how much of it matched. An empty secret
/// matches nothing.
inline const NamedToken* find_token(const std::vector<NamedToken>& tokens,
                                    std::string_view secret) {
  if (secret.empty()) return nullptr;
  const std::string hash = dlq::detail::sha256_hex(secret);
  const NamedToken* found = nullptr;
  for (const auto& t : tokens)
    if (detail::same_text_constant_time(hash, t.secret_hash) && found == nullptr) found = &t;
  return found;
}

/// Parses the text of a token file (see the file comment).
/// @throws dlq::invalid_argument naming the line (never its hash) for a line without
///         three fields, a bad name, an unknown role, a hash that is not 64 hex digits, a
///         name given twice, or a hash given twice (one secret, two names and roles); also
///         for a file without any token.
inline std::vector<NamedToken> parse_token_file(std::string_view text) {
  std::vector<NamedToken> out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    const auto fail = [&](const std::string& what) {
      return dlq::invalid_argument(dlq::detail::message(
          "http", "token file line " + std::to_string(line_no), what,
          "write NAME ROLE SHA256-HEX (role viewer, operator or admin)"));
    };
    std::vector<std::string_view> fields;
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        ++i;
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
        ++i;
      if (i > start) fields.push_back(line.substr(start, i - start));
    }
    if (fields.empty() || fields[0].front() == '#') continue;
    if (fields.size() != 3) throw fail("has " + std::to_string(fields.size()) + " fields, not 3");
    if (!detail::token_name_ok(fields[0]))
      throw fail("the name is not 1 to 64 of letters, digits and ._@-");
    const auto role = role_from_name(fields[1]);
    if (!role) throw fail("the role is not viewer, operator or admin");
    std::string hash(fields[2]);
    bool hex = hash.size() == 64;
    for (char& c : hash) {
      if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
      hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    }
    if (!hex) throw fail("the hash is not 64 hex digits (a SHA-256 of the secret)");
    for (const auto& t : out) {
      if (t.name == fields[0]) throw fail("the name '" + t.name + "' is given twice");
      // one secret, two callers: find_token would take the first line's name and role
      if (t.secret_hash == hash)
        throw fail("the hash is also '" + t.name + "''s: one secret would be two callers");
    }
    out.push_back({std::string(fields[0]), std::move(hash), *role});
  }
  if (out.empty())
    throw dlq::invalid_argument(dlq::detail::message("http", "token file", "holds no token",
                                                     "write one line NAME ROLE SHA256-HEX"));
  return out;
}

}  // namespace http
}  // namespace dlq
