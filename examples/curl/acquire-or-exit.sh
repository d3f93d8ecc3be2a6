#!/usr/bin/env bash
# Take a lock, or exit at once if someone else holds it.
#
#   acquire-or-exit.sh namespace/name [ttl_ms]
#
# Prints the grant as JSON on stdout (its "token" is the owner token: send it
# back in the Lock-Token header to renew or release). Exits 0 with the lock,
# 1 when it is held (stderr says for how long), 2 on any other error.
# Needs curl and jq; LOCKGATE_URL and LOCKGATE_TOKEN (a JWT) configure it.
set -euo pipefail
[ -n "${LOCKGATE_URL:-}" ] || { echo "set LOCKGATE_URL, e.g. http://127.0.0.1:8080" >&2; exit 2; }
[ -n "${LOCKGATE_TOKEN:-}" ] || { echo "set LOCKGATE_TOKEN to a JWT" >&2; exit 2; }
[ $# -ge 1 ] || { echo "usage: acquire-or-exit.sh namespace/name [ttl_ms]" >&2; exit 2; }
lock=$1
ttl_ms=${2:-30000}

# The JWT goes to curl through a file descriptor, not its command line,
# where ps would show it.
resp=$(curl -sS -X POST "$LOCKGATE_URL/locks/$lock" \
  -H @<(printf 'Authorization: Bearer %s\n' "$LOCKGATE_TOKEN") \
  -d "{\"ttl_ms\": $ttl_ms}" -w '%{http_code}') || exit 2
status=${resp: -3}
body=${resp%???}

case $status in
  201)
    jq -c . <<<"$body"
    ;;
  409)
    echo "$lock is held by someone else; its lease ends in $(jq -r .retry_after_ms <<<"$body") ms unless renewed" >&2
    exit 1
    ;;
  *)
    echo "acquire $lock: HTTP $status: $(jq -r '.detail // empty' <<<"$body" 2>/dev/null)" >&2
    exit 2
    ;;
esac
