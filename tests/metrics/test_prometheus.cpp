// dlq/metrics/prometheus.hpp: the text exposition — label escaping, exact values, what is
// left out (never guessed), duplicate series, counters per process, constant labels.
#include <chrono>
#include <string>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/metrics/prometheus.hpp"
#include "support/catch.hpp"

namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1))
    ++n;
  return n;
}

dlq::QueueStats stats_of(std::string queue, std::size_t depth) {
  dlq::QueueStats s;
  s.queue = std::move(queue);
  s.dead.depth = depth;
  return s;
}

}  // namespace

TEST_CASE("label values escape quotes, backslashes, newlines and bytes that are not UTF-8",
          "[metrics]") {
  std::string out;
  dlq::metrics::append_label_value(out, "a\"b\\c\nd\xff\xc3\xa9");
  CHECK(out == "a\\\"b\\\\c\\nd\\\\xff\xc3\xa9");

  const std::string text =
      dlq::metrics::prometheus_text({stats_of("we\"ird\n\\", 3), stats_of("x\xff", 1)});
  // a backslash of a queue name is doubled (append_queue_label_value: injective)
  CHECK(has_line(text, "dlq_entries{queue=\"we\\\"ird\\n\\\\\\\\\",list=\"dead\"} 3"));
  CHECK(has_line(text, "dlq_entries{queue=\"x\\\\xff\",list=\"corrupt\"} 0"));
}

TEST_CASE("a queue listed twice gives one series", "[metrics]") {
  const std::string text = dlq::metrics::prometheus_text(
      {stats_of("orders", 1), stats_of("orders", 2), stats_of("a\xff", 1), stats_of("a\xff", 1)});
  CHECK(count_of(text, "dlq_entries{queue=\"orders\",list=\"dead\"}") == 1);
  CHECK(has_line(text, "dlq_entries{queue=\"orders\",list=\"dead\"} 1"));
  CHECK(count_of(text, "queue=\"a\\\\xff\",list=\"dead\"") == 1);
}

TEST_CASE("queue names never share a label: every queue has its series (round 7)", "[metrics]") {
  // The queue "a\xff" (a byte that is not UTF-8) and the queue named by the text `a\xff`
  // were both written queue="a\\xff": the second was left out and counted nowhere.
  const std::string text = dlq::metrics::prometheus_text(
      {stats_of("a\xff", 1), stats_of("a\\xff", 2), stats_of("a\\\\xff", 3)});
  CHECK(count_of(text, "dlq_entries{") == 2 * 3);
  for (const char* depth : {"} 1\n", "} 2\n", "} 3\n"})
    CHECK(count_of(text, std::string(",list=\"dead\"") + depth) == 1);
  // every name of 1 to 4 characters over the escaped ones and their look-alikes has a label
  // of its own (the rule of the library's exposition and of the console's /metrics alike)
  const std::string alphabet = std::string("a\\xf\xff\"\n") + '\xc3';
  std::vector<dlq::QueueStats> all;
  std::vector<std::string> names = {""};
  for (int length = 1; length <= 4; ++length) {
    std::vector<std::string> longer;
    for (const auto& name : names)
      for (const char c : alphabet)
        longer.push_back(name + c);
    for (const auto& name : longer)
      all.push_back(stats_of(name, 1));
    names = std::move(longer);
  }
  const auto labels = dlq::metrics::detail::distinct_queue_labels(
      all, [](const dlq::QueueStats& s) -> std::string_view { return s.queue; });
  CHECK(labels.size() == all.size());
}

