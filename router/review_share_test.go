package router

import (
	"context"
	"crypto/tls"
	"net"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A node that hangs while no key of its shard has failed yet (the
// heartbeat's shard, paused, while another shard is already unhealthy) is
// not known to be down, so a read of the slot map may ask it first. The
// read is bounded by its deadline even while another call redials the
// node (rueidis's own, on no deadline), which rueidis makes every call to
// the node wait for, until its dial timeout (1s): seen with two sluice
// binaries, each read of the outage's slot map, and the probes after it,
// waited 0.5 to 0.95 s.
func TestReviewShareSlotReadBoundedWhileNodeRedials(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	srv.SysProcAttr = clustertest.DieWithParent()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var paused atomic.Bool
	dialing := make(chan struct{}, 1)
	var client rueidis.Client
	for deadline := time.Now().Add(5 * time.Second); ; {
		client, err = rueidis.NewClient(rueidis.ClientOption{
			InitAddress:  []string{addr},
			DisableCache: true,
			// Shorter than sluice's (1s), for a fast test.
			Dialer: net.Dialer{Timeout: 500 * time.Millisecond},
			DialCtxFn: func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
				if paused.Load() {
					select {
					case dialing <- struct{}{}:
					default:
					}
				}
				return d.DialContext(ctx, "tcp", dst)
			},
		})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(client.Close)
	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGCONT) })
	paused.Store(true)
	nodes := map[string]rueidis.Client{addr: client}
	const bound = 100 * time.Millisecond
	read := func(what string) {
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		defer cancel()
		start := time.Now()
		_, _, err := readSlots(ctx, client, nodes, nil, nil, bound)
		if took := time.Since(start); took > 3*bound {
			t.Fatalf("%s of the slot map took %v with its node paused, bounded by %v", what, took.Round(time.Millisecond), bound)
		}
		if err == nil {
			t.Fatalf("%s of a paused node's slot map answered", what)
		}
	}
	// A call on a deadline that the node misses breaks the connection.
	breaking, cancel := context.WithTimeout(t.Context(), bound)
	client.Do(breaking, client.B().Ping().Build())
	cancel()
	redialing, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		client.Do(redialing, client.B().Ping().Build())
	}()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-dialing:
	case <-time.After(5 * time.Second):
		t.Fatal("the node was not redialed")
	}
	read("a read during another call's redial")
}
