#!/usr/bin/env bash
# Runs scripts/demo.sh (first argument, the rest its arguments), shows its output, and fails
# unless the story ended well and reads as a story: every line is blank, the title, a step
# heading ("== "), a command ("$ ") or indented under them — no stray unindented line (a
# message on stderr that escaped) and no line that is only a number (a count on stdout meant
# for scripts) except as the output of a shown `dlqctl count`.
set -uo pipefail
demo=${1:?usage: demo_check.sh DEMO_SCRIPT ARGS...}
shift
out=$(bash "$demo" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" = 0 ] || { echo "demo_check.sh: FAIL: the demo exited $rc" >&2; exit 1; }
bad=$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' | awk '
  /^ *\$ / { cmd = $0; next }
  /^== / { cmd = ""; next }
  /^$/ || /^dlq demo/ || /^Every order was processed/ { next }
  /^   / { if ($0 ~ /^ +[0-9]+ *$/ && cmd !~ /^ *\$ dlqctl count /) print "a bare number: " $0; next }
  { print "not indented: " $0 }')
if [ -n "$bad" ]; then
  printf 'demo_check.sh: FAIL: lines out of the story:\n%s\n' "$bad" >&2
  exit 1
fi
