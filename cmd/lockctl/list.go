package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// listedLock is one item of GET /locks/{namespace}.
type listedLock struct {
	lockInfo
	Name string `json:"name"`
}

// lockPage is the 200 answer of a listing.
type lockPage struct {
	Locks      []listedLock `json:"locks"`
	NextCursor string       `json:"next_cursor"`
}

// list returns one page of the held locks of namespace ns.
func (c *client) list(ctx context.Context, ns, cursor string, limit int) (lockPage, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var page lockPage
	err := c.do(ctx, "GET", "/locks/"+url.PathEscape(ns)+"?"+q.Encode(), nil, "", c.timeout, 200, &page)
	return page, err
}

// cmdList prints the held locks of a namespace, following every page; a
// lock the gateway lists twice (Redis SCAN may) is printed once.
func cmdList(ctx context.Context, c cli, args []string) error {
	fs := c.newFlagSet("list", "list namespace [--json] [--page-size 1000]")
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print each lock as a JSON object on a line of its own")
	pageSize := fs.Int("page-size", 1000, "locks asked for per call, 1 to 1000")
	pos, rest, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if pos = append(pos, rest...); len(pos) != 1 {
		return usagef("list takes one namespace; got %d arguments", len(pos))
	}
	ns := pos[0]
	if *pageSize < 1 || *pageSize > 1000 {
		return usagef("--page-size must be between 1 and 1000")
	}
	if !namespaceRE.MatchString(ns) {
		return usagef("namespace %q must match %s", ns, namespaceRE)
	}
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	seen := make(map[string]bool)
	enc := json.NewEncoder(c.stdout)
	cursor := ""
	for {
		page, err := cl.list(ctx, ns, cursor, *pageSize)
		if err != nil {
			return fmt.Errorf("list %s: %w", ns, err)
		}
		for _, l := range page.Locks {
			if seen[l.Name] {
				continue
			}
			seen[l.Name] = true
			if *asJSON {
				err = enc.Encode(l)
			} else {
				_, err = fmt.Fprintf(c.stdout, "%s held by %s (owner %q), fencing token %d, lease ends in %s, %d waiting\n",
					printable(l.Lock), printable(l.Subject), l.Owner, l.FencingToken, // %q escapes the owner
					(time.Duration(l.TTLMs) * time.Millisecond).String(), l.Waiters)
			}
			if err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			if len(seen) == 0 && !*asJSON {
				_, err = fmt.Fprintf(c.stdout, "no lock of namespace %s is held\n", ns)
			}
			return err
		}
		cursor = page.NextCursor
	}
}
