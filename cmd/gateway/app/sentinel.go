package app

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/redis/go-redis/v9"
)

// defaultSentinelPort is Redis Sentinel's port, for an address without one.
const defaultSentinelPort = "26379"

// isSentinelURL reports whether rawURL has a redis+sentinel scheme, which
// names the master as well as its sentinels.
func isSentinelURL(rawURL string) bool {
	scheme, _, ok := strings.Cut(rawURL, "://")
	scheme = strings.ToLower(scheme)
	return ok && (scheme == "redis+sentinel" || scheme == "rediss+sentinel")
}

// parseSentinelURL returns the failover client options for one of two
// forms. With master empty (the master's name is in the URL):
//
//	redis+sentinel://[[user]:password@]host:port[,host2:port...]/master[?db=N]
//
// With master (the value of --redis-sentinel), in the style of
// --redis-cluster:
//
//	redis://[[user]:password@]host:port[/db][?addr=host2:port&addr=...]
//
// The hosts are sentinels (port 26379 when left out); user and password
// are those of the master and its replicas. Sentinels that require AUTH
// themselves take sentinel_username and sentinel_password parameters.
// go-redis's ParseFailoverURL reads neither form: it wants master_name in
// the query, and takes the user and password for the sentinels'. TLS is
// refused: a sentinel names the master by IP address, so the certificate
// to expect is not in the URL.
//
// Its errors never quote the URL, which may hold passwords.
func parseSentinelURL(rawURL, master string) (*redis.FailoverOptions, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, errors.New("invalid --redis-url: want redis+sentinel://[[user]:password@]host:port[,host2:port...]/master[?db=N]")
	}
	var form string
	switch scheme = strings.ToLower(scheme); {
	case scheme == "redis+sentinel" && master == "":
		form = "redis+sentinel://[[user]:password@]host:port[,host2:port...]/master[?db=N]"
	case scheme == "redis" && master != "":
		form = "redis://[[user]:password@]host:port[/db][?addr=host2:port&addr=...] for --redis-sentinel"
	case scheme == "rediss" || scheme == "rediss+sentinel":
		return nil, errors.New("TLS to Redis Sentinel (rediss) is not supported yet")
	default:
		return nil, errors.New("invalid --redis-url: want redis+sentinel://host:port[,host2:port...]/master, or --redis-sentinel master with redis://host:port?addr=host2:port")
	}
	invalid := func(what string) error { return fmt.Errorf("invalid --redis-url (%s): want %s", what, form) }
	if strings.ContainsAny(rest, "#") {
		return nil, invalid("a fragment")
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	o := &redis.FailoverOptions{MasterName: master}
	hosts := authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		u, err := url.Parse("redis://" + authority[:i] + "@host")
		if err != nil || u.User == nil {
			return nil, invalid("user and password")
		}
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
		hosts = authority[i+1:]
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, invalid("the query")
	}
	var addrs []string
	if master == "" {
		addrs = strings.Split(hosts, ",")
		name, err := url.PathUnescape(path)
		if err != nil || strings.Contains(name, "/") {
			return nil, invalid("the path")
		}
		o.MasterName = name
	} else {
		addrs = append([]string{hosts}, q["addr"]...)
		if path != "" {
			if o.DB, err = strconv.Atoi(path); err != nil || o.DB < 0 {
				return nil, invalid("the database number")
			}
		}
	}
	for key, vals := range q {
		switch key {
		case "addr":
			if master == "" {
				return nil, invalid("addr: list the sentinels with commas")
			}
			continue
		case "db", "sentinel_username", "sentinel_password":
		default:
			// Not the name: it may be a misplaced password.
			return nil, invalid("an unknown parameter; known: db, sentinel_username, sentinel_password")
		}
		if len(vals) != 1 {
			return nil, invalid(key + " given more than once")
		}
		switch v := vals[0]; key {
		case "db":
			if master != "" {
				return nil, invalid("db goes in the path")
			}
			if o.DB, err = strconv.Atoi(v); err != nil || o.DB < 0 {
				return nil, invalid("the database number")
			}
		case "sentinel_username":
			o.SentinelUsername = v
		case "sentinel_password":
			o.SentinelPassword = v
		}
	}
	if err := checkMasterName(o.MasterName); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		addr, err := sentinelAddr(a)
		if err != nil {
			return nil, invalid(err.Error())
		}
		o.SentinelAddrs = append(o.SentinelAddrs, addr)
	}
	return o, nil
}

// checkMasterName refuses a name that Sentinel cannot have.
func checkMasterName(name string) error {
	if name == "" {
		return errors.New("no Redis Sentinel master name: give it with --redis-sentinel, or as the path of a redis+sentinel:// URL")
	}
	if strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return errors.New("the Redis Sentinel master name has a space or a control character")
	}
	return nil
}

// sentinelAddr checks a sentinel's host:port, adding the default port to a
// bare host.
func sentinelAddr(a string) (string, error) {
	if a == "" {
		return "", errors.New("an empty sentinel address")
	}
	if !strings.Contains(a, ":") || (strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]")) {
		a += ":" + defaultSentinelPort
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" || strings.ContainsAny(host, ",/@ ") {
		return "", errors.New("a sentinel address is not host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", errors.New("a sentinel port is not a number from 1 to 65535")
	}
	return net.JoinHostPort(host, port), nil
}
