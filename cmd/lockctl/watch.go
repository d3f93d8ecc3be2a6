package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// lockEvent is one event of a lock's event stream (and history).
type lockEvent struct {
	Event        string    `json:"event"`
	Index        int64     `json:"index,omitempty"`
	At           time.Time `json:"at"`
	Subject      string    `json:"subject"`
	Owner        string    `json:"owner"`
	FencingToken int64     `json:"fencing_token"`
	By           string    `json:"by,omitempty"`
	Value        string    `json:"value,omitempty"`
}

// cmdWatch prints the events of a lock as they happen, from the gateway's
// event stream; a stream that ends (the gateway restarts, the network
// fails) is opened again from the last event printed, so none is lost
// while the gateway keeps it (--history).
func cmdWatch(ctx context.Context, c cli, args []string) error {
	fs := c.newFlagSet("watch", "watch namespace/name [--json] [--count N]")
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print each event as a JSON object on a line of its own")
	count := fs.Int("count", 0, "exit after this many events (0: watch until interrupted)")
	l, err := oneLock(fs, args)
	if err != nil {
		return err
	}
	if *count < 0 {
		return usagef("--count must be 0 or more")
	}
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	last, seen, failures := "", 0, 0
	for {
		err := cl.stream(ctx, l, last, func(kind, id, data string) error {
			if kind == "end" { // the token expired, or the gateway's longest lifetime: reopen
				return nil
			}
			last = id
			if kind == "state" { // the start, or events lost: the state now
				return nil
			}
			var e lockEvent
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				return &apiError{Status: http.StatusOK, Detail: "an event of the stream is not the JSON lockctl expects"}
			}
			if *asJSON {
				if err := json.NewEncoder(c.stdout).Encode(e); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(c.stdout, "%d %s %s (owner %q) fencing token %d%s\n", e.Index, e.Event,
					printable(e.Subject), e.Owner, e.FencingToken, describeBy(e))
			}
			if seen++; *count > 0 && seen >= *count {
				return errEnough
			}
			failures = 0
			return nil
		})
		switch {
		case errors.Is(err, errEnough) || ctx.Err() != nil:
			return nil
		case err != nil && !isUnreachable(err):
			return fmt.Errorf("watch %s: %w", l, err)
		}
		if failures++; failures > 5 {
			return fmt.Errorf("watch %s: %w", l, err)
		}
		select { // the stream ended: open it again, from the last event
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(failures) * 200 * time.Millisecond):
		}
	}
}

var errEnough = errors.New("enough events")

func isUnreachable(err error) bool {
	var u *unreachableError
	return errors.As(err, &u)
}

// describeBy is the tail of an event's line: who broke the grant, its value.
func describeBy(e lockEvent) string {
	s := ""
	if e.By != "" {
		s += " by " + printable(e.By)
	}
	if e.Value != "" {
		s += fmt.Sprintf(" value %q", e.Value)
	}
	return s
}

// stream reads the lock's event stream, from after the event id lastID
// ("" for now), and calls each with every event, until the stream ends
// (nil) or each fails.
func (c *client) stream(ctx context.Context, l lockName, lastID string, each func(kind, id, data string) error) error {
	if c.jwt == "" {
		return errNoJWT
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.JoinPath(l.path()).String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.jwt)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &unreachableError{url: c.base.Redacted(), err: transportCause(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return decodeProblem(resp, data)
	}
	sc := bufio.NewScanner(resp.Body)
	var kind, id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if kind != "" {
				if err := each(kind, id, data); err != nil {
					return err
				}
			}
			kind, data = "", ""
		case strings.HasPrefix(line, "event: "):
			kind = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			if _, err := strconv.ParseInt(line[len("id: "):], 10, 64); err == nil {
				id = line[len("id: "):]
			}
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
	return &unreachableError{url: c.base.Redacted(), err: io.EOF}
}
