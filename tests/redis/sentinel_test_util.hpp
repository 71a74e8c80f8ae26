// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Helpers for the Sentinel tests (test_sentinel.cpp, test_sentinel_replay.cpp): a private
// master, replica and three sentinels per test case (tests/support/redis_sentinel.sh, its
// path in DLQ_SENTINEL_SCRIPT), patient connection options, counting ids in a list.
#pragma once

#include <stdlib.h>
#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlq/redis/connection.hpp"
#include "redis/redis_test_util.hpp"

namespace dlq::test {

// A master, a replica and three sentinels for one test case alone; stopped, and its
// directory removed, by the destructor.
class PrivateSentinel {
 public:
  PrivateSentinel() {
    char tmpl[] = "/tmp/dlq-sentinel-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("PrivateSentinel: mkdtemp failed");
    dir_ = tmpl;
    const std::string cmd = std::string("'") + DLQ_SENTINEL_SCRIPT + "' start '" + dir_ + "/s'";
    if (std::system(cmd.c_str()) != 0) {
      stop();
      throw std::runtime_error("PrivateSentinel: " + cmd + " failed");
    }
    std::ifstream in(dir_ + "/s/env");
    for (std::string line; std::getline(in, line);) {
      const auto eq = line.find('=');
      if (eq != std::string::npos) env_[line.substr(0, eq)] = line.substr(eq + 1);
    }
    if (env_["URL"].empty()) throw std::runtime_error("PrivateSentinel: no env file");
    std::istringstream ports(env_["SENTINEL_PORTS"]);
    for (int p = 0; ports >> p;)
      sentinel_ports_.push_back(p);
  }
  PrivateSentinel(const PrivateSentinel&) = delete;
  PrivateSentinel& operator=(const PrivateSentinel&) = delete;
  ~PrivateSentinel() { stop(); }

  std::string url() const { return env_.at("URL"); }
  int master_port() const { return std::stoi(env_.at("MASTER_PORT")); }
  int replica_port() const { return std::stoi(env_.at("REPLICA_PORT")); }
  pid_t master_pid() const { return static_cast<pid_t>(std::stol(env_.at("MASTER_PID"))); }
  const std::vector<int>& sentinel_ports() const { return sentinel_ports_; }
  pid_t replica_pid() const { return static_cast<pid_t>(std::stol(env_.at("REPLICA_PID"))); }

  // Starts the killed master again (the sentinels make it a replica of the new master), with
  // `args` added to its redis-server arguments (e.g. "--replicaof 127.0.0.1 PORT").
  void restart_master(const std::string& args = "") const {
    const std::string cmd =
        std::string("'") + DLQ_SENTINEL_SCRIPT + "' restart '" + dir_ + "/s' master " + args;
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error(cmd + " failed");
  }

  // The lines of the servers' and sentinels' logs (DIR/<name>/*.log) holding a `+` or `-`
  // event (failover steps, votes, aborts) or a warning: what a failed failover test prints,
  // since the directory is removed with the deployment.
  std::string event_log() const {
    std::string out;
    for (const char* name : {"s1", "s2", "s3", "master", "replica"}) {
      for (const char* file : {"sentinel.log", "redis.log"}) {
        std::ifstream in(dir_ + "/s/" + name + "/" + file);
        for (std::string line; std::getline(in, line);)
          if (line.find(" # ") != std::string::npos || line.find(" +") != std::string::npos ||
              line.find(" -") != std::string::npos)
            out += std::string(name) + ": " + line + "\n";
      }
    }
    return out;
  }

  // The port the first sentinel names as the master now.
  int named_master_port() const {
    RawClient s("redis://127.0.0.1:" + std::to_string(sentinel_ports_.at(0)));
    const auto a = s.strings({"SENTINEL", "get-master-addr-by-name", "mymaster"});
    return a.size() == 2 ? std::stoi(a[1]) : 0;
  }

 private:
  void stop() {
    const std::string cmd = std::string("'") + DLQ_SENTINEL_SCRIPT + "' stop '" + dir_ + "/s'";
    if (std::system(cmd.c_str()) != 0) {  // best effort; nothing else to do in a destructor
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_;
  std::map<std::string, std::string> env_;
  std::vector<int> sentinel_ports_;
};

// The options of a storage that waits for a failover: a connect fails within 500 ms, and
// 40 tries with backoff up to 250 ms give the sentinels ~10 s to promote the replica.
inline redis::ConnectionOptions patient(const std::string& url) {
  redis::ConnectionOptions o = redis::parse_url(url);
  o.connect_timeout = std::chrono::milliseconds(500);
  o.command_timeout = std::chrono::milliseconds(2000);
  o.reconnect_attempts = 40;
  o.reconnect_backoff = std::chrono::milliseconds(50);
  o.reconnect_backoff_max = std::chrono::milliseconds(250);
  return o;
}


}  // namespace dlq::test
