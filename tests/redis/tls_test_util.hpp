// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The TLS tests' fixture file: DIR/env of tests/support/redis_tls_server.sh (fixture
// `redis_tls`) or redis_tls_cluster.sh (fixture `redis_tls_cluster`), KEY=VALUE lines.
#pragma once

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>

namespace dlq::test {

/// The KEY=VALUE lines of the file named by the environment variable `variable`, written by
/// the ctest fixture whose setup test is `start_test`. Throws — failing the test — when the
/// variable is not set (the test was not run through ctest) or a key of `required` is
/// missing (the fixture failed): the TLS tests never skip.
inline std::map<std::string, std::string> read_fixture_env(
    const char* variable, const char* start_test, std::initializer_list<const char*> required) {
  const char* file = std::getenv(variable);
  if (file == nullptr || *file == '\0') {
    throw std::runtime_error(std::string(variable) +
                             " is not set: run this test through ctest (its fixture's " +
                             start_test + " starts the servers)");
  }
  std::ifstream in(file);
  std::map<std::string, std::string> m;
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  for (const char* key : required) {
    if (m.count(key) == 0) {
      throw std::runtime_error(std::string("incomplete ") + file + ": did " + start_test +
                               " fail?");
    }
  }
  return m;
}

}  // namespace dlq::test
