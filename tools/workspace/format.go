package workspace

import (
	"math"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Formatting helpers that reproduce the reference's JavaScript number, size,
// date and string conventions byte for byte. Each says which JS expression it
// stands for.

// formatCount is n.toLocaleString('en-US'): 1501 → "1,501".
func formatCount(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fixedHalfUp is (num/den).toFixed(decimals) for num ≥ 0 when num/den is
// exactly representable (den a power of two), as it is for every size we
// format: toFixed rounds the exact value half away from zero, which Go's
// FormatFloat (round half to even) does not.
func fixedHalfUp(num, den uint64, decimals int) string {
	scale := uint64(math.Pow10(decimals))
	q, r := num*scale/den, num*scale%den
	if 2*r >= den {
		q++
	}
	ip, fp := q/scale, q%scale
	if decimals == 0 {
		return strconv.FormatUint(ip, 10)
	}
	f := strconv.FormatUint(fp, 10)
	return strconv.FormatUint(ip, 10) + "." + strings.Repeat("0", decimals-len(f)) + f
}

// formatSize is the reference's formatSize for list_directory_with_sizes:
// "0 B", "18 B", "6.24 KB", "1.00 MB" (units up to TB, two decimals).
func formatSize(bytes int64) string {
	if bytes <= 0 {
		return strconv.FormatInt(bytes, 10) + " B"
	}
	units := []string{"B", "KB", "MB", "GB", "TB"}
	i := int(math.Floor(math.Log(float64(bytes)) / math.Log(1024)))
	if i <= 0 {
		return strconv.FormatInt(bytes, 10) + " B"
	}
	i = min(i, len(units)-1)
	return fixedHalfUp(uint64(bytes), uint64(1)<<(10*i), 2) + " " + units[i]
}

// formatTextFileSize is the read_text_file footer's size: "<1 KB", integer
// KB, one-decimal MB and GB.
func formatTextFileSize(bytes int64) string {
	b := uint64(max(bytes, 0))
	switch {
	case b < 1<<10:
		return "<1 KB"
	case b < 1<<20:
		return fixedHalfUp(b, 1<<10, 0) + " KB"
	case b < 1<<30:
		return fixedHalfUp(b, 1<<20, 1) + " MB"
	default:
		return fixedHalfUp(b, 1<<30, 1) + " GB"
	}
}

// isoTime is Date.prototype.toISOString: UTC, milliseconds, "Z".
func isoTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// jsTrim is String.prototype.trim: JavaScript's whitespace and line
// terminators, which differ slightly from unicode.IsSpace (U+FEFF is trimmed,
// U+0085 is not).
func jsTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		switch r {
		case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
			return true
		}
		return r >= 0x2000 && r <= 0x200a
	})
}

// utf16Len is a JavaScript string's .length.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// padEnd is s.padEnd(width) in JavaScript (width in UTF-16 units).
func padEnd(s string, width int) string {
	if n := utf16Len(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}

// mimeTypes is the reference's extension table for read_media_file.
var mimeTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
	".webp": "image/webp", ".svg": "image/svg+xml", ".ico": "image/x-icon", ".bmp": "image/bmp",
	".mp3": "audio/mpeg", ".wav": "audio/wav", ".ogg": "audio/ogg", ".m4a": "audio/mp4",
	".flac": "audio/flac",
	".mp4":  "video/mp4", ".webm": "video/webm", ".avi": "video/x-msvideo", ".mov": "video/quicktime",
	".pdf": "application/pdf", ".json": "application/json", ".xml": "application/xml",
	".zip": "application/zip", ".gz": "application/gzip", ".tar": "application/x-tar",
}

// extname is Node's path.extname: the last ".ext" of the base name, "" for
// names without one or that only start with a dot (".env").
func extname(p string) string {
	base := path.Base(strings.TrimRight(p, "/"))
	i := strings.LastIndexByte(base, '.')
	if i <= 0 {
		return ""
	}
	// ".." and names of dots only have no extension either.
	if strings.Trim(base, ".") == "" {
		return ""
	}
	return base[i:]
}

func mimeType(p string) string {
	if m, ok := mimeTypes[strings.ToLower(extname(p))]; ok {
		return m
	}
	return "application/octet-stream"
}

// localeLess approximates a.localeCompare(b) < 0 as Node computes it (ICU
// root collation), which the reference uses to sort list_directory_with_sizes
// by name: at the first level punctuation and symbols sort before digits and
// digits before letters, letters compare case-blind; then lower case before
// upper; then bytes. Exact ICU order among punctuation is not reproduced.
func localeLess(a, b string) bool {
	if c := collate(a, b, false); c != 0 {
		return c < 0
	}
	if c := collate(a, b, true); c != 0 {
		return c < 0
	}
	return a < b
}

func collKey(r rune) (class int, key rune) {
	switch {
	case unicode.IsLetter(r):
		return 3, unicode.ToLower(r)
	case unicode.IsDigit(r):
		return 2, r
	case unicode.IsSpace(r):
		return 0, r
	default:
		return 1, r
	}
}

func collate(a, b string, tertiary bool) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		a, b = a[na:], b[nb:]
		if tertiary {
			la, lb := unicode.IsLower(ra), unicode.IsLower(rb)
			if unicode.ToLower(ra) == unicode.ToLower(rb) && la != lb {
				if la {
					return -1
				}
				return 1
			}
			continue
		}
		ca, ka := collKey(ra)
		cb, kb := collKey(rb)
		if ca != cb {
			return ca - cb
		}
		if ka != kb {
			if ka < kb {
				return -1
			}
			return 1
		}
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	default:
		return 1
	}
}
