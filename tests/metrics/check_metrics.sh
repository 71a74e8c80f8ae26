#!/usr/bin/env bash
# Usage: check_metrics.sh SAMPLE_PROGRAM PROMTOOL
# Runs the sample program (the exposition of a queue with hostile names) and lints its output
# with `promtool check metrics`; fails on any complaint, and when the output lacks a series
# the test is about.
set -euo pipefail
sample=$1
promtool=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$sample" >"$out"
for series in 'dlq_entries{queue="we\"ird",list="dead"' 'queue="back\\\\slash"' \
              'queue="new\nline"' 'queue="bad\\xff"' dlq_oldest_entry_age_seconds \
              'dlq_evicted_total{reason="max_length"' dlq_parked_total \
              'dlq_storage_errors_total{kind="timeout"' 'dlq_oldest_entry_untimed{queue="foreign"' \
              'dlq_skipped_queues{service="sample \"svc\""} 1'; do
  grep -qF -- "$series" "$out" || { echo "missing in the exposition: $series"; cat "$out"; exit 1; }
done
# promtool prints lint problems and exits non-zero for them, and for parse errors.
if ! report=$("$promtool" check metrics <"$out" 2>&1); then
  echo "promtool check metrics failed:"; echo "$report"; echo "--- exposition:"; cat "$out"; exit 1
fi
if [ -n "$report" ]; then
  echo "promtool check metrics complained:"; echo "$report"; exit 1
fi
echo "promtool check metrics: OK ($(grep -vc '^#' "$out") samples)"
