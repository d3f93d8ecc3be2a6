// Package ratelimit keeps each subject, the caller a token names, to its
// share of one gateway: requests per second from a token bucket, and a
// cap on its acquirers waiting at once. The limits are the gateway's, or
// those the policy rules that granted a token set (auth.Limits).
//
// Refusals are *Error values, which match ErrTooManyRequests, so that
// package handlers maps them to a 429 problem in its one table; Error
// sets the Retry-After and RateLimit headers the problem carries.
package ratelimit
