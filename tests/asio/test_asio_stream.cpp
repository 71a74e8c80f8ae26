// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The byte stream under dlq::asio::RedisConnection (asio/detail/redis_stream.hpp) and the
// connection over each of its transports, against private redis-servers: a connect tries
// each address in turn; reads, writes, the idle peek and the readiness probe on a TCP and a
// unix socket; the connection over a unix socket, reconnecting after a restart; every socket
// it opens is close-on-exec.
#include <fcntl.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlq/asio/redis.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace test_asio_stream {

namespace {

using dlq::asio::detail::redis_stream;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;

const std::string ping = "*1\r\n$4\r\nPING\r\n";

tcp::endpoint loopback(int port) {
  return {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)};
}

// Writes PING and reads the answer through the stream's asynchronous calls.
std::string ping_pong(asio::io_context& io, redis_stream& s) {
  std::error_code write_error, read_error;
  std::size_t written = 0;
  s.async_write_some(asio::buffer(ping), [&](const std::error_code& ec, std::size_t n) {
    write_error = ec;
    written = n;
  });
  std::string got(64, '\0');
  std::size_t read = 0;
  s.async_read_some(asio::buffer(got), [&](const std::error_code& ec, std::size_t n) {
    read_error = ec;
    read = n;
  });
  io.restart();
  io.run();
  REQUIRE_FALSE(write_error);
  CHECK(written == ping.size());
  REQUIRE_FALSE(read_error);
  got.resize(read);
  return got;
}

// Waits (up to 2 s) until `pred()` holds.
template <class Pred>
bool eventually(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The socket descriptors of this process that a child's exec would inherit.
std::vector<int> sockets_without_cloexec() {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    if (ec || target.string().rfind("socket:", 0) != 0) continue;
    const int fd = std::stoi(e.path().filename().string());
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) out.push_back(fd);
  }
  return out;
}

}  // namespace

TEST_CASE("a connect tries each address in turn until one accepts", "[asio][stream]") {
  dlq::test::RedisProcess server;
  const int refused = dlq::test::free_loopback_port();
  asio::io_context io;
  auto s = std::make_shared<redis_stream>(tcp::socket(io));
  std::error_code connected = asio::error::would_block;
  s->async_connect({loopback(refused), loopback(server.port())},
                   [&](const std::error_code& ec) { connected = ec; });
  io.run();
  REQUIRE_FALSE(connected);
  CHECK(ping_pong(io, *s) == "+PONG\r\n");

  // None accepts: the last error, delivered through the handler.
  auto t = std::make_shared<redis_stream>(tcp::socket(io));
  t->async_connect({loopback(refused)}, [&](const std::error_code& ec) { connected = ec; });
  io.restart();
  io.run();
  CHECK(connected == asio::error::connection_refused);
}

TEST_CASE(
    "a TCP and a unix stream: reads and writes, the probe sees an answer waiting, the idle "
    "peek sees the peer close, every socket is close-on-exec",
    "[asio][stream]") {
  dlq::test::RedisProcess server;
  const bool unix_socket = GENERATE(false, true);
  INFO((unix_socket ? "unix socket" : "TCP"));
  asio::io_context io;
  std::shared_ptr<redis_stream> s;
  std::error_code connected = asio::error::would_block;
  const auto done = [&](const std::error_code& ec) { connected = ec; };
  if (unix_socket) {
    s = std::make_shared<redis_stream>(local::socket(io));
    s->async_connect(local::endpoint(server.unix_socket()), done);
  } else {
    s = std::make_shared<redis_stream>(tcp::socket(io));
    s->async_connect({loopback(server.port())}, done);
  }
  io.run();
  REQUIRE_FALSE(connected);
  CHECK(sockets_without_cloexec().empty());
  CHECK(ping_pong(io, *s) == "+PONG\r\n");

  // Without waiting: the write goes out at once, the probe sees the answer, the read takes it.
  std::error_code ec;
  CHECK(s->try_write_some(asio::buffer(ping), ec) == ping.size());
  REQUIRE_FALSE(ec);
  CHECK(eventually([&] { return s->probe().readable; }));
  CHECK(s->probe().writable);
  CHECK_FALSE(s->peer_closed());  // an answer waiting is not a close
  std::string got(64, '\0');
  const std::size_t n = s->try_read_some(asio::buffer(got), ec);
  REQUIRE_FALSE(ec);
  CHECK(got.substr(0, n) == "+PONG\r\n");
  CHECK_FALSE(s->probe().readable);
  s->try_read_some(asio::buffer(got), ec);
  CHECK(ec == asio::error::would_block);
  CHECK_FALSE(s->peer_closed());

  server.kill9();
  CHECK(eventually([&] { return s->peer_closed(); }));
  s->close();
}

TEST_CASE(
    "the connection over a unix socket: commands answered, AUTH and SELECT sent, a restart "
    "reconnects",
    "[asio][stream][redis]") {
  dlq::test::RedisProcess server({"--requirepass", "s3cret"});
  asio::io_context io;
  dlq::asio::RedisConnection conn(io.get_executor(),
                                  "unix://" + server.unix_socket() + "?db=2&password=s3cret");
  CHECK(conn.endpoint() == "unix:" + server.unix_socket() + "/2");  // the db, for messages
  const auto run = [&](std::vector<std::string> args, bool write) {
    std::exception_ptr error;
    dlq::asio::RedisReply reply;
    conn.execute(std::move(args), write, "test",
                 [&](std::exception_ptr e, dlq::asio::RedisReply r) {
                   error = e;
                   reply = std::move(r);
                 });
    io.restart();
    io.run();
    if (error) std::rethrow_exception(error);
    return reply;
  };
  CHECK(run({"RPUSH", "k", "a"}, true).integer == 1);
  CHECK(sockets_without_cloexec().empty());
  CHECK(run({"CLIENT", "INFO"}, false).str.find(" db=2 ") != std::string::npos);
  server.restart();
  // The idle connection was closed by the restart: the next command reconnects (the list
  // was not saved: the server starts empty).
  CHECK(run({"LLEN", "k"}, false).integer == 0);
  CHECK(run({"RPUSH", "k", "b"}, true).integer == 1);
  conn.close();
}

}  // namespace test_asio_stream
