package app

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestParseSentinelURL(t *testing.T) {
	const pw = "s3cr#t/pw" // percent-encoded in the URLs below
	for name, tc := range map[string]struct {
		url, master string
		want        *redis.FailoverOptions
	}{
		"one sentinel, default port": {
			url:  "redis+sentinel://s1/mymaster",
			want: &redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"s1:26379"}},
		},
		"three sentinels, password, db": {
			url: "redis+sentinel://:s3cr%23t%2Fpw@10.0.0.1:26380,10.0.0.2,[::1]:26381/my%2Dmaster?db=2",
			want: &redis.FailoverOptions{MasterName: "my-master", Password: pw, DB: 2,
				SentinelAddrs: []string{"10.0.0.1:26380", "10.0.0.2:26379", "[::1]:26381"}},
		},
		"user, sentinel credentials, upper-case scheme": {
			url: "Redis+Sentinel://app:pw@s1:1,s2:2/m?sentinel_username=watch&sentinel_password=spw",
			want: &redis.FailoverOptions{MasterName: "m", Username: "app", Password: "pw",
				SentinelUsername: "watch", SentinelPassword: "spw", SentinelAddrs: []string{"s1:1", "s2:2"}},
		},
		"--redis-sentinel with redis://": {
			url: "redis://:s3cr%23t%2Fpw@s1:5/3?addr=s2:6&addr=s3&sentinel_password=spw", master: "mymaster",
			want: &redis.FailoverOptions{MasterName: "mymaster", Password: pw, DB: 3, SentinelPassword: "spw",
				SentinelAddrs: []string{"s1:5", "s2:6", "s3:26379"}},
		},
		"--redis-sentinel with one sentinel": {
			url: "redis://[::1]", master: "m",
			want: &redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"[::1]:26379"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseSentinelURL(tc.url, tc.master)
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseSentinelURLRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		url, master, want string
	}{
		"no master":                 {"redis+sentinel://s1:26379", "", "no Redis Sentinel master name"},
		"empty master":              {"redis+sentinel://s1:26379/", "", "no Redis Sentinel master name"},
		"master and db in path":     {"redis+sentinel://s1/m/0", "", "the path"},
		"space in master":           {"redis://s1", "my master", "space"},
		"no sentinel":               {"redis+sentinel://:hunter2secret@/m", "", "empty sentinel address"},
		"empty in list":             {"redis+sentinel://s1,,s2/m", "", "empty sentinel address"},
		"bad port":                  {"redis+sentinel://s1:99999/m", "", "1 to 65535"},
		"port not a number":         {"redis+sentinel://s1:x/m", "", "1 to 65535"},
		"bad db":                    {"redis+sentinel://s1/m?db=-1", "", "database number"},
		"db twice":                  {"redis+sentinel://s1/m?db=1&db=2", "", "db given more than once"},
		"addr in sentinel URL":      {"redis+sentinel://s1/m?addr=s2", "", "commas"},
		"unknown parameter":         {"redis+sentinel://s1/m?hunter2secret=1", "", "unknown parameter"},
		"db query in redis form":    {"redis://s1?db=1", "m", "path"},
		"commas in redis form":      {"redis://s1,s2", "m", "not host:port"},
		"bad db path in redis":      {"redis://s1/x", "m", "database number"},
		"redis:// without master":   {"redis://:hunter2secret@s1", "", "want redis+sentinel://"},
		"sentinel URL with master":  {"redis+sentinel://s1/m", "m", "want redis+sentinel://"},
		"TLS":                       {"rediss+sentinel://s1/m", "", "TLS"},
		"TLS with --redis-sentinel": {"rediss://s1", "m", "TLS"},
		"no scheme":                 {"s1:26379", "m", "invalid --redis-url"},
		"fragment":                  {"redis+sentinel://s1/m#x", "", "fragment"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseSentinelURL(tc.url, tc.master)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2secret") {
				t.Fatalf("the error quotes the URL's secret: %v", err)
			}
		})
	}
}

func TestConfigRedisSentinel(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"LOCKGATE_JWT_SECRET": "config-test-secret-at-least-32-bytes"}[k]
	}
	for name, tc := range map[string]struct {
		args []string
		want string // empty: accepted
	}{
		"sentinel URL":              {[]string{"--redis-url", "redis+sentinel://s1,s2/m"}, ""},
		"--redis-sentinel":          {[]string{"--redis-sentinel", "m", "--redis-url", "redis://s1?addr=s2"}, ""},
		"--redis-sentinel, no URL":  {[]string{"--redis-sentinel", "m"}, "needs --redis-url"},
		"--redis-sentinel, cluster": {[]string{"--redis-sentinel", "m", "--redis-url", "redis://s1", "--redis-cluster"}, "exclude each other"},
		"sentinel URL, cluster":     {[]string{"--redis-url", "redis+sentinel://s1/m", "--redis-cluster"}, "exclude each other"},
		"named twice":               {[]string{"--redis-sentinel", "m", "--redis-url", "redis+sentinel://s1/m"}, "both name the master"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig(append([]string{"gateway"}, tc.args...), env, io.Discard)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	t.Run("environment", func(t *testing.T) {
		c, err := parseConfig([]string{"gateway"}, func(k string) string {
			return map[string]string{"LOCKGATE_JWT_SECRET": "config-test-secret-at-least-32-bytes",
				"LOCKGATE_REDIS_SENTINEL": "m", "LOCKGATE_REDIS_URL": "redis://s1"}[k]
		}, io.Discard)
		if err != nil || c.redisSentinel != "m" {
			t.Fatalf("got %q, %v; want m, no error", c.redisSentinel, err)
		}
	})
}
