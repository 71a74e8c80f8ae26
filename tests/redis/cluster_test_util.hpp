// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Helpers for the Redis Cluster tests: the test cluster's URL and ports (ctest fixture
// `redis_cluster`, tests/support/redis_cluster.sh), and a raw client that follows MOVED by
// itself (independent of dlq::redis::Router) for setting up and checking data, and for
// migrating slots between masters; a private cluster for a test alone (PrivateCluster); the
// failures and the queue names on a given master the cluster tests send with.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlq/entry.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/list_storage.hpp"
#include "redis/redis_test_util.hpp"

namespace dlq::test {

/// Path of a file of the test cluster's directory, from DLQ_TEST_REDIS_CLUSTER_URL_FILE.
/// Throws — failing the test — when the fixture did not run: cluster tests never skip.
inline std::string cluster_file(const std::string& name) {
  const char* file = std::getenv("DLQ_TEST_REDIS_CLUSTER_URL_FILE");
  if (file == nullptr || *file == '\0') {
    throw std::runtime_error(
        "DLQ_TEST_REDIS_CLUSTER_URL_FILE is not set: run this test through ctest (fixture "
        "`redis_cluster` starts a 3-master cluster with tests/support/redis_cluster.sh)");
  }
  std::string path(file);
  return path.substr(0, path.rfind('/') + 1) + name;
}

/// redis://127.0.0.1:<port of the first master>.
inline std::string cluster_url() {
  std::ifstream in(cluster_file("url"));
  std::string url;
  if (!(in >> url) || url.empty()) {
    throw std::runtime_error("cannot read " + cluster_file("url") +
                             ": did the redis_cluster_start fixture fail?");
  }
  return url;
}

/// The ports of the three masters.
inline std::vector<int> cluster_ports() {
  std::ifstream in(cluster_file("ports"));
  std::vector<int> ports;
  for (int p = 0; in >> p;)
    ports.push_back(p);
  if (ports.size() != 3) throw std::runtime_error("cannot read " + cluster_file("ports"));
  return ports;
}

/// Raw access to the cluster: one connection per node; keyed commands follow MOVED.
class RawCluster {
 public:
  /// The test cluster of the `redis_cluster` fixture.
  RawCluster() : ports_(cluster_ports()) {}
  /// The cluster of these masters.
  explicit RawCluster(std::vector<int> ports) : ports_(std::move(ports)) {}
  /// The cluster of these masters, each reached at `node_url(port)` (e.g. a rediss:// URL
  /// with the test CA and a client certificate, for a cluster over TLS).
  RawCluster(std::vector<int> ports, std::function<std::string(int)> node_url)
      : ports_(std::move(ports)), node_url_(std::move(node_url)) {}

  /// The connection to the node on `port`.
  RawClient& node(int port) {
    auto it = nodes_.find(port);
    if (it == nodes_.end()) {
      it = nodes_
               .emplace(port, std::make_unique<RawClient>(node_url_ ? node_url_(port)
                                                                    : "redis://127.0.0.1:" +
                                                                          std::to_string(port)))
               .first;
    }
    return *it->second;
  }
  const std::vector<int>& ports() const { return ports_; }

