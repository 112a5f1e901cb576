// Package wsclient is the client side of the daemon's /ssh endpoint: Dial
// opens the WebSocket and returns it as a net.Conn carrying the SSH byte
// stream, for x/crypto/ssh's NewClientConn (the benchmarks' client, a Go
// client library) or for Proxy, which bridges it to an SSH client's
// stdin/stdout (`agent-backend proxy`, OpenSSH's ProxyCommand).
//
// It imports no server package of the daemon and none of the test-only
// modules: a program that imports it gets gorilla/websocket and the
// standard library (wsclient_test.go checks that).
//
// The token is sent as "Authorization: Bearer". A daemon that rejects it
// completes the upgrade and closes with 4001, which Dial does not see (the
// first Read ends; Conn.CloseReason tells why) and Proxy returns as
// ErrUnauthorized. Buffer sizes have documented defaults
// (DefaultReadBufferSize, DefaultWriteBufferSize) that a Dialer changes.
package wsclient
