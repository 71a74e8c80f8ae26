// Round 10 of issue 27 (not registered with ctest): random passwords in URLs, alone and in
// messages, through dlq::redact_url / redact_secrets; prints the first leaks of each kind.
// Passwords are upper-case letters and punctuation; every other text is lower case, so a
// run of 3 upper-case letters in the output is a piece of a secret.
//   g++ -std=c++17 -O2 -I include repro/redact_fuzz.cpp -o /tmp/rf && /tmp/rf 200000
#include <dlq/redact.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

static bool leaks(const std::string& out) {
  int run = 0;
  for (char c : out) {
    run = (c >= 'A' && c <= 'Z') ? run + 1 : 0;
    if (run >= 3) return true;
  }
  return false;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000;
  std::mt19937 rng(7);
  const std::string punct = argc > 2 ? argv[2] : "!$%^*()-_+=[]{};:,.<>~|'\"`\t\v\f\\ ";
  auto pick = [&](const std::string& s) { return s[rng() % s.size()]; };
  auto password = [&] {
    std::string p;
    const int len = 6 + rng() % 12;
    for (int i = 0; i < len; ++i)
      p += (rng() % 3 == 0) ? pick(punct) : char('A' + rng() % 26);
    return p;
  };
  const char* forms[] = {"redis://:%s@host.example:6379/0", "redis://user:%s@host.example:6379/0",
                         "rediss://user:%s@host.example/0?ca_file=/x",
                         "redis://host.example:6379/0?password=%s",
                         "redis+sentinel://:%s@h1:26379,h2:26379/mymaster",
                         "redis+sentinel://h1:26379/m?sentinel_password=%s&db=1"};
  const char* wraps[] = {"%s", "error at %s: refused", "(store %s)", "'%s'", "\"%s\"",
                         "url=%s, retrying", "<%s>", "[%s]", "store %s\nnext line"};
  std::map<std::string, long> count;
  std::map<std::string, std::string> first;
  for (long i = 0; i < n; ++i) {
    const std::string pw = password();
    const int f = rng() % 6;
    char url[512];
    std::snprintf(url, sizeof url, forms[f], pw.c_str());
    std::string kinds[2];
    std::string out = dlq::redact_url(url);
    if (leaks(out)) kinds[0] = "url/form" + std::to_string(f);
    const int w = rng() % 9;
    char msg[1024];
    std::snprintf(msg, sizeof msg, wraps[w], url);
    std::string out2 = dlq::redact_secrets(msg);
    if (leaks(out2)) kinds[1] = "text/form" + std::to_string(f) + "/wrap" + std::to_string(w);
    for (int k = 0; k < 2; ++k)
      if (!kinds[k].empty() && count[kinds[k]]++ == 0)
        first[kinds[k]] = std::string(k ? msg : url) + "  ->  " + (k ? out2 : out);
  }
  for (auto& [k, c] : count) std::printf("%-22s %7ld  e.g. %s\n", k.c_str(), c, first[k].c_str());
  std::printf("%ld inputs, %zu leaking kinds\n", n, count.size());
}
