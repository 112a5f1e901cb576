package admit

import "fmt"

// ReplyTooLarge is the one wording, on every face, of an answer refused
// because it would pass --max-reply-bytes: size is what the answer would
// be, left what the request's budget had left (a batch shares one limit),
// limit the limit. /mcp answers it as JSON-RPC error -32000, /gateway as
// -32006, /execute as a failed call.
func ReplyTooLarge(size, left, limit int64) string {
	room := fmt.Sprintf("the %d bytes left of the reply limit of %d bytes", left, limit)
	if left >= limit {
		room = fmt.Sprintf("the reply limit of %d bytes", limit)
	}
	return fmt.Sprintf("the reply to this request would be %d bytes, more than %s (--max-reply-bytes); ask for less: read large files in parts (offset and limit), or send fewer requests per batch", size, room)
}
