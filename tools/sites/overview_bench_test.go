package sites

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkOverview: a browser's GET / of a site of 800 pages in 40
// directories, each with a tool, so that every page is judged
// (opfile.Judge: each directory on the pages' ways once per request, each
// page's own file every time). Run:
//
//	go test -run '^$' -bench Overview ./tools/sites/
func BenchmarkOverview(b *testing.B) {
	s, root := exampleSiteB(b)
	for d := range 40 {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("area%02d", d)), 0o755); err != nil {
			b.Fatal(err)
		}
		for p := range 20 {
			writePageB(b, root, filepath.Join(fmt.Sprintf("area%02d", d), fmt.Sprintf("page%02d.md", p)), "---\ntools:\n  - [ls]\n---\n# page\n")
		}
	}
	h := serve(s)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "http://site/", nil)
		req.Header.Set("Accept", "text/html")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}
