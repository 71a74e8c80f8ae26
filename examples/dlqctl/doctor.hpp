// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlqctl/doctor.hpp
/// `dlqctl doctor URL`: connects as the library does (dlq::redis::parse_url, its TLS, its
/// cluster detection through dlq::redis::Router) and asks each server what the rules of
/// doctor_rules.hpp judge: INFO, CONFIG GET (refusal = unknown, never a failure), CLUSTER
/// INFO, EVAL, and a bounded SCAN of the dead-letter key pattern with LLEN and MEMORY USAGE.
/// On a cluster every master is asked (its findings name it). With a redis+sentinel:// URL
/// every listed sentinel is asked first (SENTINEL MASTER, REPLICAS, SENTINELS, CKQUORUM: the
/// sentinel view), then the master they name is checked as any server; a master that cannot
/// be used is an ERROR finding after the sentinel view (no sentinel answering: exit 2).
/// Read-only: it writes nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <dlq/redis.hpp>

#include "doctor_rules.hpp"

namespace dlqctl::doctor {

namespace io {

using dlq::redis::Command;
using dlq::redis::Connection;
using dlq::redis::Effect;

inline constexpr std::size_t scan_count = 1000;    ///< SCAN COUNT per call
inline constexpr std::size_t max_measured = 1000;  ///< lists measured (LLEN, MEMORY USAGE) per node

/// The text of a string/status reply; nullopt for an error reply (or another type).
inline std::optional<std::string> text(const dlq::redis::Reply& r) {
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {  // RESP2: hiredis 0.14
    return std::string(dlq::redis::view(*r));
  }
  return std::nullopt;
}

/// CONFIG GET `name`'s value; nullopt when CONFIG is refused (renamed, ACL) or unknown.
inline std::optional<std::string> config_get(Connection& c, const char* name) {
  auto r = c.run(Command("CONFIG").arg("GET").arg(name), Effect::read);
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) return std::nullopt;
  const redisReply& v = *r->element[1];
  return std::string(dlq::redis::view(v));
}

/// INFO (the default sections) parsed; empty when refused.
inline Info info(Connection& c, const char* section = nullptr) {
  Command cmd("INFO");
  if (section != nullptr) cmd.arg(section);
  auto r = c.run(cmd, Effect::read);
  const auto t = text(r);
  return t ? parse_info(*t) : Info{};
}

/// The dead-letter lists' key pattern, and the corrupt lists' (left out).
struct Patterns {
  dlq::redis::KeyPattern dead;
  dlq::redis::KeyPattern corrupt;
};

/// The dead-letter lists of one node: SCAN MATCH (at most about `max_keys` keys examined),
/// then LLEN and MEMORY USAGE of each (pipelined; keys that are not lists are left out).
inline void scan_node(Connection& c, const Patterns& patterns, std::size_t max_keys, ScanFacts& out,
                      std::optional<std::uint64_t>& node_bytes, std::size_t& node_lists) {
  const dlq::redis::KeyPattern& pattern = patterns.dead;
  std::set<std::string> keys;
  std::string cursor = "0";
  std::uint64_t examined = 0;
  const std::string glob = pattern.glob();
  do {
    if (examined >= max_keys) {
      out.capped = true;
      break;
    }
    Command scan("SCAN");
    scan.arg(std::string_view(cursor)).arg("MATCH").arg(std::string_view(glob)).arg("COUNT");
    scan.arg(scan_count);
    auto r = c.run(scan, Effect::read);
    if (r->type == REDIS_REPLY_ERROR) {  // ACL or renamed: a finding, not a failure
      out.error = std::string(dlq::redis::view(*r));
      return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) break;
    cursor = std::string(dlq::redis::view(*r->element[0]));
    const redisReply& batch = *r->element[1];
    for (std::size_t i = 0; i < batch.elements; ++i)
      keys.emplace(dlq::redis::view(*batch.element[i]));
    examined += scan_count;
  } while (cursor != "0");
  out.examined += examined;
  std::vector<Command> cmds;
  std::vector<std::string> measured;
  for (const auto& k : keys) {
    if (measured.size() >= max_measured) break;
    if (!pattern.queue_of(k) || patterns.corrupt.queue_of(k)) continue;  // as queues() does
    measured.push_back(k);
  }
  for (const auto& k : measured) {
    cmds.push_back(std::move(Command("LLEN").arg(std::string_view(k))));
    cmds.push_back(std::move(Command("MEMORY").arg("USAGE").arg(std::string_view(k))));
  }
  const auto replies = c.run(cmds, Effect::read);
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const auto& len = replies[2 * i];
    const auto& mem = replies[2 * i + 1];
    if (len->type != REDIS_REPLY_INTEGER) continue;  // WRONGTYPE: not a dead-letter list
    QueueFacts q{*pattern.queue_of(measured[i]), measured[i],
                 static_cast<std::uint64_t>(len->integer), std::nullopt};
    if (mem->type == REDIS_REPLY_INTEGER) {
      q.bytes = static_cast<std::uint64_t>(mem->integer);
      if (node_bytes) *node_bytes += *q.bytes;
    } else {
      node_bytes.reset();  // refused: the sum would understate
    }
    ++node_lists;
    out.queues.push_back(std::move(q));
  }
  if (keys.size() > measured.size() && measured.size() >= max_measured) out.capped = true;
}