TEST_CASE("ages and timestamps are exact, and absent when a time is unknown", "[metrics]") {
  using namespace std::chrono;
  dlq::QueueStats s = stats_of("orders", 2);
  const auto t0 = system_clock::time_point(seconds(1796000000)) + microseconds(120);
  s.dead.oldest = t0;
  s.dead.newest = t0 + seconds(30);
  s.read_at = t0 + seconds(140) + milliseconds(500);
  dlq::QueueStats untimed = stats_of("foreign", 1);
  untimed.dead.oldest_untimed = untimed.dead.newest_untimed = true;
  untimed.read_at = s.read_at;
  const dlq::QueueStats empty = stats_of("empty", 0);

  const std::string text = dlq::metrics::prometheus_text({s, untimed, empty});
  CHECK(has_line(text, "dlq_oldest_entry_age_seconds{queue=\"orders\"} 140.5"));
  CHECK(has_line(text, "dlq_oldest_entry_timestamp_seconds{queue=\"orders\"} 1796000000.00012"));
  CHECK(has_line(text, "dlq_newest_entry_timestamp_seconds{queue=\"orders\"} 1796000030.00012"));
  CHECK(has_line(text, "dlq_oldest_entry_untimed{queue=\"orders\"} 0"));
  CHECK(has_line(text, "dlq_oldest_entry_untimed{queue=\"foreign\"} 1"));
  CHECK(has_line(text, "dlq_entries{queue=\"empty\",list=\"dead\"} 0"));
  // Never guessed: no age or timestamp for an untimed or empty list.
  CHECK(text.find("dlq_oldest_entry_age_seconds{queue=\"foreign\"}") == std::string::npos);
  CHECK(text.find("timestamp_seconds{queue=\"foreign\"}") == std::string::npos);
  CHECK(text.find("age_seconds{queue=\"empty\"}") == std::string::npos);
  CHECK(text.find("untimed{queue=\"empty\"}") == std::string::npos);
  // Counters only when given.
  CHECK(text.find("dlq_sent_total") == std::string::npos);
  // Every family has its HELP and TYPE once.
  CHECK(count_of(text, "# TYPE dlq_entries gauge\n") == 1);
  CHECK(count_of(text, "# HELP dlq_oldest_entry_age_seconds ") == 1);
}

TEST_CASE("counters say they are per process, by reason and by kind", "[metrics]") {
  dlq::Counters c;
  c.sent = 10;
  c.replayed = 4;
  c.evicted = 3;
  c.evicted_for_length = 2;
  c.evicted_for_age = 1;
  c.parked = 1;
  c.timeout_errors = 5;
  c.other_storage_errors = 6;
  c.audit_errors = 7;
  c.audit_dropped = 8;
  const std::string text = dlq::metrics::prometheus_text({}, c);
  CHECK(text.find("dlq_entries") == std::string::npos);  // no queues: no empty family
  CHECK(has_line(text, "# TYPE dlq_sent_total counter"));
  CHECK(has_line(text, "dlq_sent_total 10"));
  CHECK(has_line(text, "dlq_replayed_total 4"));
  CHECK(has_line(text, "dlq_evicted_total{reason=\"max_length\"} 2"));
  CHECK(has_line(text, "dlq_evicted_total{reason=\"max_age\"} 1"));
  CHECK(has_line(text, "dlq_parked_total 1"));
  CHECK(has_line(text, "dlq_storage_errors_total{kind=\"timeout\"} 5"));
  CHECK(has_line(text, "dlq_storage_errors_total{kind=\"other\"} 6"));
  CHECK(has_line(text, "dlq_audit_errors_total 7"));
  CHECK(has_line(text, "dlq_audit_dropped_total 8"));
  CHECK(count_of(text, "Per process") == count_of(text, "# TYPE "));
  CHECK(count_of(text, "sum without(instance)") == count_of(text, "# TYPE "));

  dlq::metrics::PrometheusOptions gauges_only;
  gauges_only.counters = false;
  CHECK(dlq::metrics::prometheus_text({}, c, gauges_only).empty());
}

