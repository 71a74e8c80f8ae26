// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// A private redis-server for fault tests: started on a free 127.0.0.1 port with its own
// temporary directory and no persistence, and killed, frozen (SIGSTOP), thawed or restarted
// on the same port by the test. The server dies with the test process (PR_SET_PDEATHSIG),
// and the destructor always reaps it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dlq::test {

/// Returns a TCP port on 127.0.0.1 that was free a moment ago.
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("free_loopback_port: socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("free_loopback_port: bind() failed");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

/// Starts `args[0]` (a path) with `args` as its argv in a child process; returns its pid.
/// The child exits with 127 when the program cannot be started.
inline pid_t spawn_process(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

/// One redis-server child process.
class RedisProcess {
 public:
  /// Starts redis-server (from $DLQ_REDIS_SERVER or PATH) with `extra` arguments appended,
  /// e.g. {"--requirepass", "secret"}. Throws std::runtime_error if it does not answer
  /// within 5 s.
  explicit RedisProcess(std::vector<std::string> extra = {})
      : extra_(std::move(extra)), port_(free_loopback_port()) {
    char tmpl[] = "/tmp/dlq-redis-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("RedisProcess: mkdtemp failed");
    dir_ = tmpl;
    start();
  }
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;
  ~RedisProcess() {
    kill9();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  std::string unix_socket() const { return dir_ + "/redis.sock"; }
  /// redis://127.0.0.1:<port> (add credentials yourself when the server needs them).
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  /// Starts the server (again) on the same port and waits until it answers.
  void start() {
    if (pid_ > 0) return;
    const char* env = std::getenv("DLQ_REDIS_SERVER");
    const std::string server = env != nullptr && *env != '\0' ? env : "redis-server";
    std::vector<std::string> args = {server,
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir_,
                                     "--daemonize",
                                     "no",
                                     "--logfile",
                                     dir_ + "/redis.log",
                                     "--unixsocket",
                                     unix_socket(),
                                     "--unixsocketperm",
                                     "700",
                                     "--enable-debug-command",
                                     "local"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("RedisProcess: fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    if (!wait_ready(std::chrono::seconds(5))) {
      kill9();
      throw std::runtime_error("RedisProcess: redis-server did not start on port " +
                               std::to_string(port_) + " (see " + dir_ + "/redis.log)");
    }
  }

  /// SIGKILL and reap. No-op when not running.
  void kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  /// kill -9, then start again on the same port (the data is gone: no persistence).
  void restart() {
    kill9();
    start();
  }
  /// SIGSTOP: the server keeps its sockets but answers nothing.
  void freeze() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
  }
  /// SIGCONT.
  void thaw() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

 private:
  // True once something answers PING on the port (any reply counts, NOAUTH included).
  bool wait_ready(std::chrono::milliseconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port_));
      bool ok = false;
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        timeval tv{0, 200000};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        const char ping[] = "PING\r\n";
        char buf[64];
        if (::send(fd, ping, sizeof ping - 1, MSG_NOSIGNAL) > 0 &&
            ::recv(fd, buf, sizeof buf, 0) > 0) {
          ok = true;
        }
      }
      if (fd >= 0) ::close(fd);
      if (ok) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  std::vector<std::string> extra_;
  int port_;
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace dlq::test
