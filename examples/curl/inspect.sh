#!/usr/bin/env bash
# Say who holds a lock, without its token.
#
#   inspect.sh namespace/name
#
# Exits 0 and prints the holder when the lock is held, 1 when it is free,
# 2 on any other error. Needs curl and jq; LOCKGATE_URL and LOCKGATE_TOKEN
# (a JWT) configure it.
set -euo pipefail
[ -n "${LOCKGATE_URL:-}" ] || { echo "set LOCKGATE_URL, e.g. http://127.0.0.1:8080" >&2; exit 2; }
[ -n "${LOCKGATE_TOKEN:-}" ] || { echo "set LOCKGATE_TOKEN to a JWT" >&2; exit 2; }
[ $# -eq 1 ] || { echo "usage: inspect.sh namespace/name" >&2; exit 2; }
lock=$1

resp=$(curl -sS "$LOCKGATE_URL/locks/$lock" \
  -H @<(printf 'Authorization: Bearer %s\n' "$LOCKGATE_TOKEN") \
  -w '%{http_code}') || exit 2
status=${resp: -3}
body=${resp%???}

case $status in
  200)
    jq -r '"\(.lock) is held by \(.subject) (owner \(.owner | tojson)), fencing token \(.fencing_token), lease ends in \(.ttl_ms) ms at \(.expires_at)"' <<<"$body"
    ;;
  404)
    echo "$lock is free"
    exit 1
    ;;
  *)
    echo "inspect $lock: HTTP $status: $(jq -r '.detail // empty' <<<"$body" 2>/dev/null)" >&2
    exit 2
    ;;
esac