  /// The port of the master that owns `key` (asked with MOVED, not computed).
  int owner(const std::string& key) {
    int port = ports_[0];
    for (int hop = 0; hop < 5; ++hop) {
      redis::Reply r = node(port).cmd({"TYPE", key});
      if (r->type != REDIS_REPLY_ERROR) return port;
      const std::string text(r->str, r->len);
      if (text.rfind("MOVED ", 0) != 0) throw std::runtime_error("TYPE " + key + ": " + text);
      port = std::stoi(text.substr(text.rfind(':') + 1));
    }
    throw std::runtime_error("owner(" + key + "): too many MOVED");
  }
  /// Every item of a list, from its owner.
  std::vector<std::string> list(const std::string& key) { return node(owner(key)).list(key); }
  /// RPUSHes to the owner.
  void rpush(const std::string& key, const std::vector<std::string>& items) {
    node(owner(key)).rpush(key, items);
  }
  /// CLUSTER KEYSLOT, asked from the server.
  int keyslot(const std::string& key) {
    return static_cast<int>(node(ports_[0]).integer({"CLUSTER", "KEYSLOT", key}));
  }
  /// The node id of the master on `port`.
  std::string id(int port) {
    redis::Reply r = node(port).cmd({"CLUSTER", "MYID"});
    return std::string(r->str, r->len);
  }
  /// Whether CLUSTER INFO on `port` says cluster_state:ok.
  bool state_ok(int port) {
    redis::Reply r = node(port).cmd({"CLUSTER", "INFO"});
    return std::string(r->str, r->len).find("cluster_state:ok") != std::string::npos;
  }
  /// Whether CLUSTER NODES on `port` lists a node with `flag` (e.g. "noaddr": a master whose
  /// address that node no longer knows).
  bool lists_flag(int port, const std::string& flag) {
    redis::Reply r = node(port).cmd({"CLUSTER", "NODES"});
    return std::string(r->str, r->len).find(flag) != std::string::npos;
  }
  /// Expects +OK.
  void ok(int port, const std::vector<std::string>& args) {
    redis::Reply r = node(port).cmd(args);
    if (r->type == REDIS_REPLY_ERROR) {
      throw std::runtime_error(args[0] + " " + args[1] + " on " + std::to_string(port) + ": " +
                               std::string(r->str, r->len));
    }
  }

