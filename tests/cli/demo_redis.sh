#!/usr/bin/env bash
# Runs scripts/demo.sh (first argument) through demo_check.sh on the test Redis: its URL is
# in the file named by DLQ_TEST_REDIS_URL_FILE (the ctest `redis` fixture). Fails loudly when
# there is none.
set -euo pipefail
demo=${1:?usage: demo_redis.sh DEMO_SCRIPT ARGS...}
shift
file=${DLQ_TEST_REDIS_URL_FILE:-}
if [ -z "$file" ] || [ ! -s "$file" ]; then
  echo "demo_redis.sh: FAIL: no test Redis (DLQ_TEST_REDIS_URL_FILE='$file'); ctest starts it with the redis fixture" >&2
  exit 1
fi
exec bash "$(dirname "$0")/demo_check.sh" "$demo" --store "$(cat "$file")" "$@"
