// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The RESP2 codec of dlq::asio::RedisConnection (asio/detail/resp.hpp): commands formatted
// byte for byte; replies parsed whole, split at every byte, pipelined, big, and hostile
// bytes refused without reading past the buffer or reserving what has not arrived. Then the
// connection against a scripted fake server on loopback: replies trickling in a byte at a
// time, error replies, an 8 MB reply in chunks, garbage and a server that hangs up in the
// middle of a reply (the commands in flight fail as connection errors, the next one
// reconnects).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>  // only to compare reply_type with REDIS_REPLY_*
#include <asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dlq/asio/redis.hpp"
#include "support/catch.hpp"

namespace test_asio_resp {

namespace {

using dlq::asio::RedisReply;
namespace reply_type = dlq::asio::reply_type;
using dlq::asio::detail::parse_status;
using dlq::asio::detail::reply_parser;

std::string command(const std::vector<std::string>& args) {
  std::string out;
  dlq::asio::detail::resp_command(out, args.size());
  for (const auto& a : args)
    dlq::asio::detail::resp_arg(out, a);
  return out;
}

parse_status parse(const std::string& bytes, RedisReply& r, reply_parser& p) {
  return p.parse(bytes.data(), bytes.size(), r);
}

}  // namespace

TEST_CASE("reply types have the numbers of the blocking connection's REDIS_REPLY_*",
          "[asio][resp]") {
  static_assert(reply_type::string == REDIS_REPLY_STRING);
  static_assert(reply_type::array == REDIS_REPLY_ARRAY);
  static_assert(reply_type::integer == REDIS_REPLY_INTEGER);
  static_assert(reply_type::nil == REDIS_REPLY_NIL);
  static_assert(reply_type::status == REDIS_REPLY_STATUS);
  static_assert(reply_type::error == REDIS_REPLY_ERROR);
  CHECK(RedisReply{}.type == reply_type::nil);
}

TEST_CASE("commands are formatted as RESP arrays of bulk strings", "[asio][resp]") {
  CHECK(command({"PING"}) == "*1\r\n$4\r\nPING\r\n");
  CHECK(command({"RPUSH", "k", ""}) == "*3\r\n$5\r\nRPUSH\r\n$1\r\nk\r\n$0\r\n\r\n");
  const std::string binary("a\0\r\nb", 5);
  CHECK(command({binary}) == std::string("*1\r\n$5\r\na\0\r\nb\r\n", 15));
  const std::string big(100000, 'x');
  CHECK(command({big}) == "*1\r\n$100000\r\n" + big + "\r\n");
}

TEST_CASE("replies of every type are parsed, whole or split at any byte", "[asio][resp]") {
  reply_parser p;
  RedisReply r;
  REQUIRE(parse(":42\r\n", r, p) == parse_status::complete);
  CHECK(r.type == reply_type::integer);
  CHECK(r.integer == 42);
  CHECK(p.used == 5);
  r = {};
  REQUIRE(parse("-WRONGTYPE Operation against a key\r\n", r, p) == parse_status::complete);
  CHECK(r.type == reply_type::error);
  CHECK(r.str == "WRONGTYPE Operation against a key");
  r = {};
  REQUIRE(parse("+status with \r inside\r\n", r, p) == parse_status::complete);
  CHECK(r.str == "status with \r inside");

  // A composite reply: incomplete at every split point, complete with all its bytes.
  static const char raw[] = "*4\r\n:-7\r\n$5\r\na\0\r\nb\r\n*2\r\n+OK\r\n$-1\r\n*-1\r\n";
  const std::string composite(raw, sizeof raw - 1);
  for (std::size_t n = 0; n < composite.size(); ++n) {
    RedisReply part;
    INFO("prefix of " << n << " bytes");
    REQUIRE(p.parse(composite.data(), n, part) == parse_status::incomplete);
  }
  r = {};
  REQUIRE(parse(composite, r, p) == parse_status::complete);
  CHECK(p.used == composite.size());
  REQUIRE(r.type == reply_type::array);
  REQUIRE(r.elements.size() == 4);
  CHECK(r.elements[0].integer == -7);
  CHECK(r.elements[1].type == reply_type::string);
  CHECK(r.elements[1].str == std::string("a\0\r\nb", 5));
  REQUIRE(r.elements[2].elements.size() == 2);
  CHECK(r.elements[2].elements[0].type == reply_type::status);
  CHECK(r.elements[2].elements[1].type == reply_type::nil);
  CHECK(r.elements[3].type == reply_type::nil);

  // Pipelined replies back to back: one at a time, each its own bytes.
  const std::string pipelined = ":1\r\n$3\r\nfoo\r\n" + composite + "+PONG\r\n";
  std::size_t at = 0;
  std::vector<int> types;
  while (at < pipelined.size()) {
    RedisReply one;
    REQUIRE(p.parse(pipelined.data() + at, pipelined.size() - at, one) == parse_status::complete);
    at += p.used;
    types.push_back(one.type);
  }
  CHECK(types == std::vector<int>{reply_type::integer, reply_type::string, reply_type::array,
                                  reply_type::status});
}

TEST_CASE("a big bulk reply: the parser asks for its whole length at once", "[asio][resp]") {
  const std::string item(8 * 1024 * 1024, 'z');
  const std::string wire = "$" + std::to_string(item.size()) + "\r\n" + item + "\r\n";
  reply_parser p;
  RedisReply r;
  REQUIRE(p.parse(wire.data(), 100, r) == parse_status::incomplete);
  CHECK(p.need == wire.size());
  r = {};
  REQUIRE(parse(wire, r, p) == parse_status::complete);
  CHECK(r.str.size() == item.size());
  CHECK(p.used == wire.size());
}

TEST_CASE("hostile bytes are refused as bad, never read past the buffer", "[asio][resp]") {
  reply_parser p;
  const std::vector<std::string> bad = {
      "!oops\r\n",                     // unknown type byte
      std::string("\0\r\n", 3),        // a NUL type byte
      ":12a\r\n",                      // not a number
      ":\r\n",                         // empty number
      ":99999999999999999999999\r\n",  // overflow
      "$-2\r\n",                       // negative length
      "$3\r\nabcXY",                   // bulk without its CRLF
      "$99999999999\r\n",              // longer than Redis allows
      "*-5\r\n",                       // negative count
      "*1\r\n!\r\n",                   // a bad element
  };
  for (const auto& b : bad) {
    RedisReply r;
    INFO("bytes: " << b);
    CHECK(parse(b, r, p) == parse_status::bad);
    CHECK_FALSE(p.why.empty());
  }
  // Nested deeper than max_depth.
  std::string deep;
  for (int i = 0; i <= reply_parser::max_depth; ++i)
    deep += "*1\r\n";
  deep += ":1\r\n";
  RedisReply r;
  CHECK(parse(deep, r, p) == parse_status::bad);
  // A declared array of four billion elements with nothing after it: incomplete, and
  // nothing reserved for what has not arrived.
  r = {};
  CHECK(parse("*4294967295\r\n:1\r\n", r, p) == parse_status::incomplete);
  CHECK(r.elements.capacity() < 16);
}

namespace {

// A scripted server on a loopback port: `script` runs on its thread for each connection it
// accepts (up to `connections`).
struct fake_server {
  int listener = -1;
  int port = 0;
  std::thread thread;

