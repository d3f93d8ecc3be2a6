// Package clients runs lockgate's client examples, the curl recipes in
// examples/curl, the Node program in examples/node and the Python one in
// examples/python, against the real gateway (app.Run in-process, on
// loopback) backed by a real redis-server, and checks what they print and
// that they leave no lock behind. It has no non-test code.
package clients
