package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCert writes a self-signed ECDSA certificate for 127.0.0.1, named cn,
// and its key to certFile and keyFile, and returns the certificate.
func testCert(t *testing.T, cn, certFile, keyFile string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	write(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// write replaces path's content at once, as a deployment tool does with a
// rename.
func write(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// served makes a new connection and returns the certificate the gateway
// presents and the HTTP version of a GET /healthz over it.
func served(t *testing.T, url string, roots *x509.CertPool) (string, int) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Get(url + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: got %d, want 200", resp.StatusCode)
	}
	return resp.TLS.PeerCertificates[0].Subject.CommonName, resp.ProtoMajor
}

// TestTLSServesH2AndReloads: with --tls-cert and --tls-key the gateway
// serves HTTPS with HTTP/2; a reload (SIGHUP in cmd/gateway) makes new
// handshakes present the rewritten certificate; a broken pair on a later
// reload leaves the previous certificate in use and logs an error.
func TestTLSServesH2AndReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := testCert(t, "first", certFile, keyFile)
	hup := make(chan os.Signal, 1)
	var logs syncWriter
	g, err := Start(WithReload(t.Context(), hup), append(startArgs, "--tls-cert", certFile, "--tls-key", keyFile), startEnv, &logs)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() {
		if err := g.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	if !strings.HasPrefix(g.URL, "https://127.0.0.1:") {
		t.Fatalf("listening on %s, want https://127.0.0.1:...", g.URL)
	}
	roots := x509.NewCertPool()
	roots.AddCert(first)
	if cn, proto := served(t, g.URL, roots); cn != "first" || proto != 2 {
		t.Fatalf("got certificate %q over HTTP/%d, want \"first\" over HTTP/2", cn, proto)
	}

	second := testCert(t, "second", certFile, keyFile)
	roots.AddCert(second)
	hup <- syscall.SIGHUP
	waitServed(t, g.URL, roots, "second")

	write(t, keyFile, []byte("not a key"))
	hup <- syscall.SIGHUP
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "TLS certificate not reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged for a broken key within 30s; logs:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cn, _ := served(t, g.URL, roots); cn != "second" {
		t.Fatalf("after a broken reload: got certificate %q, want \"second\" still", cn)
	}
}

func waitServed(t *testing.T, url string, roots *x509.CertPool, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cn, _ := served(t, url, roots)
		if cn == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still serving %q 30s after the reload, want %q", cn, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTLSRefusesToStart: a missing or half-configured pair stops the start.
func TestTLSRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	testCert(t, "x", certFile, keyFile)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"cert only":    {[]string{"--tls-cert", certFile}, "together"},
		"key only":     {[]string{"--tls-key", keyFile}, "together"},
		"missing file": {[]string{"--tls-cert", certFile, "--tls-key", filepath.Join(dir, "nope.pem")}, "--tls-key"},
		"swapped":      {[]string{"--tls-cert", keyFile, "--tls-key", certFile}, "--tls-cert"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Start(t.Context(), append(startArgs, tc.args...), startEnv, &syncWriter{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}
