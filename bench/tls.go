package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// writeCerts makes a CA and certificates signed by it in -certs, for make
// bench to serve TLS with: made on the spot, never committed.
func writeCerts(cfg config, out io.Writer) error {
	if err := os.MkdirAll(cfg.certs, 0o700); err != nil {
		return err
	}
	c, err := clustertest.WriteCerts(cfg.certs)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "certificates in %s: CA %s, server %s, client %s\n", c.Dir, filepath.Base(c.CAFile), filepath.Base(c.CertFile), filepath.Base(c.ClientCertFile))
	return nil
}

// tlsRows compare sluice over TLS (-tls-addr, with -tls-dir's client
// certificate) with sluice over plain RESP, on the same process: the
// "direct" run of each row is the plain one.
func tlsRows(cfg config, id string) ([]*neutralRow, error) {
	plainHost, plainPort, err := net.SplitHostPort(cfg.addr)
	if err != nil {
		return nil, err
	}
	tlsHost, tlsPort, err := net.SplitHostPort(cfg.tlsAddr)
	if err != nil {
		return nil, err
	}
	dir := cfg.tlsDir
	secure := []string{"-h", tlsHost, "-p", tlsPort, "--tls", "--cacert", filepath.Join(dir, "ca.crt"),
		"--cert", filepath.Join(dir, "client.crt"), "--key", filepath.Join(dir, "client.key")}
	plain := []string{"-h", plainHost, "-p", plainPort}
	clients, keys := strconv.Itoa(cfg.clients), strconv.Itoa(cfg.keys.n)
	capacity, refill := strconv.FormatInt(cfg.lim.capacity, 10), strconv.FormatInt(cfg.lim.refill, 10)
	cost := strconv.FormatInt(cfg.lim.cost, 10)
	var rows []*neutralRow
	for _, p := range []int{1, 16} {
		row := "t" + strconv.Itoa(p)
		args := []string{"-c", clients, "-P", strconv.Itoa(p), "-r", keys,
			"THROTTLE", id + ":" + row + ":__rand_int__", capacity, refill, cfg.lim.period, cost}
		name := fmt.Sprintf("THROTTLE, %d clients", cfg.clients)
		if p > 1 {
			name += fmt.Sprintf(", -P %d", p)
		}
		rows = append(rows, &neutralRow{name: name, clients: cfg.clients, pipe: p, served: decisionsServed,
			direct: append(append([]string{}, plain...), args...), sluice: append(append([]string{}, secure...), args...)})
	}
	get := []string{"-c", clients, "-r", keys, "-t", "get"}
	rows = append(rows, &neutralRow{name: fmt.Sprintf("GET, %d clients", cfg.clients), clients: cfg.clients, pipe: 1, served: getsServed,
		direct: append(append([]string{}, plain...), get...), sluice: append(append([]string{}, secure...), get...)})
	return rows, nil
}

// runTLS runs and prints the TLS rows.
func (nt *neutral) runTLS(ctx context.Context, id string, out io.Writer) error {
	rows, err := tlsRows(nt.cfg, id)
	if err != nil {
		return err
	}
	for _, row := range rows {
		if err := nt.runRow(ctx, row); err != nil {
			return fmt.Errorf("TLS %s: %w", row.name, err)
		}
	}
	fmt.Fprintf(out, "\nTLS: the same sluice over TLS (%s, client certificates required) against plain RESP (%s); TLS clients are served on goroutines, plain ones on the event loops\n", nt.cfg.tlsAddr, nt.cfg.addr)
	fmt.Fprintf(out, "%-28s  %11s  %10s  %6s  %14s  %14s  %16s\n", "row", "plain req/s", "TLS req/s", "ratio", "p50 plain/TLS", "p99 plain/TLS", "sluice cpu/op µs")
	for _, r := range rows {
		fmt.Fprintf(out, "%-28s  %11.0f  %10.0f  %5.2fx  %6.0f/%-7.0f  %6.0f/%-7.0f  %7.1f/%-7.1f\n", r.name, r.d.res.rps, r.s.res.rps, r.ratio(),
			r.d.res.p50*1e3, r.s.res.p50*1e3, r.d.res.p99*1e3, r.s.res.p99*1e3, r.d.cost.sluice, r.s.cost.sluice)
		for _, n := range []string{r.d.note, r.s.note} {
			if n != "" {
				fmt.Fprintf(out, "note: %s: %s\n", r.name, n)
			}
		}
	}
	return nil
}
