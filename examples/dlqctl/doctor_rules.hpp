// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlqctl/doctor_rules.hpp
/// The decisions of `dlqctl doctor` (doctor.hpp does the I/O): given what a Redis server
/// answered — INFO sections, CONFIG GET values (or that CONFIG was refused), CLUSTER INFO,
/// the dead-letter lists a bounded SCAN found, whether EVAL ran — the findings, each
/// `OK|WARN|ERROR <check>: <finding> — <what to do>`, the JSON document and the exit code.
/// No I/O here: tests/cli/test_doctor_rules.cpp feeds it canned INFO texts.
///
/// The rules (docs/dlqctl.md, "dlqctl doctor"):
///  - tls: plain TCP to a non-loopback host WARN; TLS without verification WARN; a server
///    certificate that expires within 30 days WARN, expired ERROR.
///  - role: a replica ERROR (dlq's writes fail with READONLY); a master OK, replicas named.
///  - cluster: cluster_state other than ok, or fewer than 16384 slots assigned, ERROR.
///  - maxmemory-policy: anything but noeviction ERROR (dead letters, or the TTL'd keys of a
///    replay, can be evicted); unknown WARN.
///  - persistence: neither AOF nor RDB save points WARN; unknown (CONFIG refused) WARN.
///  - memory: used memory at 90 % of maxmemory ERROR (a full Redis refuses dead letters),
///    at 75 % WARN; the dead-letter lists' share is reported.
///  - queues: every dead-letter list found and its length (OK; the scan is capped, and says so).
///  - lua: EVAL refused ERROR (dlq's sends and replays run scripts).
///  - redis+sentinel:// URLs — sentinels: every listed sentinel that did not answer WARN
///    (none ERROR); sentinel-master: the sentinels naming different masters ERROR, master
///    flags s_down/o_down/disconnected ERROR, a failover in progress WARN; sentinel-quorum:
///    CKQUORUM failing ERROR, fewer than 3 sentinels known WARN; sentinel-replicas: none
///    known WARN, any down (flags, master link not ok) WARN.
///
/// Exit code: exit_doctor_problem (4) when a finding is ERROR, or WARN under --strict; else 0.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "format.hpp"

