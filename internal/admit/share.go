package admit

import "fmt"

// CallerShare is how many of a pool's total slots one caller, a token, may
// hold at once (the pools are --mcp-max-sessions and
// --browser-max-sessions): all of them where the daemon admits one token,
// and half of them, rounded up, where a --tokens file admits several, so
// that no token, whatever its scope, can hold every slot while another
// token's clients are refused. The daemon's own token counts as one token.
func CallerShare(total int, tokens bool) int {
	if !tokens || total <= 1 {
		return total
	}
	return (total + 1) / 2
}

// ShareRefusal is the message refusing caller (a token's entry name, ""
// for the daemon's own token) one more slot of a pool of total (what: "MCP
// sessions"; flag: the pool's setting), of which it holds held, its share.
func ShareRefusal(caller string, held, total int, what, flag string) string {
	who := "the daemon's token"
	if caller != "" {
		who = fmt.Sprintf("token %q", caller)
	}
	return fmt.Sprintf("%s holds %d of the %d %s, its share (half of %s, rounded up, while --tokens admits several tokens); end one of its own first", who, held, total, what, flag)
}
