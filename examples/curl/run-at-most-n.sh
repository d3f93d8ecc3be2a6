#!/usr/bin/env bash
# Run a command when fewer than N others of its kind are running: at most N
# jobs at once, across machines.
#
#   run-at-most-n.sh namespace/name N command [args...]
#
# Takes one of the N permits of the semaphore namespace/name (waiting up to
# WAIT_MS, default 30000), runs the command with LOCKGATE_SEMAPHORE and
# LOCKGATE_FENCING_TOKEN in its environment, renews the permit's lease in
# the background every renew_after_ms of the grant (a third of TTL_MS,
# default 30000), and gives the permit
# back when the command ends, however this script exits. If a renewal says
# the permit is no longer ours, the command gets SIGTERM. Every caller of one
# semaphore must pass the same N. Exits with the command's code; 1 when no
# permit freed up in time; 2 on other errors (a different N: limit_mismatch).
# Needs curl and jq; LOCKGATE_URL and LOCKGATE_TOKEN (a JWT) configure it.
# For production, prefer lockctl run --limit N.
set -euo pipefail
[ -n "${LOCKGATE_URL:-}" ] || { echo "set LOCKGATE_URL, e.g. http://127.0.0.1:8080" >&2; exit 2; }
[ -n "${LOCKGATE_TOKEN:-}" ] || { echo "set LOCKGATE_TOKEN to a JWT" >&2; exit 2; }
[ $# -ge 3 ] || { echo "usage: run-at-most-n.sh namespace/name N command [args...]" >&2; exit 2; }
sem=$1 limit=$2
shift 2
ttl_ms=${TTL_MS:-30000}
wait_ms=${WAIT_MS:-30000}

# api METHOD PATH [curl args...] prints the body, then the three digits of
# the HTTP status. Secrets reach curl through file descriptors, never its
# command line.
api() {
  local method=$1 path=$2
  shift 2
  curl -sS -X "$method" "$LOCKGATE_URL/semaphores/$path" \
    -H @<(printf 'Authorization: Bearer %s\n' "$LOCKGATE_TOKEN") -w '%{http_code}' "$@"
}

resp=$(api POST "$sem" -d "{\"limit\": $limit, \"ttl_ms\": $ttl_ms, \"wait_ms\": $wait_ms}") || exit 2
status=${resp: -3}
body=${resp%???}
case $status in
  201) ;;
  409)
    if [ "$(jq -r .code <<<"$body")" = semaphore_full ]; then
      echo "all $limit permits of $sem are still taken after ${wait_ms} ms" >&2
      exit 1
    fi
    echo "$sem: $(jq -r .detail <<<"$body")" >&2
    exit 2 ;;
  *) echo "acquire $sem: HTTP $status: $(jq -r '.detail // empty' <<<"$body" 2>/dev/null)" >&2; exit 2 ;;
esac
# renew_after_ms: when to renew, a third of the lease (computed here from a
# gateway that does not send it).
read -r token fencing_token renew_ms < <(jq -r '"\(.token) \(.fencing_token) \(.renew_after_ms // (.ttl_ms / 3 | floor))"' <<<"$body")

job=
renewer=
release() {
  if [ -n "$renewer" ]; then kill "$renewer" 2>/dev/null || true; fi
  api DELETE "$sem" -H @<(printf 'Lock-Token: %s\n' "$token") --max-time 10 >/dev/null || true
}
trap release EXIT
# Pass Ctrl-C and SIGTERM on to the command; the EXIT trap releases after it.
trap 'if [ -n "$job" ]; then kill -TERM "$job" 2>/dev/null || true; fi' INT TERM

# <&0: a background command would otherwise read /dev/null.
LOCKGATE_SEMAPHORE=$sem LOCKGATE_FENCING_TOKEN=$fencing_token "$@" <&0 &
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
    resp=$(api PUT "$sem/lease" -H @<(printf 'Lock-Token: %s\n' "$token") --max-time "$interval") || continue
    case ${resp: -3} in
      200) ;;
      409) echo "permit of $sem lost: stopping the command" >&2; kill -TERM "$job" 2>/dev/null; exit 0 ;;
      *) echo "renew $sem: HTTP ${resp: -3}; retrying" >&2 ;;
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
