package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// FuzzParseSiteFile: a `site serve --config` file is refused with one line
// naming the file; one taken has every value within its bounds, and,
// written back as TOML, reads back the same.
func FuzzParseSiteFile(f *testing.F) {
	for _, s := range []string{
		"host = \"127.0.0.1\"\nport = 8000\ntimeout = 30\nmax_output_bytes = 1048576\nmax_list_items = 100\nenv_file = \"site.env\"\nisolation = \"software\"\ntoken_file = \"/t\"\nallowed_origins = [\"https://a.example\"]\nnot_allowed_status = 400\nstrict_output = true\n",
		"timeout = \"1m30s\"", "timeout = 1.5", "port = [", "port = [{a = 1}]", "timeout = [[1], {b = \"x\\ny\"}]", "x = 1", "[t]\na = 1",
		"allowed_origins = [\"a\", 1]", "isolation = \"vm\"", "host = \"a\\u0000b\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := parseSiteFile("f.toml", data)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "--config f.toml") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error %q: want one line naming the file", msg)
			}
			return
		}
		if sf.Port < 0 || sf.Port > 65535 || sf.Timeout < 0 || sf.Timeout > 24*time.Hour || sf.MaxOutput < 0 || sf.MaxOutput > maxSiteOutput ||
			sf.MaxListItems < 0 || sf.MaxListItems > maxSiteList || sf.NotAllowedStatus != 0 && sf.NotAllowedStatus != 400 && sf.NotAllowedStatus != 403 {
			t.Fatalf("%q taken as %+v", data, sf)
		}
		doc := map[string]any{}
		for k, v := range map[string]any{"host": sf.Host, "env_file": sf.EnvFile, "isolation": sf.Isolation, "token_file": sf.TokenFile} {
			if v != "" {
				doc[k] = v
			}
		}
		for k, v := range map[string]int64{"port": int64(sf.Port), "max_output_bytes": sf.MaxOutput, "max_list_items": int64(sf.MaxListItems), "not_allowed_status": int64(sf.NotAllowedStatus)} {
			if v != 0 {
				doc[k] = v
			}
		}
		if sf.Timeout != 0 {
			doc["timeout"] = sf.Timeout.String()
		}
		if sf.AllowedOrigins != nil {
			doc["allowed_origins"] = sf.AllowedOrigins
		}
		if sf.StrictOutput != nil {
			doc["strict_output"] = *sf.StrictOutput
		}
		out, err := toml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseSiteFile("f.toml", out)
		if err != nil || !reflect.DeepEqual(again, sf) {
			t.Fatalf("%q taken as %+v; written as %q it reads as %+v, %v", data, sf, out, again, err)
		}
	})
}
