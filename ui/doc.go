// Package ui is the gateway's read-only dashboard: a page, a script and a
// style sheet, embedded in the binary and served under /ui/ when the
// gateway runs with --ui.
//
// The page calls the gateway's own API from the browser with the viewer's
// token, which the viewer pastes and the tab keeps in sessionStorage; it
// never goes in a URL. Browsers cannot send a header with EventSource, so
// the page reads a lock's event stream with fetch. Every response of this
// package carries a Content-Security-Policy that allows only these assets
// and calls to the gateway's origin: no inline script or style, no other
// host.
package ui
