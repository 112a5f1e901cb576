// Command loadgen drives an agent-backend daemon (ours or the reference) and
// measures it. bench/compare.sh runs it; see docs/performance.md.
//
//	loadgen run -name NAME -round N -out FILE [-smoke] [-logs DIR] -- CMD ARGS...
//	    start CMD fresh ({root} and {port} in ARGS are replaced by a new
//	    temporary workspace and a free loopback port), measure every metric
//	    once, stop it, write the figures as JSON to FILE
//	loadgen floors -out FILE [-smoke]
//	    measure the floors (plain net/http JSON-RPC, fork/exec, bare bwrap,
//	    the sandbox executor in each mode)
//	loadgen features -round N -out FILE [-smoke] [-logs DIR] -- CMD ARGS...
//	    start CMD (our daemon with every optional feature on, its upstream
//	    `loadgen echo-mcp-stdio`; {sshport} is a second free port) fresh
//	    and measure what only it serves: RSS at ready, the routed upstream
//	    call and a GET through /preview/, each beside the same call made
//	    without the daemon (features.go)
//	loadgen echo-serve FILE
//	    the echo floor as a process of its own (started by floors)
//	loadgen echo-mcp-stdio
//	    a minimal MCP server on stdio (one tool, echo): the upstream of the
//	    features round, and its floor
//	loadgen http-serve
//	    a loopback HTTP server answering a small body, printing
//	    "listening on PORT": the workspace server of the preview figure
//	loadgen report [-a ours] [-b reference] [-smoke] FILE...
//	    print the comparison table: medians over rounds, ratios, targets
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = cmdRun(os.Args[2:])
	case "floors":
		err = cmdFloors(os.Args[2:])
	case "report":
		err = cmdReport(os.Args[2:])
	case "echo-serve":
		err = cmdEchoServe(os.Args[2:])
	case "features":
		err = cmdFeatures(os.Args[2:])
	case "echo-mcp-stdio":
		err = cmdEchoMCPStdio(os.Args[2:])
	case "http-serve":
		err = cmdHTTPServe(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: loadgen run|floors|features|report|echo-serve|echo-mcp-stdio|http-serve ... (see the package comment)")
	os.Exit(2)
}

func cmdRun(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	name := fs.String("name", "", "daemon name in the table (ours, reference)")
	round := fs.Int("round", 0, "round number")
	out := fs.String("out", "", "write the figures here (JSON)")
	smoke := fs.Bool("smoke", false, "tiny counts: checks that everything works, measures nothing")
	logs := fs.String("logs", os.TempDir(), "directory for the daemon's log")
	idle := fs.Int("idle", 0, "idle connections for the RSS figure (0 = the mode's default)")
	fs.Parse(args)
	argv := fs.Args()
	if *name == "" || *out == "" || len(argv) == 0 {
		return fmt.Errorf("run: -name, -out and a command are required")
	}
	sz := fullSizes
	if *smoke {
		sz = smokeSizes
	}
	if *idle > 0 {
		sz.idle = *idle
	}
	res, err := runRound(*name, *round, argv, sz, *logs)
	if err != nil {
		return fmt.Errorf("%s round %d: %w", *name, *round, err)
	}
	return writeJSON(*out, res)
}

func cmdFloors(args []string) error {
	fs := flag.NewFlagSet("floors", flag.ExitOnError)
	out := fs.String("out", "", "write the figures here (JSON)")
	round := fs.Int("round", 0, "round number")
	smoke := fs.Bool("smoke", false, "tiny counts")
	fs.Parse(args)
	if *out == "" {
		return fmt.Errorf("floors: -out is required")
	}
	sz := fullSizes
	if *smoke {
		sz = smokeSizes
	}
	m, notes, err := runFloors(sz)
	if err != nil {
		return fmt.Errorf("floors: %w", err)
	}
	return writeJSON(*out, &roundResult{Name: "floors", Round: *round, Metrics: m, Notes: notes})
}

func cmdFeatures(args []string) error {
	fs := flag.NewFlagSet("features", flag.ExitOnError)
	round := fs.Int("round", 0, "round number")
	out := fs.String("out", "", "write the figures here (JSON)")
	smoke := fs.Bool("smoke", false, "tiny counts")
	logs := fs.String("logs", os.TempDir(), "directory for the daemon's log")
	fs.Parse(args)
	argv := fs.Args()
	if *out == "" || len(argv) == 0 {
		return fmt.Errorf("features: -out and a command are required")
	}
	sz := fullSizes
	if *smoke {
		sz = smokeSizes
	}
	res, err := runFeatures(argv, sz, *logs, *round)
	if err != nil {
		return fmt.Errorf("features round %d: %w", *round, err)
	}
	return writeJSON(*out, res)
}

func cmdReport(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	a := fs.String("a", "ours", "the daemon under test")
	b := fs.String("b", "reference", "the daemon it is compared with")
	smoke := fs.Bool("smoke", false, "print no pass/fail")
	fs.Parse(args)
	return report(os.Stdout, fs.Args(), *a, *b, !*smoke)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
