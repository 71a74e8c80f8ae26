// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The in-process console fixture shared by the console's Catch2 tests: a dlq::http::Console
// over dlq::MemoryStorage, mounted on a loopback dlq::http::GuardedServer on a free port, and
// the request helpers the tests use.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include <catch2/catch.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http.hpp>
#include <nlohmann/json.hpp>

namespace console_test {

using json = nlohmann::json;

// A console on 127.0.0.1:<free port> over a memory queue; stopped and joined on destruction.
struct Served {
  explicit Served(dlq::http::ConsoleOptions o = {}, dlq::http::ServerLimits limits = {})
      : backend(queue), console(backend, std::move(o)), server(std::move(limits)) {
    console.mount(server);
    port = server.bind_to_any_port("127.0.0.1");
    REQUIRE(port > 0);
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Served() {
    server.stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }
  dlq::DeadLetterQueue<dlq::MemoryStorage> queue;
  dlq::http::QueueBackend<dlq::MemoryStorage> backend;
  dlq::http::Console console;
  dlq::http::GuardedServer server;
  int port = 0;
  std::thread thread;
};

inline json body_of(const httplib::Result& r) {
  REQUIRE(r);
  return json::parse(r->body);
}

inline std::string error_code(const httplib::Result& r) {
  return body_of(r)["error"]["code"];
}

inline httplib::Result post(httplib::Client& c, const std::string& path, const json& body,
                            const httplib::Headers& h = {}) {
  return c.Post(path.c_str(), h, body.dump(), "application/json");
}

// The state of the console operation `id` once it is no longer running (polled, 10 s at
// most).
inline json wait_op(httplib::Client& c, const std::string& id) {
  for (int i = 0; i < 2000; ++i) {
    auto op = body_of(c.Get(("/api/operation?id=" + id).c_str()));
    if (op["state"] != "running") return op;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("operation did not finish");
  return {};
}

}  // namespace console_test
