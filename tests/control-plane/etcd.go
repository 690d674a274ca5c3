// The etcd role: a single-member etcd server from go.etcd.io/etcd/server/v3/embed, run in its
// own process so that the apiserver can be stopped and restarted while the data stays.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// etcdStartTimeout bounds how long the member may take to become ready: a fresh single member
// elects itself in well under a second, but a loaded 2-core CI machine can stall for a while.
const etcdStartTimeout = 2 * time.Minute

func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "directory for etcd's data (required)")
	clientURL := fs.String("listen-client-url", "", "client URL, e.g. http://127.0.0.1:2379 (required)")
	peerURL := fs.String("listen-peer-url", "", "peer URL, e.g. http://127.0.0.1:2380 (required)")
	fsync := fs.Bool("fsync", false, "fsync writes; off by default because test data is disposable")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := serveEtcd(*dataDir, *clientURL, *peerURL, *fsync); err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	return 0
}

func serveEtcd(dataDir, clientURL, peerURL string, fsync bool) error {
	if dataDir == "" || clientURL == "" || peerURL == "" {
		return fmt.Errorf("--data-dir, --listen-client-url and --listen-peer-url are required")
	}
	client, err := url.Parse(clientURL)
	if err != nil {
		return fmt.Errorf("invalid --listen-client-url %q: %w", clientURL, err)
	}
	peer, err := url.Parse(peerURL)
	if err != nil {
		return fmt.Errorf("invalid --listen-peer-url %q: %w", peerURL, err)
	}

	cfg := embed.NewConfig()
	cfg.Name = "wasmop"
	cfg.Dir = dataDir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = !fsync
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"stderr"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting etcd in %s: %w", dataDir, err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", clientURL)
	case <-time.After(etcdStartTimeout):
		e.Server.Stop()
		return fmt.Errorf("etcd did not become ready within %s", etcdStartTimeout)
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	select {
	case sig := <-signals:
		fmt.Fprintf(os.Stderr, "etcd: stopping on %s\n", sig)
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd server failed: %w", err)
	}
}
