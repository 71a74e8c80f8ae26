// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The console against slow clients, over real loopback sockets: peers on 127.0.0.2 that
// connect and send nothing, or send their request head one byte every 2 s (slowloris),
// while another address (127.0.0.1) asks for /healthz and an authenticated API page. The
// other address must be answered promptly all along, token or not.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http.hpp>
#include <nlohmann/json.hpp>

#include "http/console_fixture.hpp"

namespace {

using namespace console_test;
using clock_type = std::chrono::steady_clock;

const std::string token = "slow-clients-test-token-0123456789";

// A TCP connection to 127.0.0.1:port from `from` (any 127.x.y.z: Linux routes the whole of
// 127.0.0.0/8 to loopback); -1 when it cannot connect.
int connect_from(const char* from, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sockets closed on destruction (before the server in the tests below: declared after it).
struct Peers {
  std::vector<int> fds;
  ~Peers() { close_all(); }
  void close_all() {
    for (const int fd : fds)
      if (fd >= 0) ::close(fd);
    fds.clear();
  }
};

// One round from 127.0.0.1: /healthz and an authenticated /api/queues, each on a new
// connection; returns the slower of the two times, or a large value when one failed.
std::chrono::milliseconds good_round(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(10, 0);
  c.set_read_timeout(10, 0);
  const auto t0 = clock_type::now();
  auto h = c.Get("/healthz");
  const auto t1 = clock_type::now();
  auto q = c.Get("/api/queues", httplib::Headers{{"Authorization", "Bearer " + token}});
  const auto t2 = clock_type::now();
  if (!h || h->status != 200 || !q || q->status != 200) return std::chrono::minutes(1);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::max(t1 - t0, t2 - t1));
}

// Runs good rounds for `how_long`, one every 250 ms; returns the slowest.
std::chrono::milliseconds slowest_round(int port, std::chrono::milliseconds how_long) {
  std::chrono::milliseconds worst{0};
  const auto until = clock_type::now() + how_long;
  while (clock_type::now() < until) {
    worst = std::max(worst, good_round(port));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return worst;
}

dlq::http::ConsoleOptions with_token() {
  dlq::http::ConsoleOptions o;
  o.token = token;
  return o;
}

// "Promptly": far below the 5 s the server's read timeout lets one idle peer hold a worker.
constexpr std::chrono::milliseconds prompt{1500};

}  // namespace

TEST_CASE("8 idle connections from one address do not stall another address's requests") {
  Served s(with_token());
  s.queue.send_to_dlq("orders", "{}", "boom", 1, "w");
  Peers idle;
  for (int i = 0; i < 8; ++i)
    idle.fds.push_back(connect_from("127.0.0.2", s.port));
  for (const int fd : idle.fds)
    REQUIRE(fd >= 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // accepted by now
  const auto worst = slowest_round(s.port, std::chrono::seconds(3));
  INFO("slowest /healthz or /api/queues from 127.0.0.1: " << worst.count() << " ms");
  CHECK(worst < prompt);
}

TEST_CASE("64 connections sending their head a byte every 2 s do not starve another address") {
  Served s(with_token());
  s.queue.send_to_dlq("orders", "{}", "boom", 1, "w");
  Peers slow;
  for (int i = 0; i < 64; ++i)
    slow.fds.push_back(connect_from("127.0.0.2", s.port));
  for (const int fd : slow.fds)
    REQUIRE(fd >= 0);
  // The dribbler: one byte of a never-ending head to every connection every 2 s.
  std::atomic<bool> stop{false};
  std::thread dribbler([&] {
    const std::string head = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    for (std::size_t i = 0; !stop.load(); ++i) {
      const char byte = i < head.size() ? head[i] : 'a';
      for (const int fd : slow.fds)
        (void)::send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      for (int t = 0; t < 40 && !stop.load(); ++t)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto worst = slowest_round(s.port, std::chrono::seconds(8));
  stop.store(true);
  dribbler.join();
  INFO("slowest /healthz or /api/queues from 127.0.0.1: " << worst.count() << " ms");
  CHECK(worst < prompt);
}
