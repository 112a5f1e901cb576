package workspace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// The read tools: read_text_file, read_media_file, read_multiple_files and
// get_file_info.

type readTextArgs struct {
	Path   string `json:"path"`
	Offset *int   `json:"offset"`
	Limit  *int   `json:"limit"`
	Head   *int   `json:"head"`
	Tail   *int   `json:"tail"`
}

var readTextFileTool = tool[readTextArgs]{
	Name:        "read_text_file",
	Title:       "Read text file",
	Description: "Read file contents as text. Paginates by default: with no paging parameters, returns the first 1000 lines and appends a footer indicating how much of the file was shown. Use offset and limit to read a later page of a large file. Lines longer than 2000 chars are truncated with an inline marker.",
	Annotations: readOnly,
	Schema: obj(schema{
		"path":   str("Path to the file"),
		"offset": posInt("The 1-based line number to start reading from. Only provide if the file is too large to read at once."),
		"limit":  posInt("The number of lines to read (at most 5000). Only provide if the file is too large to read at once."),
		"head":   nonNegInt("Deprecated (agent-backend 0.9): return only the first N lines. Prefer offset/limit."),
		"tail":   nonNegInt("Deprecated (agent-backend 0.9): return only the last N lines."),
	}, required("path")),
	Handler: readTextFile,
}

func readTextFile(ctx context.Context, ws fsops.Workspace, a readTextArgs) *mcp.CallToolResult {
	// 0.9 clients page with head/tail; the result is the bare lines.
	if a.Head != nil || a.Tail != nil {
		if a.Head != nil && a.Tail != nil {
			return toolError("Cannot specify both head and tail parameters simultaneously")
		}
		lr := fsops.LineRange{}
		if a.Head != nil {
			if *a.Head == 0 {
				return textResult("")
			}
			lr.Head = *a.Head
		} else {
			if *a.Tail == 0 {
				return textResult("")
			}
			lr.Tail = *a.Tail
		}
		lines, err := ws.ReadLines(ctx, a.Path, lr)
		if err != nil {
			return failure(failRead, a.Path, err)
		}
		return textResult(lines.Text())
	}

	lr := fsops.LineRange{}
	if a.Offset != nil {
		lr.Offset = *a.Offset
	}
	if a.Limit != nil {
		lr.Limit = *a.Limit
	}
	lines, err := ws.ReadLines(ctx, a.Path, lr)
	if err != nil {
		return failure(failRead, a.Path, err)
	}
	body := lines.Text()

	// The reference's footer: whenever the page is not the whole file, and
	// for an implicit page also when a line was cut, so that even a
	// one-line minified file says how big it is and how to read on.
	implicit := a.Offset == nil && a.Limit == nil
	var footer string
	if !lines.WholeFile || (implicit && lines.CutLines > 0) {
		switch {
		case len(lines.Lines) == 0:
			footer = fmt.Sprintf("[offset %s is beyond end of file (%s lines).]", formatCount(lines.First), formatCount(lines.Total))
		case implicit:
			size := "?"
			if st, err := ws.Stat(a.Path); err == nil {
				size = formatTextFileSize(st.Size)
			}
			footer = fmt.Sprintf("[showing lines %s-%s of %s; file is ~%s. Call again with offset and limit to read more.]",
				formatCount(lines.First), formatCount(lines.Last), formatCount(lines.Total), size)
		default:
			footer = fmt.Sprintf("[showing lines %s-%s of %s.]", formatCount(lines.First), formatCount(lines.Last), formatCount(lines.Total))
		}
	}
	if footer != "" {
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		body += footer
	}
	return textResult(body)
}

type readMediaArgs struct {
	Path  string `json:"path"`
	Force bool   `json:"force"`
}

var readMediaFileTool = tool[readMediaArgs]{
	Name:        "read_media_file",
	Title:       "Read media file",
	Description: "Read an image or audio file, returns base64 data with MIME type",
	Annotations: readOnly,
	Schema: obj(schema{
		"path":  str("Path to the media file"),
		"force": boolean("Bypass the image/audio MIME type check and return the file as a base64 blob regardless of type. Off by default."),
	}, required("path")),
	Handler: readMediaFile,
}