  fake_server(int connections, std::function<void(int fd, int n)> script) {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener, 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    thread = std::thread([this, connections, script = std::move(script)] {
      for (int n = 0; n < connections; ++n) {
        const int c = ::accept(listener, nullptr, nullptr);
        if (c < 0) return;
        script(c, n);
        ::close(c);
      }
    });
  }
  ~fake_server() {
    thread.join();
    ::close(listener);
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port); }
};

// Reads until `needle` has arrived (or the peer closes).
void read_until(int fd, const std::string& needle) {
  std::string got;
  char buf[4096];
  while (got.find(needle) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    got.append(buf, static_cast<std::size_t>(n));
  }
}
void write_all(int fd, const std::string& bytes, std::size_t chunk = 0) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::size_t n = chunk == 0 ? bytes.size() - at : std::min(chunk, bytes.size() - at);
    const ssize_t w = ::send(fd, bytes.data() + at, n, MSG_NOSIGNAL);
    if (w <= 0) return;
    at += static_cast<std::size_t>(w);
    if (chunk != 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}
// The connection's handshake: CLUSTER SLOTS, answered as a plain server does.
void handshake(int fd) {
  read_until(fd, "SLOTS\r\n");
  write_all(fd, "-ERR This instance has cluster support disabled\r\n");
}

struct result {
  std::exception_ptr error;
  RedisReply reply;
  bool done = false;
};

std::function<void(std::exception_ptr, RedisReply)> into(result& r) {
  return [&r](std::exception_ptr e, RedisReply reply) {
    r.error = e;
    r.reply = std::move(reply);
    r.done = true;
  };
}

}  // namespace

TEST_CASE("the connection: replies a byte at a time, error replies, the connection goes on",
          "[asio][resp]") {
  fake_server server(1, [](int fd, int) {
    handshake(fd);
    read_until(fd, "C3\r\n");
    write_all(fd, ":42\r\n-WRONGTYPE Operation against a key\r\n*2\r\n$3\r\nfoo\r\n$-1\r\n", 1);
    read_until(fd, "C4\r\n");
    write_all(fd, "+OK\r\n");
  });
  asio::io_context io;
  dlq::asio::RedisConnection conn(io.get_executor(), server.url());
  result r1, r2, r3, r4;
  conn.execute({"C1"}, true, "C1", into(r1));
  conn.execute({"C2"}, true, "C2", into(r2));
  conn.execute({"C3"}, false, "C3", into(r3));
  io.run();
  REQUIRE(r1.done);
  REQUIRE_FALSE(r1.error);
  CHECK(r1.reply.integer == 42);
  REQUIRE(r2.error);
  try {
    std::rethrow_exception(r2.error);
  } catch (const dlq::reply_error& e) {
    CHECK(e.code() == "WRONGTYPE");
    CHECK_FALSE(e.outcome_unknown());
  }
  REQUIRE_FALSE(r3.error);
  REQUIRE(r3.reply.elements.size() == 2);
  CHECK(r3.reply.elements[0].str == "foo");
  CHECK(r3.reply.elements[1].type == reply_type::nil);
  io.restart();
  conn.execute({"C4"}, false, "C4", into(r4));
  io.run();
  REQUIRE_FALSE(r4.error);
  CHECK(r4.reply.type == reply_type::status);
  CHECK(conn.pending() == 0);
}