/// The findings of one server (a cluster master, or the URL's server).
inline void check_node(Connection& c, const std::string& node, const Request& req,
                       const Patterns& pattern, ScanFacts& scan, std::vector<Finding>& out) {
  const Info all = info(c);
  const auto policy = config_get(c, "maxmemory-policy");
  const auto save = config_get(c, "save");
  std::optional<std::uint64_t> dead_bytes = 0;
  std::size_t lists = 0;
  scan_node(c, pattern, req.max_keys, scan, dead_bytes, lists);
  for (Finding f : {judge_role(all), judge_policy(all, policy), judge_persistence(all, save),
                    judge_memory(all, dead_bytes, lists)}) {
    f.node = node;
    out.push_back(std::move(f));
  }
}

/// What the connection to the URL's server showed of TLS.
inline TlsFacts tls_facts(const Connection& c) {
  const auto& o = c.options();
  TlsFacts t;
  t.enabled = o.tls.enabled;
  t.verify = !o.tls.insecure_skip_verify;
  t.unix_socket = !o.unix_socket.empty();
  t.host = c.host();  // with Sentinel: the master's
  if (const auto cert = c.peer_certificate()) {
    t.certificate_known = true;
    t.subject = cert->subject;
    t.issuer = cert->issuer;
    t.expires_in = std::chrono::duration_cast<std::chrono::seconds>(
        cert->not_after - std::chrono::system_clock::now());
  }
  return t;
}

/// EVAL "return 1" 0: nullopt when it ran, else the error it answered.
inline std::optional<std::string> lua_error(Connection& c) {
  auto r = c.run(Command("EVAL").arg("return 1").arg(0), Effect::read);
  if (r->type == REDIS_REPLY_ERROR) return std::string(dlq::redis::view(*r));
  return std::nullopt;
}

/// The strings of an array reply (non-strings as ""); empty for anything else.
inline std::vector<std::string> strings(const redisReply& r) {
  std::vector<std::string> out;
  if (r.type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i < r.elements; ++i)
    out.emplace_back(dlq::redis::view(*r.element[i]));
  return out;
}

/// The entries of SENTINEL REPLICAS / SENTINELS (an array of flat field/value arrays).
inline std::vector<Info> entries(const redisReply& r) {
  std::vector<Info> out;
  if (r.type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i < r.elements; ++i)
    out.push_back(pairs_info(strings(*r.element[i])));
  return out;
}

/// Asks the sentinel at `a` SENTINEL MASTER, REPLICAS, SENTINELS and CKQUORUM of the
/// master `s.master_name` (pipelined, on a connection of its own, with the sentinels'
/// credentials as the library uses them). A sentinel that cannot be reached or refuses is a
/// finding: the error's words are kept, nothing is thrown but std::bad_alloc.
inline SentinelFacts ask_sentinel(const dlq::redis::SentinelAddress& a,
                                  const dlq::redis::SentinelOptions& s,
                                  std::chrono::milliseconds timeout) {
  SentinelFacts f;
  dlq::redis::ConnectionOptions o =
      dlq::redis::sentinel_connection_options(a, s, timeout, timeout);
  o.keepalive = false;
  f.address = o.endpoint();  // "host:port", [v6]:port: as the library's messages name it
  try {
    Connection c(o);
    const std::string& name = s.master_name;
    std::vector<Command> cmds;
    for (const char* sub : {"MASTER", "REPLICAS", "SENTINELS", "CKQUORUM"})
      cmds.push_back(std::move(Command("SENTINEL").arg(sub).arg(std::string_view(name))));
    const auto r = c.run(cmds, Effect::read);
    if (r[0]->type != REDIS_REPLY_ARRAY) {
      f.error = r[0]->type == REDIS_REPLY_ERROR ? std::string(dlq::redis::view(*r[0]))
                                                : "SENTINEL MASTER answered no master";
      return f;
    }
    f.answered = true;
    f.master = pairs_info(strings(*r[0]));
    f.replicas = entries(*r[1]);
    f.sentinels = entries(*r[2]);
    f.ckquorum = text(r[3]).value_or(std::string(dlq::redis::view(*r[3])));
    f.ckquorum_ok = r[3]->type == REDIS_REPLY_STATUS && f.ckquorum.rfind("OK", 0) == 0;
  } catch (const dlq::error& e) {  // unreachable, refused AUTH: the words, redacted by dlq
    f.error = e.what();
  }
  return f;
}

