// Package scpd serves the server side of the legacy scp protocol (OpenSSH's
// `scp -O`, and every scp older than OpenSSH 9.0): the `scp -t PATH` (sink:
// the client uploads) and `scp -f PATH...` (source: the client downloads)
// commands an scp client asks the SSH server to run. It works on a
// fsops.Workspace, so every path is confined exactly as SFTP's and the MCP
// tools' are; no shell and no scp binary is involved.
//
// ParseCommand decides whether an exec request's command is one of ours. An
// scp client expects the server's shell to split that command and expand
// its globs (`scp -O host:'logs/*.txt' .`), so the command is split with
// the shell's quoting rules (single and double quotes, backslash), "~" is
// the workspace root, and an unquoted *, ? or [ in a -f path is expanded
// against the workspace. Anything else a shell would act on (;, |, $,
// backquotes, redirections) is refused with a message: it is not a shell.
//
// The protocol (proto.go) is line-based control records, each answered by
// one status byte: 0 (ok), 1 followed by a message line (a warning: that
// file failed, the transfer goes on) or 2 and a message (fatal).
//
//	C<mode> <size> <name>\n   a file; then size bytes and a status byte
//	D<mode> 0 <name>\n        enter a directory (-r)
//	E\n                       leave it
//	T<mtime> 0 <atime> 0\n    times of the next C or D (-p)
//
// What a client cannot make us do:
//   - a record's name is one path element: "", "..", a "/" or a NUL is a
//     fatal error, as in OpenSSH's own sink ("." is the target itself);
//   - an upload is written to a temporary file beside its target and renamed
//     over it only once every byte and the client's final status arrived, so
//     an interrupted upload leaves the old file, not half a new one;
//   - control lines are at most MaxLineBytes, directories nest at most
//     MaxDepth deep (both ways: a symlink loop ends there), and a glob
//     expands to at most MaxGlobMatches paths with at most MaxGlobLookups
//     file system calls.
//
// What the workspace cannot make a client do: a download skips a name
// holding a newline (with a warning, as OpenSSH's scp does), since its
// record would end there and the client would read the rest of the name
// and the file's data as records.
//
// The command ends with exit status 0 when every file went through and 1
// otherwise, which is what scp clients report.
package scpd