TEST_CASE("the connection: an 8 MB reply arriving in 64 KB pieces", "[asio][resp]") {
  const std::string item(8 * 1024 * 1024, 'q');
  fake_server server(1, [&item](int fd, int) {
    handshake(fd);
    read_until(fd, "GET\r\n");
    write_all(fd, "$" + std::to_string(item.size()) + "\r\n" + item + "\r\n:7\r\n", 65536);
    read_until(fd, "never");  // until the client hangs up
  });
  asio::io_context io;
  dlq::asio::RedisConnection conn(io.get_executor(), server.url());
  result big, after;
  conn.execute({"GET"}, false, "GET", into(big));
  conn.execute({"NEXT"}, false, "NEXT", into(after));
  io.run();
  REQUIRE_FALSE(big.error);
  CHECK(big.reply.str == item);
  REQUIRE_FALSE(after.error);
  CHECK(after.reply.integer == 7);
  conn.close();
}

TEST_CASE(
    "the connection: garbage or a hang-up mid-reply fails what is in flight; the next "
    "command reconnects",
    "[asio][resp]") {
  const bool garbage = GENERATE(true, false);
  fake_server server(2, [garbage](int fd, int n) {
    handshake(fd);
    if (n == 0) {
      read_until(fd, "W2\r\n");
      write_all(fd, garbage ? ":1\r\n%3\r\n" : ":1\r\n$10\r\nabc");
      return;  // hangs up
    }
    read_until(fd, "AGAIN\r\n");
    write_all(fd, ":5\r\n");
  });
  asio::io_context io;
  dlq::asio::RedisConnection conn(io.get_executor(), server.url());
  result w1, w2, read;
  conn.execute({"W1"}, true, "W1", into(w1));
  conn.execute({"W2"}, true, "W2", into(w2));
  io.run();
  REQUIRE_FALSE(w1.error);
  CHECK(w1.reply.integer == 1);
  REQUIRE(w2.error);
  try {
    std::rethrow_exception(w2.error);
  } catch (const dlq::connection_error& e) {
    CHECK(e.outcome_unknown());  // a write whose answer was not read
    if (garbage) CHECK(std::string(e.what()).find("Protocol error") != std::string::npos);
  }
  io.restart();
  conn.execute({"AGAIN"}, false, "AGAIN", into(read));
  io.run();
  REQUIRE_FALSE(read.error);
  CHECK(read.reply.integer == 5);
}

TEST_CASE(
    "the connection: a reply that arrived whole before the server hung up completes its "
    "command (the hang-up read in the same pass does not discard it)",
    "[asio][resp]") {
  // 32768 bytes: the input buffer (16 KB, then doubled) fills exactly, so the same read
  // pass goes on and reads the end of the stream.
  const std::string item(32758, 'r');
  const std::string wire = "$" + std::to_string(item.size()) + "\r\n" + item + "\r\n";
  REQUIRE(wire.size() == 32768);
  std::atomic<bool> hung_up{false};
  fake_server server(1, [&](int fd, int) {
    handshake(fd);
    read_until(fd, "PING\r\n");
    write_all(fd, "+PONG\r\n");
    read_until(fd, "W\r\n");
    write_all(fd, wire);
    ::shutdown(fd, SHUT_WR);
    hung_up = true;
  });
  asio::io_context io;
  dlq::asio::RedisConnection conn(io.get_executor(), server.url());
  result ping, w;
  conn.execute({"PING"}, false, "PING", [&](std::exception_ptr e, RedisReply r) {
    ping.error = e;
    ping.done = true;
    (void)r;
    conn.execute({"W"}, true, "W", into(w));
    // The loop is busy until the reply and the hang-up are both in the socket.
    asio::post(io, [&] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!hung_up && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    });
  });
  io.run();
  REQUIRE(ping.done);
  REQUIRE_FALSE(ping.error);
  REQUIRE(w.done);
  CHECK(hung_up);
  if (w.error) {
    try {
      std::rethrow_exception(w.error);
    } catch (const std::exception& e) {
      FAIL_CHECK("the answered write failed: " << e.what());
    }
  }
  CHECK(w.reply.str == item);
}

}  // namespace test_asio_resp