namespace dlqctl::doctor {

/// How bad a finding is.
enum class Level { ok, warn, error };

/// "OK", "WARN" or "ERROR".
inline const char* level_name(Level l) {
  return l == Level::ok ? "OK" : l == Level::warn ? "WARN" : "ERROR";
}

/// One finding: a check's verdict on one server (node) or on the whole deployment.
struct Finding {
  Level level = Level::ok;
  std::string check;    ///< tls, role, cluster, maxmemory-policy, persistence, memory, queues, lua,
                        ///< sentinels, sentinel-master, sentinel-quorum, sentinel-replicas
  std::string node;     ///< "host:port" of a cluster node; "" for the URL's server or all
  std::string finding;  ///< what was found
  std::string fix;      ///< what to do ("" when nothing)
};

/// What `dlqctl doctor` is asked (commands.hpp parses it; doctor.hpp runs it).
struct Request {
  std::string url;                  ///< the server, as the library parses it
  std::string dlq_key = "dlq:{*}";  ///< the dead-letter key pattern (--dlq-key)
  /// The corrupt lists' pattern (--corrupt-key; "" = dlq_key + ":corrupt"): keys of both
  /// shapes are corrupt lists, as RedisListStorage::queues() decides.
  std::string corrupt_key;
  std::chrono::milliseconds timeout{5000};
  bool json = false;
  bool strict = false;            ///< warnings fail too
  std::size_t max_keys = 100000;  ///< SCAN examines about this many keys per node
};

/// The exit code when a finding is ERROR (or WARN with --strict); see commands.hpp.
inline constexpr int exit_doctor_problem = 4;

/// `key:value` lines of an INFO reply (sections and comments skipped).
using Info = std::map<std::string, std::string, std::less<>>;

/// Parses an INFO (or CLUSTER INFO) reply.
inline Info parse_info(std::string_view text) {
  Info out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    out.emplace(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
  }
  return out;
}

/// The value of `key` in `info`, or nullopt.
inline std::optional<std::string> get(const Info& info, std::string_view key) {
  const auto it = info.find(key);
  if (it == info.end()) return std::nullopt;
  return it->second;
}

/// The unsigned number of `key` in `info`, or nullopt.
inline std::optional<std::uint64_t> number(const Info& info, std::string_view key) {
  const auto v = get(info, key);
  if (!v || v->empty() || v->find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(std::stoull(*v));
}

/// "1.5 MiB", "812 B".
inline std::string bytes_text(std::uint64_t n) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  std::size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

/// The text CONFIG's refusal is reported with.
inline constexpr const char* config_refused = "unknown (CONFIG not allowed)";

// --- tls ------------------------------------------------------------------------------------

/// What the connection showed of TLS.
struct TlsFacts {
  bool enabled = false;  ///< rediss://
  bool verify = true;    ///< not insecure_skip_verify
  bool unix_socket = false;
  std::string host;  ///< the URL's host
  bool certificate_known = false;
  std::string subject, issuer;         ///< the server certificate's
  std::chrono::seconds expires_in{0};  ///< until its notAfter (negative: expired)
};

/// True for 127.0.0.0/8, ::1 and localhost.
inline bool loopback(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

inline Finding judge_tls(const TlsFacts& t) {
  Finding f{Level::ok, "tls", {}, {}, {}};
  if (!t.enabled) {
    if (t.unix_socket || loopback(t.host)) {
      f.finding =
          std::string("TLS off (") + (t.unix_socket ? "a unix socket" : "a loopback address") + ")";
      return f;
    }
    f.level = Level::warn;
    f.finding =
        "TLS off: the password and every dead letter cross the network in clear to " + t.host;
    f.fix = "use rediss:// (the server's tls-port; docs/redis.md, TLS)";
    return f;
  }
  f.finding = std::string("TLS on") + (t.verify ? ", certificate verified" : "");
  if (t.certificate_known) {
    const long long secs = t.expires_in.count();
    const long long days = (secs < 0 ? -secs : secs) / 86400;
    const std::string d = std::to_string(days) + (days == 1 ? " day" : " days");
    f.finding += "; subject " + t.subject + ", issuer " + t.issuer + ", " +
                 (secs <= 0 ? "expired " + d + " ago" : "expires in " + d);
    if (secs <= 0) {
      f.level = Level::error;
      f.fix = "renew the server certificate now: verifying clients cannot connect";
    } else if (t.expires_in < std::chrono::hours(24 * 30)) {
      f.level = Level::warn;
      f.fix = "renew the server certificate before it expires (less than 30 days left)";
    }
  } else {
    f.finding += " (the server presented no certificate details)";
  }
  if (!t.verify) {
    f.level = std::max(f.level, Level::warn);
    f.finding +=
        "; verification OFF (insecure_skip_verify): anyone in the path can read and change dead "
        "letters";
    f.fix =
        (f.fix.empty() ? "" : f.fix + "; ") +
        "drop insecure_skip_verify and give ca_file (the CA that signed the server's certificate)";
  }
  return f;
}

// --- role, cluster --------------------------------------------------------------------------

inline Finding judge_role(const Info& replication) {
  Finding f{Level::ok, "role", {}, {}, {}};
  const auto role = get(replication, "role");
  if (!role) {
    f.level = Level::warn;
    f.finding = "unknown (INFO replication gave no role)";
    f.fix = "allow INFO to dlq's user";
    return f;
  }
  if (*role == "slave" || *role == "replica") {
    f.level = Level::error;
    f.finding = "a replica of " + get(replication, "master_host").value_or("?") + ":" +
                get(replication, "master_port").value_or("?") + " (master link " +
                get(replication, "master_link_status").value_or("?") +
                "): dlq's writes fail with READONLY";
    f.fix = "point the URL at the master";
    return f;
  }
  const std::uint64_t replicas = number(replication, "connected_slaves").value_or(0);
  f.finding =
      *role + ", " + std::to_string(replicas) + " connected replica" + (replicas == 1 ? "" : "s");
  if (replicas == 0) f.finding += " (dead letters live on this server alone)";
  return f;
}

inline Finding judge_cluster(const Info& cluster) {
  Finding f{Level::ok, "cluster", {}, {}, {}};
  const std::string state = get(cluster, "cluster_state").value_or("?");
  const std::uint64_t assigned = number(cluster, "cluster_slots_assigned").value_or(0);
  const std::uint64_t failing = number(cluster, "cluster_slots_fail").value_or(0);
  f.finding = "cluster_state " + state + ", " + std::to_string(assigned) +
              "/16384 slots assigned, " + get(cluster, "cluster_size").value_or("?") + " masters";
  if (state != "ok" || assigned < 16384 || failing > 0) {
    f.level = Level::error;
    f.finding += failing > 0 ? ", " + std::to_string(failing) + " slots failing" : "";
    f.fix =
        "sends to the keys of unserved slots fail (CLUSTERDOWN): assign every slot and "
        "bring the failed masters back (redis-cli --cluster check / fix)";
  }
  return f;
}

// --- maxmemory-policy, persistence, memory ---------------------------------------------------

/// `config`: the CONFIG GET value, nullopt when CONFIG was refused or not asked.
inline Finding judge_policy(const Info& memory, const std::optional<std::string>& config) {
  Finding f{Level::ok, "maxmemory-policy", {}, {}, {}};
  const auto policy = get(memory, "maxmemory_policy") ? get(memory, "maxmemory_policy") : config;
  if (!policy) {
    f.level = Level::warn;
    f.finding = std::string(config_refused) + " and INFO memory has no maxmemory_policy";
    f.fix =
        "check the provider's eviction setting is noeviction, or allow CONFIG GET to dlq's user";
    return f;
  }
  f.finding = *policy;
  if (*policy == "noeviction") {
    f.finding += ": nothing is evicted (a full Redis refuses writes instead)";
    return f;
  }
  f.level = Level::error;
  f.finding += *policy == "volatile-lru" || *policy == "volatile-lfu" ||
                       *policy == "volatile-random" || *policy == "volatile-ttl"
                   ? ": keys with a TTL (a replay's snapshot and receipts) can be evicted under "
                     "memory pressure"
                   : ": dead letters can be evicted under memory pressure";
  f.fix =
      "CONFIG SET maxmemory-policy noeviction (and in redis.conf / the provider's "
      "parameter group), or keep dead letters on a Redis of their own";
  return f;
}

/// `save`: CONFIG GET save ("" = no RDB save points), nullopt when CONFIG was refused.
inline Finding judge_persistence(const Info& persistence, const std::optional<std::string>& save) {
  Finding f{Level::ok, "persistence", {}, {}, {}};
  const auto aof = get(persistence, "aof_enabled");
  if (aof && *aof == "1") {
    f.finding = "AOF on";
    return f;
  }
  if (!aof) {
    f.level = Level::warn;
    f.finding = "unknown (INFO persistence gave no aof_enabled)";
    f.fix = "allow INFO to dlq's user, and check AOF is on";
    return f;
  }
  if (!save) {
    f.level = Level::warn;
    f.finding = std::string(config_refused) + ": AOF is off and the RDB save points cannot be read";
    f.fix = "check the provider's persistence (AOF, snapshots) keeps dead letters across a restart";
    return f;
  }
  if (save->find_first_not_of(' ') == std::string::npos) {
    f.level = Level::warn;
    f.finding = "off: no AOF and no RDB save points; a restart loses every dead letter";
    f.fix = "CONFIG SET appendonly yes (and in redis.conf)";
    return f;
  }
  f.finding = "RDB snapshots (save " + *save +
              "), no AOF: a crash loses the dead letters "
              "written since the last snapshot";
  f.fix = "appendonly yes keeps every acknowledged dead letter";
  return f;
}

/// `dead_bytes`: MEMORY USAGE summed over the `lists` dead-letter lists found on this server;
/// nullopt when MEMORY USAGE was refused.
inline Finding judge_memory(const Info& memory, std::optional<std::uint64_t> dead_bytes,
                            std::size_t lists) {
  Finding f{Level::ok, "memory", {}, {}, {}};
  const auto used = number(memory, "used_memory");
  if (!used) {
    f.level = Level::warn;
    f.finding = "unknown (INFO memory gave no used_memory)";
    f.fix = "allow INFO to dlq's user";
    return f;
  }
  const std::string dead = "dead letters " +
                           (dead_bytes ? bytes_text(*dead_bytes) : "of unknown size") + " in " +
                           std::to_string(lists) + " list" + (lists == 1 ? "" : "s") +
                           (dead_bytes ? "" : " (MEMORY USAGE not allowed)");
  const std::uint64_t max = number(memory, "maxmemory").value_or(0);
  if (max == 0) {
    f.finding = "used " + bytes_text(*used) + ", no maxmemory (bounded by the host), " + dead;
    return f;
  }
  const double share = static_cast<double>(*used) / static_cast<double>(max);
  char pct[16];
  std::snprintf(pct, sizeof pct, "%.0f%%", share * 100);
  f.finding = "used " + bytes_text(*used) + " of maxmemory " + bytes_text(max) + " (" + pct +
              "), headroom " + bytes_text(max > *used ? max - *used : 0) + "; " + dead;
  if (share >= 0.9) {
    f.level = Level::error;
    f.fix =
        "raise maxmemory, or replay / trim dead letters (dlqctl replay, dlqctl trim): a full "
        "Redis refuses new dead letters (OOM)";
  } else if (share >= 0.75) {
    f.level = Level::warn;
    f.fix = "raise maxmemory before it fills: a full Redis refuses new dead letters (OOM)";
  }
  return f;
}

// --- queues, lua -------------------------------------------------------------------------

/// One dead-letter list a scan found.
struct QueueFacts {
  std::string queue;
  std::string key;
  std::uint64_t length = 0;
  std::optional<std::uint64_t> bytes;  ///< MEMORY USAGE; nullopt when refused or not measured
};

/// What the scans of every node found.
struct ScanFacts {
  std::string pattern;  ///< the key pattern (--dlq-key)
  std::vector<QueueFacts> queues;
  std::uint64_t examined = 0;  ///< keys SCAN examined (about: COUNT per call)
  bool capped = false;         ///< stopped at --max-keys before the end
  std::string error;           ///< what SCAN answered when it was refused ("" = it ran)
};

/// A queue name (any bytes of a foreign key) for a finding: escaped by dlqctl::printable
/// (no control byte reaches the terminal or starts a line), names over 64 bytes cut
/// (printable_cut), as `dlqctl queues` shows them.
inline std::string shown_name(std::string_view name) {
  return name.size() <= 64 ? printable(name) : printable_cut(name);
}

inline Finding judge_queues(const ScanFacts& s) {
  Finding f{Level::ok, "queues", {}, {}, {}};
  std::vector<const QueueFacts*> sorted;
  for (const auto& q : s.queues)
    sorted.push_back(&q);
  std::sort(sorted.begin(), sorted.end(),
            [](const QueueFacts* a, const QueueFacts* b) { return a->queue < b->queue; });
  if (!s.error.empty()) {
    f.level = Level::error;
    f.finding = "SCAN refused: " + s.error;
    f.fix = "grant dlq's user SCAN (+scan): dlq lists its queues with it (dlqctl queues, stats)";
    return f;
  }
  if (sorted.empty()) {
    f.finding = "no dead-letter lists match " + s.pattern +
                " (none yet, or the services use another layout: --dlq-key, e.g. the Python "
                "seed's 'dlq:*')";
  } else {
    f.finding = std::to_string(sorted.size()) + " queue" + (sorted.size() == 1 ? "" : "s") + " (" +
                s.pattern + "):";
    const std::size_t shown = std::min<std::size_t>(sorted.size(), 20);
    for (std::size_t i = 0; i < shown; ++i)
      f.finding +=
          (i == 0 ? " " : ", ") + shown_name(sorted[i]->queue) + " (" +
          std::to_string(sorted[i]->length) + ")";
    if (shown < sorted.size())
      f.finding += ", … " + std::to_string(sorted.size() - shown) + " more (--json lists all)";
  }
  if (s.capped) {
    f.finding +=
        "; the scan stopped after about " + std::to_string(s.examined) + " keys, more may exist";
    if (f.fix.empty()) f.fix = "raise --max-keys to look further";
  }
  return f;
}

/// `error`: the error EVAL "return 1" 0 answered; nullopt when it ran.
inline Finding judge_lua(const std::optional<std::string>& error) {
  Finding f{Level::ok, "lua", {}, {}, {}};
  if (!error) {
    f.finding = "EVAL runs (dlq's sends and replays use Lua scripts)";
    return f;
  }
  f.level = Level::error;
  f.finding = "EVAL refused: " + *error;
  f.fix =
      error->rfind("NOPERM", 0) == 0
          ? "grant dlq's user +@scripting (ACL SETUSER … +eval +evalsha +script)"
          : "enable Lua scripting (EVAL, EVALSHA, SCRIPT LOAD): dlq's sends and replays need it";
  return f;
}

// --- sentinel ------------------------------------------------------------------------------

/// What one sentinel of a redis+sentinel:// URL answered about master `name`.
struct SentinelFacts {
  std::string address;      ///< "host:port" as the URL lists it
  bool answered = false;    ///< the connection was made and SENTINEL MASTER answered
  std::string error;        ///< why not: the connection error, or SENTINEL MASTER's error reply
  Info master;              ///< SENTINEL MASTER <name>: its field/value pairs
  std::vector<Info> replicas;   ///< SENTINEL REPLICAS <name>
  std::vector<Info> sentinels;  ///< SENTINEL SENTINELS <name> (the others it knows)
  bool ckquorum_ok = false;     ///< SENTINEL CKQUORUM <name> answered +OK
  std::string ckquorum;         ///< its answer's text (the OK sentence or the error)
};

/// The field/value pairs of a flat array (SENTINEL MASTER's answer, one of SENTINEL
/// REPLICAS'), as `fields` lists them: name, value, name, value, … (an odd last one dropped).
inline Info pairs_info(const std::vector<std::string>& fields) {
  Info out;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2)
    out.emplace(fields[i], fields[i + 1]);
  return out;
}

/// The flags of a SENTINEL MASTER/REPLICAS entry ("master,s_down") that mean trouble:
/// s_down, o_down, disconnected, failover_in_progress, promoted… ("" = none of them).
inline std::string bad_flags(const Info& entry) {
  const std::string flags = get(entry, "flags").value_or("");
  std::string bad;
  for (const char* f : {"s_down", "o_down", "disconnected", "failover_in_progress",
                        "promoted", "reconf_sent", "reconf_inprog"}) {
    const std::string flag(f);
    const std::string padded = "," + flags + ",";
    if (padded.find("," + flag + ",") != std::string::npos) bad += (bad.empty() ? "" : ",") + flag;
  }
  return bad;
}

/// "host:port" of a SENTINEL MASTER/REPLICAS/SENTINELS entry.
inline std::string entry_address(const Info& entry) {
  return get(entry, "ip").value_or("?") + ":" + get(entry, "port").value_or("?");
}

/// sentinels: which sentinels of the URL answered. None: ERROR; some not: WARN.
inline Finding judge_sentinels(const std::vector<SentinelFacts>& all, const std::string& name) {
  Finding f{Level::ok, "sentinels", {}, {}, {}};
  std::string ok, bad;
  std::size_t answered = 0;
  for (const auto& s : all) {
    if (s.answered) {
      ++answered;
      ok += (ok.empty() ? "" : ", ") + s.address;
    } else {
      bad += (bad.empty() ? "" : "; ") + s.address + " (" + s.error + ")";
    }
  }
  f.finding = std::to_string(answered) + "/" + std::to_string(all.size()) +
              " sentinels of the URL answered for '" + name + "'" + (ok.empty() ? "" : ": " + ok);
  if (bad.empty()) return f;
  f.finding += "; not: " + bad;
  f.level = answered == 0 ? Level::error : Level::warn;
  f.fix = answered == 0 ? "no sentinel can name the master: start the sentinels, check the URL's "
                          "addresses and that each monitors '" + name + "' (sentinel monitor)"
                        : "start the sentinels that did not answer (or fix the URL's list): the "
                          "library asks each in turn, and fewer sentinels up means fewer votes "
                          "for a failover";
  return f;
}

/// sentinel-master: whether the sentinels that answered agree on the master's address, and
/// its flags (s_down, o_down, disconnected: ERROR; a failover in progress: WARN).
inline Finding judge_sentinel_master(const std::vector<SentinelFacts>& all) {
  Finding f{Level::ok, "sentinel-master", {}, {}, {}};
  std::map<std::string, std::vector<std::string>> named;  // address -> the sentinels naming it
  const SentinelFacts* first = nullptr;
  for (const auto& s : all) {
    if (!s.answered) continue;
    if (first == nullptr) first = &s;
    named[entry_address(s.master)].push_back(s.address);
  }
  if (first == nullptr) {
    f.level = Level::error;
    f.finding = "no sentinel answered SENTINEL MASTER";
    f.fix = "see the sentinels finding";
    return f;
  }
  if (named.size() > 1) {
    f.level = Level::error;
    f.finding = "the sentinels disagree on the master:";
    for (const auto& [address, who] : named) {
      f.finding += " " + address + " (by";
      for (const auto& w : who) f.finding += " " + w;
      f.finding += ")";
    }
    f.fix = "a failover may be under way (run doctor again in a few seconds); if it stays, the "
            "sentinels watch different masters: fix `sentinel monitor` and SENTINEL RESET them";
    return f;
  }
  const std::string flags = get(first->master, "flags").value_or("?");
  f.finding = named.begin()->first + " (flags " + flags + ")";
  const std::string bad = bad_flags(first->master);
  if (bad.empty()) return f;
  const bool down = bad.find("down") != std::string::npos || bad.find("disconnected") != std::string::npos;
  f.level = down ? Level::error : Level::warn;
  f.fix = down ? "the master is down or unreachable from the sentinels: bring it back, or check "
                 "that the sentinels can fail over (a replica and the quorum)"
               : "a failover is in progress: dlq finds the new master once it ends";
  return f;
}

/// sentinel-quorum: the quorum, whether SENTINEL CKQUORUM passed on every sentinel that
/// answered (ERROR when not), and how many sentinels are known: fewer than 3 WARN.
inline Finding judge_sentinel_quorum(const std::vector<SentinelFacts>& all) {
  Finding f{Level::ok, "sentinel-quorum", {}, {}, {}};
  std::size_t known = 0;
  std::string quorum = "?", failing;
  bool any = false;
  for (const auto& s : all) {
    if (!s.answered) continue;
    any = true;
    known = std::max(known, s.sentinels.size() + 1);
    quorum = get(s.master, "quorum").value_or(quorum);
    if (!s.ckquorum_ok) failing += (failing.empty() ? "" : "; ") + s.address + ": " + s.ckquorum;
  }
  if (!any) {
    f.level = Level::error;
    f.finding = "unknown: no sentinel answered";
    f.fix = "see the sentinels finding";
    return f;
  }
  f.finding = "quorum " + quorum + ", " + std::to_string(known) + " sentinel" +
              (known == 1 ? "" : "s") + " known, CKQUORUM " + (failing.empty() ? "OK" : "fails");
  if (!failing.empty()) {
    f.level = Level::error;
    f.finding += " (" + failing + ")";
    f.fix = "no failover can be authorized: start sentinels until a majority and the quorum are "
            "reachable, or lower the quorum (sentinel monitor … <quorum>)";
    return f;
  }
  if (known < 3) {
    f.level = Level::warn;
    f.finding += known == 1 ? ": a single sentinel is a single point of failure"
                            : ": two sentinels lose the majority when one fails";
    f.fix = "run at least 3 sentinels on separate hosts (quorum 2)";
  }
  return f;
}

/// sentinel-replicas: the replicas the sentinels know and their flags; none, or every one
/// down (s_down, o_down, disconnected, master-link-status err), leaves nothing to promote.
inline Finding judge_sentinel_replicas(const std::vector<SentinelFacts>& all) {
  Finding f{Level::ok, "sentinel-replicas", {}, {}, {}};
  const SentinelFacts* most = nullptr;  // the sentinel that knows the most replicas
  for (const auto& s : all)
    if (s.answered && (most == nullptr || s.replicas.size() > most->replicas.size())) most = &s;
  if (most == nullptr) {
    f.level = Level::error;
    f.finding = "unknown: no sentinel answered";
    f.fix = "see the sentinels finding";
    return f;
  }
  if (most->replicas.empty()) {
    f.level = Level::warn;
    f.finding = "no replica known: a failover has nothing to promote, and dead letters live on the "
                "master alone";
    f.fix = "add a replica (replicaof <master>); the sentinels find it within seconds";
    return f;
  }
  std::size_t healthy = 0;
  std::string list;
  for (const auto& r : most->replicas) {
    const std::string bad = bad_flags(r);
    const std::string link = get(r, "master-link-status").value_or("?");
    list += (list.empty() ? " " : ", ") + entry_address(r) + " (flags " +
            get(r, "flags").value_or("?") + ", master link " + link + ")";
    if (bad.empty() && link == "ok") ++healthy;
  }
  f.finding = std::to_string(most->replicas.size()) + " replica" +
              (most->replicas.size() == 1 ? "" : "s") + " known:" + list;
  if (healthy < most->replicas.size()) {
    f.level = Level::warn;
    f.finding += "; " + std::to_string(most->replicas.size() - healthy) + " down or not in sync";
    f.fix = healthy == 0 ? "no replica can be promoted: bring one back in sync with the master"
                         : "bring the replicas that are down back (their master link must be ok)";
  }
  return f;
}

// --- the report -----------------------------------------------------------------------------

/// The exit code of a report (0, or exit_doctor_problem).
inline int exit_code(const std::vector<Finding>& findings, bool strict) {
  for (const auto& f : findings)
    if (f.level == Level::error || (strict && f.level == Level::warn)) return exit_doctor_problem;
  return 0;
}

/// `LEVEL check: [node: ]finding[ — fix]`.
inline std::string line(const Finding& f) {
  std::string s = std::string(level_name(f.level)) + " " + f.check + ": ";
  if (!f.node.empty()) s += f.node + ": ";
  s += f.finding;
  if (!f.fix.empty()) s += " — " + f.fix;
  return s;
}

/// The --json document: {server, cluster, findings [{level, check, node, finding, fix}],
/// queues [{queue, key, length, bytes}], scan {pattern, examined, capped}, summary, exit_code}.
inline nlohmann::ordered_json to_json(const std::string& server, bool cluster,
                                      const std::vector<Finding>& findings, const ScanFacts& scan,
                                      bool strict) {
  nlohmann::ordered_json j;
  j["server"] = server;
  j["cluster"] = cluster;
  auto& list = j["findings"] = nlohmann::ordered_json::array();
  std::size_t counts[3] = {0, 0, 0};
  for (const auto& f : findings) {
    ++counts[static_cast<int>(f.level)];
    list.push_back({{"level", level_name(f.level)},
                    {"check", f.check},
                    {"node", f.node},
                    {"finding", f.finding},
                    {"fix", f.fix}});
  }
  auto& queues = j["queues"] = nlohmann::ordered_json::array();
  for (const auto& q : scan.queues) {
    queues.push_back({{"queue", q.queue},
                      {"key", q.key},
                      {"length", q.length},
                      {"bytes", q.bytes ? nlohmann::ordered_json(*q.bytes) : nullptr}});
  }
  j["scan"] = {{"pattern", scan.pattern}, {"examined", scan.examined}, {"capped", scan.capped}};
  j["summary"] = {{"ok", counts[0]}, {"warn", counts[1]}, {"error", counts[2]}};
  j["exit_code"] = exit_code(findings, strict);
  return j;
}

}  // namespace dlqctl::doctor
