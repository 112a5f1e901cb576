// Package wsnet adapts a WebSocket (gorilla/websocket) to the byte-stream
// net.Conn that SSH runs over: the daemon's /ssh endpoint (sshws) uses it on
// the server side, and the client package (wsclient, which `agent-backend
// proxy` and the benchmarks' client use) on the client side.
//
// Every message, binary or text and however fragmented, is a chunk of the
// stream; writes are coalesced into binary messages by one flusher
// goroutine that runs only while there is something to send; Close performs
// the WebSocket closing handshake with the close code chosen by SetCloseCode
// or CloseWith, and CloseReason reports the peer's.
//
// It is also the one keepalive of every WebSocket the daemon serves
// (keepalive.go): Keepalive pings a Conn (/ssh) or a Peer (/gateway, which
// reads whole messages itself) every interval and closes a peer that sent
// nothing for KeepaliveMisses intervals with 1011 "keepalive timeout". And
// it writes the one close frame of every WebSocket the daemon serves, /ssh's
// and /gateway's (CloseFrame: the reason made valid UTF-8 and cut to what a
// control frame holds).
//
// The WebSocket's own buffers (the read buffer's size, the write buffer
// pool) are chosen by whoever upgrades or dials it, for its side: the
// server keeps a small read buffer per idle connection, the client a larger
// one. What this package fixes is the same on both sides: the read limit
// per message (4 MiB), the write queue (256 KiB before Write blocks) and the
// pool of coalescing buffers, shared by every connection of the process.
package wsnet
