package app

import (
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/locks/redisbackend"
)

// newRedisBackend connects the Redis backend, with opts, to rawURL: one
// Redis; with cluster the seed nodes of a Redis Cluster; with sentinel (a
// master name) or a redis+sentinel:// URL the Redis Sentinels that follow
// a master.
func newRedisBackend(rawURL string, cluster bool, sentinel string, opts redisbackend.Options) (*redisbackend.Backend, func() error, error) {
	var client redis.UniversalClient
	switch {
	case sentinel != "" || isSentinelURL(rawURL):
		fo, err := parseSentinelURL(rawURL, sentinel)
		if err != nil {
			return nil, nil, err
		}
		// See below. Every new connection asks a sentinel for the master
		// first: DialTimeout bounds that too when no call's deadline does
		// (the subscription reconnecting).
		fo.MaxRetries, fo.ContextTimeoutEnabled, fo.Protocol, fo.DialTimeout = -1, true, 2, opts.Timeout
		client = redis.NewFailoverClient(fo)
	case cluster:
		opts, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			// Not err: it may quote the URL, password included.
			return nil, nil, errors.New("invalid --redis-url for --redis-cluster: want redis://[[user]:password@]host:port[?addr=host2:port&addr=...], or rediss:// for TLS")
		}
		// See below.
		// MaxRedirects too: a ClusterClient re-sends a pipeline whose
		// connection broke (io.EOF, a reset, a read timeout) up to
		// MaxRedirects times, which would run a script again. An ASK or
		// TRYAGAIN during a slot migration then fails the call (503)
		// instead of following it; a MOVED, which Redis answers before it
		// runs anything, the backend follows once itself.
		opts.MaxRetries, opts.MaxRedirects, opts.ContextTimeoutEnabled, opts.Protocol = -1, -1, true, 2
		client = redis.NewClusterClient(opts)
	default:
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, nil, errors.New("invalid --redis-url: want redis://[[user]:password@]host[:port][/db], or rediss:// for TLS")
		}
		// A script that timed out may have run: the client must never re-run
		// it unseen (-1 disables retries; 0 would mean the default of 3).
		// ContextTimeoutEnabled lets the engine's per-call deadline bound
		// the network wait too.
		//
		// RESP2: the engine uses no RESP3 push messages (its wake-ups are
		// pub/sub messages, which go-redis reads on RESP2 connections as
		// well), and on RESP3 go-redis checks every reply for pending push
		// notifications, about 4 % of the gateway's CPU.
		opts.MaxRetries, opts.ContextTimeoutEnabled, opts.Protocol = -1, true, 2
		client = redis.NewClient(opts)
	}
	b, err := redisbackend.New(client, opts)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return b, func() error { return errors.Join(b.Close(), client.Close()) }, nil
}