TEST_CASE("constant labels go on every series; bad names are refused", "[metrics]") {
  dlq::metrics::PrometheusOptions o;
  o.labels = {{"service", "bill\"ing"}};
  const std::string text = dlq::metrics::prometheus_text({stats_of("q", 1)}, dlq::Counters{}, o);
  CHECK(has_line(text, "dlq_entries{queue=\"q\",list=\"dead\",service=\"bill\\\"ing\"} 1"));
  CHECK(has_line(text, "dlq_sent_total{service=\"bill\\\"ing\"} 0"));
  for (const char* bad : {"", "9lives", "__name__", "queue", "has-dash"}) {
    o.labels = {{bad, "x"}};
    CHECK_THROWS_AS(dlq::metrics::prometheus_text({}, o), dlq::invalid_argument);
  }
}

TEST_CASE("scrape reads the queue's stats and counters", "[metrics]") {
  using namespace std::chrono_literals;
  dlq::Options options;
  auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1796000000));
  options.clock = [&now] { return now; };
  dlq::DeadLetterQueue<dlq::MemoryStorage> q(dlq::MemoryStorage{}, options);
  q.send_to_dlq("orders", "{}", "e");
  q.send_to_dlq("orders", "{}", "e");
  now += 90s;
  const std::string text = dlq::metrics::scrape(q);
  CHECK(has_line(text, "dlq_entries{queue=\"orders\",list=\"dead\"} 2"));
  CHECK(has_line(text, "dlq_oldest_entry_age_seconds{queue=\"orders\"} 90"));
  CHECK(has_line(text, "dlq_sent_total 2"));
  // A fixed list keeps an empty queue's series.
  q.replay_all("orders");
  const std::string fixed = dlq::metrics::scrape(q, std::vector<std::string>{"orders"});
  CHECK(has_line(fixed, "dlq_entries{queue=\"orders\",list=\"dead\"} 0"));
  CHECK(has_line(fixed, "dlq_replayed_total 2"));
}

TEST_CASE("scrape skips a queue name the library refuses and counts it", "[metrics]") {
  // A foreign key in a shared store may name a queue dlq cannot serve (a NUL byte); the
  // others must still be reported, and the skipped name counted.
  dlq::MemoryStorage storage;
  dlq::DeadLetterQueue<dlq::MemoryStorage&> q(storage);
  q.send_to_dlq("orders", "{}", "e");
  storage.push(dlq::Record{std::string_view("nul\0byte", 8), {}, {}, "x"});
  std::string text;
  REQUIRE_NOTHROW(text = dlq::metrics::scrape(q));
  CHECK(has_line(text, "dlq_entries{queue=\"orders\",list=\"dead\"} 1"));
  CHECK(has_line(text, "dlq_skipped_queues 1"));
  CHECK(text.find("nul") == std::string::npos);
  CHECK(q.queues() == std::vector<std::string>{"orders"});
  REQUIRE_NOTHROW(q.stats());
  CHECK(q.stats().size() == 1);
}

TEST_CASE("cap_queue_names: the first queues by count and bytes, the rest counted",
          "[metrics]") {
  // The one decision behind the console's /api/queues (`omitted_queues`) and /metrics
  // (dlq_queues_omitted): at most max_queues names, in the listing's order, within
  // max_name_bytes of names; the rest dropped and counted (round 10 of issue 27).
  const auto names = [](std::size_t n, std::size_t len) {
    std::vector<std::string> v;
    for (std::size_t i = 0; i < n; ++i)
      v.push_back(std::to_string(1000 + i) + std::string(len - 4, 'x'));
    return dlq::split_queue_names(v);
  };
  dlq::QueueNames by_count = names(1500, 10);
  dlq::cap_queue_names(by_count, {});
  CHECK(by_count.names.size() == dlq::default_max_listed_queues);
  CHECK(by_count.omitted == 500);
  CHECK(by_count.names.back() == "1999" + std::string(6, 'x'));
  // 1024-byte names: 1000 of them are 1,024,000 bytes, within 1 MiB
  dlq::QueueNames longest = names(1200, 1024);
  dlq::cap_queue_names(longest, {});
  CHECK(longest.names.size() == 1000);
  CHECK(longest.omitted == 200);
  // the bound by bytes: a name that would pass it is not added, nor any after it
  dlq::QueueNames by_bytes = names(10, 100);
  dlq::cap_queue_names(by_bytes, {100, 350});
  CHECK(by_bytes.names.size() == 3);
  CHECK(by_bytes.omitted == 7);
  dlq::QueueNames exact = names(10, 100);
  dlq::cap_queue_names(exact, {4, 400});
  CHECK(exact.names.size() == 4);
  CHECK(exact.omitted == 6);
  dlq::QueueNames few = names(3, 10);
  dlq::cap_queue_names(few, {});
  CHECK(few.names.size() == 3);
  CHECK(few.omitted == 0);
  // the gauge an alert reads
  std::string out;
  dlq::metrics::write_omitted_queues(out, 7);
  CHECK(out.find("# TYPE dlq_queues_omitted gauge\n") != std::string::npos);
  CHECK(out.find("\ndlq_queues_omitted 7\n") != std::string::npos);
}

