#!/usr/bin/env bash
# Usage: check_rules.sh PROMTOOL DIR — checks DIR/alerts.yml and runs its unit tests
# (DIR/alerts_test.yml: each alert fires on its series and stays silent otherwise).
set -euo pipefail
promtool=$1
cd "$2"
"$promtool" check rules alerts.yml
"$promtool" test rules alerts_test.yml
