package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

func TestParsePublicKeys(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pkix, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	pkcs1 := x509.MarshalPKCS1PublicKey(&k.PublicKey)
	data := append(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: pkcs1})...)
	keys, err := ParsePublicKeys(data)
	if err != nil || len(keys) != 2 {
		t.Fatalf("got %d keys, %v; want 2", len(keys), err)
	}
	for name, bad := range map[string][]byte{
		"empty":       nil,
		"not PEM":     []byte("hello"),
		"private key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}),
		"garbage DER": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}),
	} {
		if _, err := ParsePublicKeys(bad); err == nil {
			t.Errorf("%s: got no error", name)
		}
	}
}
