package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentbe/agentbe-daemon/tools/extensions"
)

func newExtCommand(stdout, stderr io.Writer) *cobra.Command {
	ext := &cobra.Command{
		Use:     "ext",
		Aliases: []string{"extensions"},
		Short:   "Check, test and serve Starlark extensions (the --extensions directory)",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var run string
	var verbose bool
	test := &cobra.Command{
		Use:   "test DIR",
		Short: "Run the test_* functions of every *_test.star file in DIR, like go test",
		Long: `Run the test_* functions of every *_test.star file in DIR, each in a fresh
thread with the testing module (eq, ne, is_true, is_false, contains, fails)
and a fresh temporary workspace for fs and exec. A test file goes with the
extension of the same stem (notes_test.star with notes.star), whose
allowed_exec and env apply, and can load() the directory's other files.
Exit status 1 when a test fails.`,
		Example: "  agent-backend ext test examples/extensions\n  agent-backend ext test examples/extensions --run 'notes_test.star:test_save'",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ok, err := extensions.RunTests(cmd.Context(), extensions.TestOptions{Dir: args[0], Run: run, Verbose: verbose, Out: stdout})
			if err != nil {
				return err
			}
			if !ok {
				return exitError{1}
			}
			return nil
		},
	}
	test.Flags().StringVar(&run, "run", "", "only the tests whose name (or file.star:name) matches this regexp")
	test.Flags().BoolVarP(&verbose, "verbose", "v", false, "list passing tests too")
	check := &cobra.Command{
		Use:   "check DIR",
		Short: "Load every extension in DIR and report every error with file:line; exit 1 if any",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			errs, tools, err := extensions.Check(args[0])
			if err != nil {
				return err
			}
			for _, e := range errs {
				fmt.Fprintln(stderr, shown(e.Error(), false)) // one line each
			}
			if len(errs) > 0 {
				return exitError{1}
			}
			fmt.Fprintf(stdout, "ok\t%s\t%d tools\n", args[0], tools)
			return nil
		},
	}
	ext.AddCommand(test, check, newExtServeCommand())
	return ext
}