func readMediaFile(_ context.Context, ws fsops.Workspace, a readMediaArgs) *mcp.CallToolResult {
	mt := mimeType(a.Path)
	isImage, isAudio := strings.HasPrefix(mt, "image/"), strings.HasPrefix(mt, "audio/")
	if !isImage && !isAudio && !a.Force {
		st, err := ws.Stat(a.Path)
		if err != nil {
			return failure(failStat, a.Path, err)
		}
		ext := extname(a.Path)
		if ext == "" {
			ext = "(none)"
		}
		return toolError(fmt.Sprintf("Unrecognized file type %s for read_media_file (only image/* and audio/* are supported).\n\n"+
			"Path: %s\nExtension: %s\nDetected MIME type: %s\nSize: %d bytes\nModified: %s\n\n"+
			"Try read_text_file for text content or get_file_info for full metadata. If you really need raw bytes, call read_media_file again with force: true.",
			ext, a.Path, ext, mt, st.Size, isoTime(st.ModTime)))
	}
	data, err := ws.ReadFile(a.Path)
	if err != nil {
		return failure(failRead, a.Path, err)
	}
	var c mcp.Content
	switch {
	case isImage:
		c = &mcp.ImageContent{Data: data, MIMEType: mt}
	case isAudio:
		c = &mcp.AudioContent{Data: data, MIMEType: mt}
	default:
		// The reference answers type "blob", which is no MCP content type:
		// the SDK clients reject the whole result. An embedded resource
		// carries the same bytes and MIME type validly.
		c = &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "file://" + resolvedOr(ws, a.Path), MIMEType: mt, Blob: data,
		}}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{c}}
}

func resolvedOr(ws fsops.Workspace, p string) string {
	if abs, err := ws.Resolve(p); err == nil {
		return abs
	}
	return p
}

type readMultiArgs struct {
	Paths []string `json:"paths"`
}

var readMultipleFilesTool = tool[readMultiArgs]{
	Name:        "read_multiple_files",
	Title:       "Read multiple files",
	Description: "Read several files simultaneously. Failed reads for individual files won't stop the entire operation.",
	Annotations: readOnly,
	Schema:      obj(schema{"paths": strArray("Array of file paths to read", minItems(1))}, required("paths")),
	Handler:     readMultipleFiles,
}

// maxMultiRead bounds the text read_multiple_files builds: each file is
// bounded by the maximum read size, but a call may name the same 10 MiB file
// 100,000 times. It is the default reply limit of /mcp (--max-reply-bytes),
// past which the answer could not be sent anyway.
const maxMultiRead = 32 << 20

func readMultipleFiles(_ context.Context, ws fsops.Workspace, a readMultiArgs) *mcp.CallToolResult {
	var b strings.Builder
	for i, p := range a.Paths {
		var data []byte
		err := errFull
		if b.Len() < maxMultiRead {
			data, err = ws.ReadFile(p)
			if err == nil && b.Len()+len(data) > maxMultiRead {
				err = errFull
			}
		}
		if err == errFull {
			// Nothing more is read: one note for this path and the rest.
			fmt.Fprintf(&b, "\n---\n[%d more paths not read (%s first): the answer holds %d bytes, and one read_multiple_files call answers at most %d; read them in another call]",
				len(a.Paths)-i, p, b.Len(), maxMultiRead)
			break
		}
		if i > 0 {
			b.WriteString("\n---\n")
		}
		if err != nil {
			b.WriteString(p + ": Error - " + errorText(failRead, p, err))
			continue
		}
		b.WriteString(p + ":\n")
		b.Write(data)
		b.WriteString("\n")
	}
	return textResult(b.String())
}

// errFull is read_multiple_files' answer being full (maxMultiRead).
var errFull = errors.New("read_multiple_files answer full")

var getFileInfoTool = tool[pathArgs]{
	Name:        "get_file_info",
	Title:       "Get file info",
	Description: "Get detailed metadata: size, timestamps, type, permissions",
	Annotations: readOnly,
	Schema:      obj(schema{"path": str("Path to the file or directory")}, required("path")),
	Handler:     getFileInfo,
}

func getFileInfo(_ context.Context, ws fsops.Workspace, a pathArgs) *mcp.CallToolResult {
	st, err := ws.Stat(a.Path)
	if err != nil {
		return failure(failStat, a.Path, err)
	}
	typ := "other"
	switch {
	case st.IsDir():
		typ = "directory"
	case st.Mode.IsRegular():
		typ = "file"
	}
	created := st.BirthTime
	if created.IsZero() {
		created = st.ChangeTime
	}
	// JSON.stringify(info, null, 2) with the reference's key order; the
	// values need no escaping beyond what quote() does.
	text := "{\n" +
		`  "path": ` + quote(a.Path) + ",\n" +
		`  "type": "` + typ + `",` + "\n" +
		`  "size": ` + strconv.FormatInt(st.Size, 10) + ",\n" +
		`  "created": "` + isoTime(created) + `",` + "\n" +
		`  "modified": "` + isoTime(st.ModTime) + `",` + "\n" +
		`  "accessed": "` + isoTime(st.AccessTime) + `",` + "\n" +
		`  "mode": "` + strconv.FormatUint(uint64(fsops.POSIXMode(st.Mode)), 8) + `"` + "\n}"
	return textResult(text)
}

// quote is JSON.stringify for a string: like Go's %q for JSON but without
// HTML escaping.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
