#!/usr/bin/env bash
# Run a command while holding a lock.
#
#   run-with-lock.sh namespace/name command [args...]
#
# Acquires the lock (waiting up to WAIT_MS, default 30000), runs the command
# with LOCKGATE_LOCK and LOCKGATE_FENCING_TOKEN in its environment, renews
# the lease in the background every renew_after_ms of the grant (a third of
# TTL_MS, default 30000), and releases the lock when the command ends,
# however this script exits. If a renewal says the lock is no longer ours,
# the command gets SIGTERM. MODE=shared takes a shared (read) hold:
# commands run with MODE=shared run side by side, a command run without it
# runs alone (many readers, one migrator); a shared request queues behind a
# waiting exclusive one. Exits
# with the command's code; 1 when the lock stayed held; 2 on other errors.
# Needs curl and jq; LOCKGATE_URL and LOCKGATE_TOKEN (a JWT) configure it.
# For production, prefer lockctl run: it also kills a command that ignores
# SIGTERM and notices a lease that renewals failed to keep.
set -euo pipefail
[ -n "${LOCKGATE_URL:-}" ] || { echo "set LOCKGATE_URL, e.g. http://127.0.0.1:8080" >&2; exit 2; }
[ -n "${LOCKGATE_TOKEN:-}" ] || { echo "set LOCKGATE_TOKEN to a JWT" >&2; exit 2; }
[ $# -ge 2 ] || { echo "usage: run-with-lock.sh namespace/name command [args...]" >&2; exit 2; }
lock=$1
shift
ttl_ms=${TTL_MS:-30000}
wait_ms=${WAIT_MS:-30000}
mode=${MODE:-exclusive}
case $mode in exclusive | shared) ;; *) echo "MODE must be exclusive or shared" >&2; exit 2 ;; esac

# api METHOD PATH [curl args...] prints the body, then the three digits of
# the HTTP status. Secrets reach curl through file descriptors, never its
# command line.
api() {
  local method=$1 path=$2
  shift 2
  curl -sS -X "$method" "$LOCKGATE_URL/locks/$path" \
    -H @<(printf 'Authorization: Bearer %s\n' "$LOCKGATE_TOKEN") -w '%{http_code}' "$@"
}

resp=$(api POST "$lock" -d "{\"ttl_ms\": $ttl_ms, \"wait_ms\": $wait_ms, \"mode\": \"$mode\"}") || exit 2
status=${resp: -3}
body=${resp%???}
case $status in
  201) ;;
  409) echo "$lock is still held by someone else after ${wait_ms} ms" >&2; exit 1 ;;
  *) echo "acquire $lock: HTTP $status: $(jq -r '.detail // empty' <<<"$body" 2>/dev/null)" >&2; exit 2 ;;
esac
# renew_after_ms: when to renew, a third of the lease (computed here from a
# gateway that does not send it).
read -r token fencing_token renew_ms < <(jq -r '"\(.token) \(.fencing_token) \(.renew_after_ms // (.ttl_ms / 3 | floor))"' <<<"$body")

job=
renewer=
release() {
  if [ -n "$renewer" ]; then kill "$renewer" 2>/dev/null || true; fi
  api DELETE "$lock" -H @<(printf 'Lock-Token: %s\n' "$token") --max-time 10 >/dev/null || true
}
trap release EXIT
# Pass Ctrl-C and SIGTERM on to the command; the EXIT trap releases after it.
trap 'if [ -n "$job" ]; then kill -TERM "$job" 2>/dev/null || true; fi' INT TERM

# <&0: a background command would otherwise read /dev/null.
LOCKGATE_LOCK=$lock LOCKGATE_FENCING_TOKEN=$fencing_token "$@" <&0 &
job=$!

interval=$(printf '%d.%03d' $((renew_ms / 1000)) $((renew_ms % 1000)))
(
  trap - INT EXIT
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  sleep "$interval" &
  nap=$!
  while wait "$nap"; do
    # The next nap starts now, so a slow renewal does not stretch the period.
    sleep "$interval" &
    nap=$!
    # A renewal that hangs is given up when the next one is due.
    resp=$(api PUT "$lock/lease" -H @<(printf 'Lock-Token: %s\n' "$token") --max-time "$interval") || continue
    case ${resp: -3} in
      200) ;;
      409) echo "lease on $lock lost: stopping the command" >&2; kill -TERM "$job" 2>/dev/null; exit 0 ;;
      *) echo "renew $lock: HTTP ${resp: -3}; retrying" >&2 ;;
    esac
  done
) &
renewer=$!

# wait returns early when a trapped signal arrives: wait again until the
# command has really ended.
code=0
while :; do
  wait "$job" && code=0 || code=$?
  kill -0 "$job" 2>/dev/null || break
done
exit "$code"
