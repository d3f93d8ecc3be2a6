package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// etcdProc is an etcd (3.4, for its JSON gateway to the lock API) that
// the lab started on loopback, with its data in a temporary directory.
type etcdProc struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	logs *tailBuffer
}

// startEtcd runs bin on two free loopback ports and waits until /health
// answers.
func startEtcd(ctx context.Context, bin, dataDir string) (*etcdProc, error) {
	client, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	peer, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	p := &etcdProc{url: "http://" + client, logs: newTailBuffer(8 << 10), done: make(chan struct{})}
	p.cmd = exec.Command(bin, "--name", "lockbench", "--data-dir", dataDir,
		"--listen-client-urls", p.url, "--advertise-client-urls", p.url,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "lockbench=http://"+peer, "--log-level", "warn")
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"true"`)) {
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("etcd exited: %s", p.logs)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("etcd did not report healthy within 30s: %s", p.logs)
		}
	}
}

func (p *etcdProc) pid() int { return p.cmd.Process.Pid }

func (p *etcdProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// etcdVersion asks etcd for its server version.
func etcdVersion(url string) string {
	resp, err := http.Get(url + "/version")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v struct {
		Server string `json:"etcdserver"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	return v.Server
}

// etcdTarget drives etcd's lock service through its JSON gateway
// (POST /v3/lock/lock and /v3/lock/unlock, what `etcdctl lock` does over
// gRPC). Each session holds one lease, granted at its first acquire; the
// lock's key is the owner token, the response's revision the fence (it
// grows with every grant of a lock). etcd's lock always waits: the wait
// argument is not sent, only the run's context bounds it. No token is
// checked: etcd runs without auth here.
type etcdTarget struct {
	url       string
	namespace string
	ttlS      int64
	client    *http.Client
	transport *http.Transport
}

func newEtcdTarget(url, namespace string, ttl time.Duration, conns int) *etcdTarget {
	tr := &http.Transport{MaxIdleConns: conns + 16, MaxIdleConnsPerHost: conns + 16, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	return &etcdTarget{url: url, namespace: namespace, ttlS: max(int64(ttl/time.Second), 1), client: &http.Client{Transport: tr}, transport: tr}
}

func (t *etcdTarget) close() { t.transport.CloseIdleConnections() }

func (t *etcdTarget) NewSession(ctx context.Context, name string) loadgen.Session {
	return &etcdSession{t: t, ctx: ctx, name: base64.StdEncoding.EncodeToString([]byte(t.namespace + "/" + name))}
}

type etcdSession struct {
	t     *etcdTarget
	ctx   context.Context
	name  string // base64, as the gateway wants bytes
	lease string
}

// call posts body to path and decodes the JSON answer into out.
func (s *etcdSession) call(path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.t.url+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := s.t.client.Do(req)
	if err != nil {
		if s.ctx.Err() != nil {
			return &loadgen.CallError{Class: "cancelled", Err: err}
		}
		return &loadgen.CallError{Class: "transport", Err: err}
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(resp.Body)
	if err != nil {
		return &loadgen.CallError{Class: "transport", Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return &loadgen.CallError{Class: "etcd " + strconv.Itoa(resp.StatusCode), Err: fmt.Errorf("%s: %.200s", path, data)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &loadgen.CallError{Class: "bad_answer", Err: err}
	}
	return nil
}

func (s *etcdSession) Acquire(time.Duration) (string, int64, error) {
	if s.lease == "" {
		var g struct {
			ID string `json:"ID"`
		}
		if err := s.call("/v3/lease/grant", map[string]string{"TTL": strconv.FormatInt(s.t.ttlS, 10)}, &g); err != nil {
			return "", 0, err
		}
		if g.ID == "" {
			return "", 0, &loadgen.CallError{Class: "bad_answer", Err: fmt.Errorf("lease grant without an ID")}
		}
		s.lease = g.ID
	}
	var l struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
		Key string `json:"key"`
	}
	if err := s.call("/v3/lock/lock", map[string]string{"name": s.name, "lease": s.lease}, &l); err != nil {
		return "", 0, err
	}
	if l.Key == "" {
		return "", 0, &loadgen.CallError{Class: "bad_answer", Err: fmt.Errorf("lock without a key")}
	}
	rev, _ := strconv.ParseInt(l.Header.Revision, 10, 64)
	return l.Key, rev, nil
}

func (s *etcdSession) Release(key string) error {
	var out struct{}
	return s.call("/v3/lock/unlock", map[string]string{"key": key}, &out)
}

// etcdBin is the path of the etcd binary flagValue names, if there is one.
func etcdBin(flagValue string) (string, bool) {
	if flagValue == "" {
		return "", false
	}
	path, err := exec.LookPath(flagValue)
	if err != nil {
		return "", false
	}
	if _, err := os.Stat(path); err != nil {
		return "", false
	}
	return path, true
}