  /// Starts moving `slot` from the master on `from` to the one on `to` (IMPORTING on the
  /// target, MIGRATING on the source).
  void begin_migration(int slot, int from, int to) {
    ok(to, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", id(from)});
    ok(from, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", id(to)});
  }
  /// MIGRATEs every key of `slot` still on `from` to `to`; returns how many moved.
  std::size_t move_keys(int slot, int from, int to) {
    std::size_t moved = 0;
    for (int round = 0; round < 1000; ++round) {
      auto keys = node(from).strings({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
      if (keys.empty()) return moved;
      std::vector<std::string> args = {"MIGRATE", "127.0.0.1", std::to_string(to), "", "0",
                                       "5000",    "KEYS"};
      args.insert(args.end(), keys.begin(), keys.end());
      ok(from, args);
      moved += keys.size();
    }
    throw std::runtime_error("move_keys: too many rounds");
  }
  /// Ends the migration: the slot belongs to `to` on every master.
  void end_migration(int slot, int to) {
    const std::string target = id(to);
    ok(to, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", target});
    for (int p : ports_) {
      if (p != to) ok(p, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", target});
    }
  }
  /// Abandons a migration: both sides stable again (keys already moved stay moved).
  void cancel_migration(int slot, int from, int to) {
    ok(to, {"CLUSTER", "SETSLOT", std::to_string(slot), "STABLE"});
    ok(from, {"CLUSTER", "SETSLOT", std::to_string(slot), "STABLE"});
  }
  /// Moves `slot` with all its keys from `from` to `to`.
  void migrate(int slot, int from, int to) {
    begin_migration(slot, from, to);
    move_keys(slot, from, to);
    end_migration(slot, to);
  }

 private:
  std::vector<int> ports_;
  std::function<std::string(int)> node_url_;  // empty: redis://127.0.0.1:<port>
  std::map<int, std::unique_ptr<RawClient>> nodes_;
};

/// A failure with `error`, worker "w", for the entries the cluster tests send.
inline Failure failure(std::string error) {
  Failure f;
  f.error = std::move(error);
  f.worker = "w";
  return f;
}

/// `n` queue names `stem`0, `stem`1, … (the hash tag of their keys) whose dead lists are on
/// the master on `port` (asked with MOVED); fewer when 10000 names hold too few.
inline std::vector<std::string> queues_on(RawCluster& raw, const RedisListStorage& s, int port,
                                          std::size_t n, const std::string& stem) {
  std::vector<std::string> out;
  for (int i = 0; out.size() < n && i < 10000; ++i) {
    const std::string q = stem + std::to_string(i);
    if (raw.owner(s.key(q, ListKind::dead)) == port) out.push_back(q);
  }
  return out;
}

#ifdef DLQ_CLUSTER_SCRIPT
/// A cluster of three masters for one test alone (tests/support/redis_cluster.sh, its path in
/// DLQ_CLUSTER_SCRIPT, or redis_cluster_replicas.sh: a replica each); stopped, and its
/// directory removed, by the destructor.
class PrivateCluster {
 public:
  PrivateCluster() {
    char tmpl[] = "/tmp/dlq-cluster-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("PrivateCluster: mkdtemp failed");
    dir_ = tmpl;
    const std::string cmd = std::string("'") + DLQ_CLUSTER_SCRIPT + "' start '" + dir_ + "/c'";
    if (std::system(cmd.c_str()) != 0) {
      stop();
      throw std::runtime_error("PrivateCluster: " + cmd + " failed");
    }
    std::ifstream in(dir_ + "/c/ports");
    for (int p = 0; in >> p;)
      ports_.push_back(p);
    if (ports_.size() != 3) throw std::runtime_error("PrivateCluster: no ports file");
  }
  PrivateCluster(const PrivateCluster&) = delete;
  PrivateCluster& operator=(const PrivateCluster&) = delete;
  ~PrivateCluster() { stop(); }

  const std::vector<int>& ports() const { return ports_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(ports_.at(0)); }
  pid_t pid(int port) const {
    std::ifstream in(dir_ + "/c/pid-" + std::to_string(port));
    pid_t p = -1;
    in >> p;
    if (p <= 0) throw std::runtime_error("PrivateCluster: no pid for port " + std::to_string(port));
    return p;
  }
  /// The replicas of a cluster started with one per master (redis_cluster_replicas.sh):
  /// the replica's port for each master's port; empty for a cluster of masters alone.
  std::map<int, int> replicas() const {
    std::ifstream in(dir_ + "/c/replicas");
    std::map<int, int> out;
    for (int replica = 0, master = 0; in >> replica >> master;)
      out[master] = replica;
    return out;
  }
  void freeze(int port) const { ::kill(pid(port), SIGSTOP); }
  void thaw(int port) const { ::kill(pid(port), SIGCONT); }
  void kill9(int port) const { ::kill(pid(port), SIGKILL); }

 private:
  void stop() {
    const std::string cmd = std::string("'") + DLQ_CLUSTER_SCRIPT + "' stop '" + dir_ + "/c'";
    if (std::system(cmd.c_str()) != 0) {  // best effort; nothing else to do in a destructor
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_;
  std::vector<int> ports_;
};
#endif  // DLQ_CLUSTER_SCRIPT

/// The options of the fault tests on a PrivateCluster at `url`: a connection that cannot be
/// made fails within 500 ms, once (no reconnection attempts); a command may take 2 s.
inline redis::ConnectionOptions fault_options(const std::string& url) {
  auto o = redis::parse_url(url);
  o.connect_timeout = std::chrono::milliseconds(500);
  o.command_timeout = std::chrono::milliseconds(2000);
  o.reconnect_attempts = 0;
  return o;
}

/// Polls `ready` every 10 ms, at most `tries` times. @returns its last answer.
template <class Ready>
bool wait_for(Ready ready, int tries) {
  for (int i = 0; i < tries && !ready(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return ready();
}

/// Waits (up to 2 s) until nothing accepts connections on `port` of the local host: a killed
/// node's process is gone, its sockets closed (kill returns before that; a write could reach
/// it while dying and be outcome unknown). @returns whether the port refuses connections.
inline bool wait_refused(int port) {
  const auto refuses = [port] {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool refused = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0;
    ::close(s);
    return refused;
  };
  for (int i = 0; i < 200 && !refuses(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return refuses();
}

}  // namespace dlq::test