/// The sentinel view of a redis+sentinel:// URL: every listed sentinel asked (doctor_rules.hpp
/// judges), in the URL's order.
inline std::vector<Finding> sentinel_view(const dlq::redis::SentinelOptions& s,
                                          std::chrono::milliseconds timeout) {
  std::vector<SentinelFacts> all;
  for (const auto& a : s.sentinels)
    all.push_back(ask_sentinel(a, s, timeout));
  return {judge_sentinels(all, s.master_name), judge_sentinel_master(all),
          judge_sentinel_quorum(all), judge_sentinel_replicas(all)};
}

/// The usual checks on the URL's server (with Sentinel: the master the sentinels name; on a
/// cluster: every master), appended to `findings` (lua's apart: it is reported last).
/// @returns whether the server is a cluster.
/// @throws the dlq::storage_error subclasses when a server cannot be reached.
inline bool check_servers(const dlq::redis::ConnectionOptions& c,
                          const dlq::redis::PoolOptions& pool, const Request& req,
                          const Patterns& pattern, ScanFacts& scan, std::vector<Finding>& findings,
                          std::vector<Finding>& lua) {
  dlq::redis::Router router(c, pool);
  {
    auto seed = router.seed().acquire();
    seed->connect();
    findings.push_back(judge_tls(tls_facts(*seed)));
  }
  const bool cluster = router.clustered();
  {
    auto seed = router.seed().acquire();
    if (cluster) {
      const auto r = seed->run(Command("CLUSTER").arg("INFO"), Effect::read);
      findings.push_back(judge_cluster(parse_info(text(r).value_or(""))));
    }
    lua.push_back(judge_lua(lua_error(*seed)));
  }
  for (dlq::redis::ConnectionPool* p : router.masters()) {
    auto lease = p->acquire();
    check_node(*lease, cluster ? p->endpoint() : std::string(), req, pattern, scan, findings);
  }
  return cluster;
}

}  // namespace io

/// Runs `dlqctl doctor` (see the file comment) and prints its report on out.
/// @returns 0, or exit_doctor_problem when a finding is ERROR (WARN too with --strict).
/// @throws the dlq::storage_error subclasses when a server cannot be reached (dlqctl: exit 2),
///         dlq::invalid_argument for a bad URL or key pattern (exit 1).
inline int run(const Request& req, std::ostream& out) {
  dlq::redis::ConnectionOptions c = dlq::redis::parse_url(req.url);
  c.connect_timeout = req.timeout;
  c.command_timeout = req.timeout;
  c.reconnect_attempts = 1;
  const io::Patterns pattern{
      dlq::redis::KeyPattern::parse(req.dlq_key, "--dlq-key"),
      dlq::redis::KeyPattern::parse(
          req.corrupt_key.empty() ? req.dlq_key + ":corrupt" : req.corrupt_key, "--corrupt-key")};
  dlq::redis::PoolOptions pool;
  pool.size = 1;
  pool.wait_timeout = req.timeout;
  std::vector<Finding> findings;
  bool cluster = false;
  ScanFacts scan;
  scan.pattern = req.dlq_key;
  std::vector<Finding> lua;
  bool scanned = true;  // false: the master the sentinels name could not be used
  if (!c.sentinel.enabled()) {
    cluster = io::check_servers(c, pool, req, pattern, scan, findings, lua);
  } else {
    findings = io::sentinel_view(c.sentinel, req.timeout);
    try {
      cluster = io::check_servers(c, pool, req, pattern, scan, findings, lua);
    } catch (const dlq::connection_error& e) {
      if (findings.front().level == Level::error) throw;  // no sentinel answered: exit 2
      scanned = false;
      findings.push_back({Level::error, "master", {},
                          std::string("the master the sentinels name cannot be used: ") + e.what(),
                          "see the sentinel findings: bring the master back or let the "
                          "sentinels fail over to a replica"});
    }
  }
  if (scanned) findings.push_back(judge_queues(scan));  // else no all-clear on unseen lists
  findings.insert(findings.end(), lua.begin(), lua.end());
  const std::string server = dlq::redact_url(req.url);
  if (req.json) {
    out << to_json(server, cluster, findings, scan, req.strict)
               .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
        << '\n';
  } else {
    for (const auto& f : findings)
      out << line(f) << '\n';
  }
  return exit_code(findings, req.strict);
}

}  // namespace dlqctl::doctor
