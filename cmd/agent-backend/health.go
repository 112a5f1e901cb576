package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbe/agentbe-daemon/internal/cafile"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
)

// healthClient is the probe's client: the system roots, the CA of --ca
// (internal/cafile), or no verification.
func healthClient(ca string, insecure bool) (*http.Client, error) {
	if ca == "" && !insecure {
		return http.DefaultClient, nil
	}
	cfg, err := cafile.Config(ca)
	if err != nil {
		return nil, err
	}
	if insecure {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		cfg.InsecureSkipVerify = true //nolint:gosec // --insecure is the user's explicit choice
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// newHealthCommand probes a daemon's /health, for container health checks on
// images without curl. Exit 0 means the daemon answered 200 with status "ok".
// With --token-file it sends the token, and a daemon that takes it answers
// its details (isolation, providers, upstream servers) besides liveness.
func newHealthCommand() *cobra.Command {
	var url, ca, tokenFile string
	var port int
	var insecure bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Probe a daemon's /health; exit 0 when it is healthy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("port") {
				if cmd.Flags().Changed("url") {
					return errors.New("--port and --url go separately: --port N probes http://127.0.0.1:N/health")
				}
				if port < 1 || port > 65535 {
					return fmt.Errorf("--port %d: want 1-65535", port)
				}
				url = fmt.Sprintf("http://127.0.0.1:%d/health", port)
			}
			client, err := healthClient(ca, insecure)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return fmt.Errorf("--url %q: %v", url, err)
			}
			if tokenFile != "" {
				// Not a FIFO (it would hold the probe), nor more than a token.
				tok, err := opfile.ReadRegular(tokenFile, opfile.MaxTokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %v", err)
				}
				if strings.TrimSpace(string(tok)) == "" {
					return fmt.Errorf("--token-file %s is empty", tokenFile)
				}
				req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
			}
			resp, err := client.Do(req)
			if err != nil {
				if cafile.Untrusted(err) && ca == "" && !insecure {
					return fmt.Errorf("unhealthy: %v (a daemon whose certificate this machine does not trust: --ca FILE names the CA that signed it, --insecure skips the check)", err)
				}
				return fmt.Errorf("unhealthy: %v", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			var h struct {
				Status  string          `json:"status"`
				Backend json.RawMessage `json:"backend"` // one of the details: absent from a liveness-only answer
			}
			if resp.StatusCode == http.StatusBadRequest && strings.HasPrefix(url, "http://") && strings.Contains(string(body), "HTTP request to an HTTPS server") {
				// --port builds an http:// URL; a daemon with --tls-cert
				// answers it so.
				return fmt.Errorf("unhealthy: %s answered %s: the daemon serves HTTPS (--tls-cert): probe --url https://%s (with --ca FILE or --insecure for a certificate this machine does not trust)",
					url, resp.Status, strings.TrimPrefix(url, "http://"))
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.Status != "ok" {
				return fmt.Errorf("unhealthy: %s answered %s: %.200s", url, resp.Status, body)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", body)
			if tokenFile != "" && h.Backend == nil {
				// Healthy all the same: liveness is what the exit status says.
				fmt.Fprintf(cmd.ErrOrStderr(), "agent-backend health: the daemon answered liveness only: it did not take the token in --token-file %s (not the token it serves with, or one rotated out since: see docs/configuration.md#rotating-a-token)\n", tokenFile)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:3001/health", "the daemon's health URL")
	cmd.Flags().IntVar(&port, "port", 0, "probe http://127.0.0.1:PORT/health (instead of --url)")
	cmd.Flags().StringVar(&ca, "ca", "", "PEM file of the CA that signed the daemon's certificate (for an https URL with --tls-cert)")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "do not verify the daemon's certificate (a self-signed one)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "send the token in this file, for /health's details beside liveness")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}
