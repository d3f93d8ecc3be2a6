#!/usr/bin/env bash
# Wait for a lock across separate runs (cron jobs, serverless functions):
# take a ticket that holds your place in the queue, and poll it later.
#
#   ticket.sh open namespace/name [wait_ms]   # prints the grant, or the ticket
#   ticket.sh poll LOCATION                   # TICKET_TOKEN=...; prints the grant
#   ticket.sh close LOCATION                  # TICKET_TOKEN=...; leaves the queue
#
# open prints JSON: a grant ("token") when the lock was free, else a ticket
# ("location" and "ticket_token"; poll it within poll_within_ms, or it is
# dropped). poll long-polls up to WAIT_S seconds (default 20, at most 30).
# Exit codes: 0 done (open: a grant or a ticket; poll: the grant, whose
# "token" is the ticket token), 1 the ticket is gone (its wait ran out, it
# was not polled in time, or the token is wrong), 2 any other error, 3 poll:
# still waiting (stdout has the rank). Needs curl and jq; LOCKGATE_URL and
# LOCKGATE_TOKEN (a JWT) configure it. Secrets reach curl through file
# descriptors, never its command line or a URL.
set -euo pipefail
[ -n "${LOCKGATE_URL:-}" ] || { echo "set LOCKGATE_URL, e.g. http://127.0.0.1:8080" >&2; exit 2; }
[ -n "${LOCKGATE_TOKEN:-}" ] || { echo "set LOCKGATE_TOKEN to a JWT" >&2; exit 2; }
usage() { echo "usage: ticket.sh open namespace/name [wait_ms] | poll LOCATION | close LOCATION" >&2; exit 2; }
[ $# -ge 2 ] || usage
auth() { printf 'Authorization: Bearer %s\n' "$LOCKGATE_TOKEN"; }
ticket() {
  [ -n "${TICKET_TOKEN:-}" ] || { echo "set TICKET_TOKEN to the ticket_token of open" >&2; exit 2; }
  auth
  printf 'Ticket-Token: %s\n' "$TICKET_TOKEN"
}

case $1 in
  open)
    headers=$(mktemp)
    trap 'rm -f "$headers"' EXIT
    resp=$(curl -sS -X POST "$LOCKGATE_URL/locks/$2" -H @<(auth) -H 'Prefer: respond-async' \
      -d "{\"ttl_ms\": ${TTL_MS:-30000}, \"wait_ms\": ${3:-60000}}" -D "$headers" -w '%{http_code}') || exit 2
    status=${resp: -3}
    body=${resp%???}
    location=$(tr -d '\r' <"$headers" | sed -n 's/^[Ll]ocation: *//p')
    case $status in
      201) jq -c . <<<"$body" ;;
      202) jq -c --arg location "$location" '. + {location: $location}' <<<"$body" ;;
      *) echo "open a ticket for $2: HTTP $status: $(jq -r '.detail // empty' <<<"$body" 2>/dev/null)" >&2; exit 2 ;;
    esac
    ;;
  poll)
    resp=$(curl -sS "$LOCKGATE_URL$2" -H @<(ticket) -H "Prefer: wait=${WAIT_S:-20}" -w '%{http_code}') || exit 2
    status=${resp: -3}
    body=${resp%???}
    case $status in
      201) jq -c . <<<"$body" ;;
      200) jq -c '{rank, poll_within_ms}' <<<"$body"; exit 3 ;;
      404) echo "the ticket is gone: $(jq -r .detail <<<"$body")" >&2; exit 1 ;;
      *) echo "poll $2: HTTP $status: $(jq -r '.detail // empty' <<<"$body" 2>/dev/null)" >&2; exit 2 ;;
    esac
    ;;
  close)
    status=$(curl -sS -o /dev/null -X DELETE "$LOCKGATE_URL$2" -H @<(ticket) -w '%{http_code}') || exit 2
    case $status in
      204) ;;
      404) echo "the ticket is gone" >&2; exit 1 ;;
      *) echo "close $2: HTTP $status" >&2; exit 2 ;;
    esac
    ;;
  *) usage ;;
esac
