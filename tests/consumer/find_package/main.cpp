// Uses an installed dlq through find_package.
#include <dlq/dlq.hpp>
#ifdef CONSUMER_WITH_REDIS
#include <dlq/redis.hpp>
#endif
#ifdef CONSUMER_WITH_HTTP
#include <dlq/http.hpp>
#include <thread>
#endif
#ifdef CONSUMER_WITH_ASIO
#include <asio/io_context.hpp>
#include <dlq/asio.hpp>
#endif
#include <cstdio>

int main() {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  q.send_to_dlq("orders", R"({"order":42})", "payment timeout", 3, "worker-7");
  const auto report = q.replay_all("orders");
  const auto job = q.storage().source_pop("orders");
  std::printf("dlq %d.%d.%d: replayed %zu, got %s\n", DLQ_VERSION_MAJOR, DLQ_VERSION_MINOR,
              DLQ_VERSION_PATCH, report.replayed, job ? job->c_str() : "nothing");
#ifdef CONSUMER_WITH_REDIS
  // Links and runs the Redis backend: nothing listens on port 1, so it must say so, typed.
  try {
    dlq::DeadLetterQueue<dlq::RedisListStorage> redis(
        dlq::RedisListStorage("redis://127.0.0.1:1/0"));
    (void)redis.size("orders");
    return 1;
  } catch (const dlq::connection_error& e) {
    std::printf("redis backend linked: %s\n", e.what());
  }
#endif
#ifdef CONSUMER_WITH_HTTP
  {
    // The console mounted on the consumer's own server answers on loopback.
    q.send_to_dlq("orders", R"({"order":43})", "payment timeout", 3, "worker-7");
    dlq::http::QueueBackend<dlq::MemoryStorage> backend(q);
    dlq::http::Console console(backend, {});
    httplib::Server server;
    console.mount(server);
    const int port = server.bind_to_any_port("127.0.0.1");
    std::thread t([&] { server.listen_after_bind(); });
    while (!server.is_running())
      std::this_thread::yield();
    httplib::Client client("127.0.0.1", port);
    auto res = client.Get("/api/queues");
    server.stop();
    t.join();
    if (!res || res->status != 200 || res->body.find("\"orders\"") == std::string::npos) return 1;
    std::printf("console answered: %s", res->body.c_str());
  }
#endif
#ifdef CONSUMER_WITH_ASIO
  {
    // The asynchronous front end over the memory backend: completes on the io_context.
    asio::io_context io;
    dlq::asio::AsyncDeadLetterQueue<dlq::MemoryStorage> aq(io.get_executor());
    std::string sent_id;
    aq.async_send_to_dlq("orders", R"({"order":44})", "payment timeout", 3, "worker-7",
                         [&](std::exception_ptr e, std::string id) {
                           if (!e) sent_id = std::move(id);
                         });
    io.run();
    if (sent_id.empty()) return 1;
    std::printf("async send stored %s\n", sent_id.c_str());
  }
#endif
  return report.replayed == 1 && job == std::optional<std::string>(R"({"order":42})") ? 0 : 1;
}
