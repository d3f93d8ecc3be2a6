package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is where Handler expects to be mounted.
const Prefix = "/ui/"

// ContentSecurityPolicy is the policy of every answer of Handler: only the
// page's own script, style and images, calls to the gateway's own origin,
// no inline code, no forms, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file, with what its answers need ready.
type asset struct {
	name  string
	body  []byte
	ctype string
	etag  string
}

// SetHeaders sets the security headers of the dashboard on h: the policy,
// no MIME sniffing, and no Referer, so that no address of the dashboard
// leaves with a request.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// Handler serves the dashboard's assets for paths under Prefix: Prefix
// itself is the page. Only GET and HEAD; anything else is 405, and a
// name not embedded is 404.
func Handler() http.Handler {
	assets := make(map[string]*asset)
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		name := strings.TrimPrefix(p, "static/")
		assets[name] = &asset{
			name:  name,
			body:  body,
			ctype: contentType(name),
			etag:  `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
		}
		return nil
	})
	if err != nil {
		// The files are in the binary: a failure here is a build's bug.
		panic("ui: read embedded assets: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetHeaders(w.Header())
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		if name == "" {
			name = "index.html"
		}
		a := assets[name]
		if a == nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		// Revalidated on each load, answered 304 while unchanged: a new
		// gateway's assets are used at once, without names that change.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
	})
}

// contentType names the types of the few kinds of file the dashboard has,
// independent of the machine's MIME tables.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}