TEST_CASE("split_queue_names: one rule for validation and listings", "[metrics]") {
  const auto found = dlq::split_queue_names(
      {"orders", std::string("nul\0byte", 8), "", "bad\xff", "orders", std::string(1, '\0')});
  CHECK(found.names == std::vector<std::string>{"bad\xff", "orders"});
  CHECK(found.skipped ==
        std::vector<std::string>{"", std::string(1, '\0'), std::string("nul\0byte", 8)});
  CHECK(dlq::queue_name_problem("orders") == nullptr);
  CHECK(dlq::queue_name_problem("bad\xff") == nullptr);  // served, escaped by each output
  CHECK(std::string(dlq::queue_name_problem(std::string("a\0b", 3))) ==
        "the queue name contains a NUL byte");
  // the validation of every call refuses exactly these names, with the same words
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  CHECK_THROWS_WITH(q.size(std::string("a\0b", 3)), Catch::Contains("contains a NUL byte"));
  CHECK_THROWS_AS(q.size(""), dlq::invalid_argument);
  CHECK_NOTHROW(q.size("bad\xff"));
}

TEST_CASE("listed_stats: a queue a key of another type makes unreadable is skipped", "[metrics]") {
  // `read` as a store answers: one call for all fails when one queue's list has another
  // type (WRONGTYPE); each queue alone reads, but that one.
  std::vector<std::vector<std::string>> calls;
  auto read = [&](const std::vector<std::string>& names) {
    calls.push_back(names);
    std::vector<std::string> out;
    for (const auto& n : names) {
      if (n == "hashed")
        throw dlq::reply_error("LLEN dlq:{hashed}:corrupt: WRONGTYPE", "WRONGTYPE");
      out.push_back("stats of " + n);
    }
    return out;
  };
  dlq::QueueNames found{{"a", "hashed", "z"}, {std::string("nul\0", 4)}};
  CHECK(dlq::listed_stats(found, read) == std::vector<std::string>{"stats of a", "stats of z"});
  CHECK(found.names == std::vector<std::string>{"a", "z"});
  CHECK(found.skipped == std::vector<std::string>{"hashed", std::string("nul\0", 4)});
  CHECK(calls.size() == 4);  // all at once, then one by one
  // Nothing refused: one call. Another refusal (NOAUTH, OOM) is the caller's error.
  calls.clear();
  dlq::QueueNames fine{{"a", "z"}, {}};
  CHECK(dlq::listed_stats(fine, read).size() == 2);
  CHECK(calls.size() == 1);
  dlq::QueueNames denied{{"a"}, {}};
  auto refuse = [](const std::vector<std::string>&) -> std::vector<std::string> {
    throw dlq::reply_error("NOAUTH Authentication required", "NOAUTH");
  };
  CHECK_THROWS_AS(dlq::listed_stats(denied, refuse), dlq::reply_error);
}
