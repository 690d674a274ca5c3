// Package hostile is the hostile test plugin in Go (the Go counterpart of tests/hostile/*
// and tests/python/hostile): its reconcile attacks the host in the way the target object's
// name says, so one component (~5 MB, seconds to compile with Winch) carries every
// attack. Each must end in its typed outcome while a healthy Go plugin beside it keeps
// reconciling (tests/go/tests/hostile.rs); any other name reconciles as a harmless no-op.
//
// The sandbox attacks (read-file ... environ) use the standard library as a Go author would;
// the host links WASI with no files, sockets or environment, so each fails inside Go as an
// ordinary error, which the plugin returns as a reconcile would.
package hostile

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"

	"wasmop.dev/wasmop"
)

// TargetKind is the primary kind.
var TargetKind = wasmop.Kind{Group: "wasmop.test", Version: "v1", Kind: "Target", Namespaced: true}

// Target is the object whose name picks the attack.
type Target struct {
	wasmop.TypeMeta
	wasmop.ObjectMeta `json:"metadata"`
}

// Hostile is the reconciler.
type Hostile struct {
	wasmop.NoCleanup[*Target]
}

func init() { wasmop.Register[*Target](Hostile{}) }

// Describe declares a Target reconciler.
func (Hostile) Describe() wasmop.Info {
	return wasmop.NewInfo("go-hostile", "0.1.0", TargetKind)
}

// attacks maps a target's name to its attack; an attack that returns at all returns the
// error the reconcile ends with.
var attacks = map[string]func(name string) error{
	"infinite-loop":      loop,
	"memory-bomb":        hoard,
	"garbage":            churn,
	"recursion":          recurse,
	"wide-recursion":     recurseWide,
	"panic":              throw,
	"nil-pointer":        dereference,
	"index-out-of-range": index,
	"goroutine-panic":    throwElsewhere,
	"goroutine-leak":     leak,
	"goroutine-hog":      hog,
	"goroutine-deadlock": deadlock,
	"goexit":             goexit,
	"os-exit":            exit,
	"os-exit-zero":       exitZero,
	"read-file":          readFile,
	"write-file":         writeFile,
	"list-root":          listRoot,
	"connect":            connect,
	"resolve":            resolve,
	"environ":            environ,
	"free-heap":          freeHeap,
}

// Reconcile attacks as the target's name says.
func (Hostile) Reconcile(_ *wasmop.Context, t *Target) (wasmop.Action, error) {
	if attack, ok := attacks[t.Name]; ok {
		if err := attack(t.Name); err != nil {
			return wasmop.Done(), err
		}
	}
	return wasmop.Done(), nil
}

// spins is written by spin, so that its loop does something.
var spins uint64

func spin() {
	for {
		spins++
	}
}

func loop(string) error {
	spin()
	return nil
}

// hoarded keeps every chunk reachable, so Go's GC can free none of it.
var hoarded [][]byte

// touched is a MiB with one byte written in each 4 KiB page: memory used, not just reserved.
func touched() []byte {
	chunk := make([]byte, 1<<20)
	for i := 0; i < len(chunk); i += 4 << 10 {
		chunk[i] = 1
	}
	return chunk
}

func hoard(string) error {
	for {
		hoarded = append(hoarded, touched())
	}
}

// kept holds the last chunk churn made; every earlier one is garbage.
var kept []byte

// churn allocates 96 MiB, one and a half times the memory cap, keeping one MiB at a time:
// it fits only because Go's GC frees the chunks it dropped.
func churn(string) error {
	for range 96 {
		kept = touched()
	}
	return nil
}

func descend(depth int) int { return descend(depth+1) + 1 }

func recurse(string) error {
	descend(0)
	return nil
}

// descendWide recurses with 16 KiB frames: Go's goroutine stack (in linear memory) grows
// by copying, doubling each time, much faster than the wasm stack.
func descendWide(depth int) byte {
	var frame [16 << 10]byte
	frame[depth%len(frame)] = byte(depth)
	return descendWide(depth+1) + frame[(depth*7)%len(frame)]
}

func recurseWide(string) error {
	descendWide(0)
	return nil
}

func throw(string) error { panic("hostile Go plugin panicked on purpose") }

// dereference reads a field through the nil pointer a missing map entry gives.
func dereference(name string) error {
	found := map[string]*Target{}
	return fmt.Errorf("found %s", found[name].Name)
}

// index reads past the end of a slice, at an index the compiler cannot check.
func index(name string) error {
	items := []string{"a", "b", "c"}
	return fmt.Errorf("found %s", items[len(name)])
}

func explodeInGoroutine() { panic("hostile Go plugin panicked in a goroutine") }

// throwElsewhere panics in a goroutine of its own, where the SDK's recover cannot reach,
// and waits so that it runs.
func throwElsewhere(string) error {
	never := make(chan struct{})
	go explodeInGoroutine()
	<-never
	return nil
}

// leak starts goroutines that block forever or spin, and returns without waiting.
func leak(string) error {
	block := make(chan struct{})
	for range 100 {
		go func() { <-block }()
		go func() { select {} }()
		go spin()
	}
	return nil
}

// hog starts a spinning goroutine and yields to it once.
func hog(string) error {
	go spin()
	runtime.Gosched()
	return nil
}

// deadlock waits for a goroutine that never finishes.
func deadlock(string) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { select {} }()
	wg.Wait()
	return nil
}

// goexit ends the goroutine the call runs on, after running its deferred calls (the SDK's
// recover among them, which sees no panic).
func goexit(string) error {
	runtime.Goexit()
	return nil
}

func exit(string) error {
	os.Exit(3)
	return nil
}

// exitZero exits with success halfway through a reconcile.
func exitZero(string) error {
	os.Exit(0)
	return nil
}

// escaped is the error of an attack the sandbox let through.
func escaped(what string, args ...any) error {
	return fmt.Errorf("escaped the sandbox: "+what, args...)
}

func readFile(string) error {
	data, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return err
	}
	return escaped("read %d bytes of /etc/passwd", len(data))
}

func writeFile(string) error {
	if err := os.WriteFile("/tmp/wasmop-hostile", []byte("escaped"), 0o600); err != nil {
		return err
	}
	return escaped("wrote /tmp/wasmop-hostile")
}

func listRoot(string) error {
	entries, err := os.ReadDir("/")
	if err != nil {
		return err
	}
	return escaped("listed %d entries of /", len(entries))
}

// connect dials the loopback of the host's node (an address, so no name lookup comes first).
func connect(string) error {
	conn, err := net.Dial("tcp", "127.0.0.1:6443")
	if err != nil {
		return err
	}
	conn.Close()
	return escaped("connected to 127.0.0.1:6443")
}

// resolve looks up the API server's name inside a cluster.
func resolve(string) error {
	addrs, err := net.LookupHost("kubernetes.default.svc")
	if err != nil {
		return err
	}
	return escaped("resolved kubernetes.default.svc to %v", addrs)
}

// environ reports the environment: an empty one is the finding.
func environ(string) error {
	return fmt.Errorf("environment: %q", os.Environ())
}

// freeHeap is no attack: it reports the heap Go's runtime holds free as the reconcile starts,
// which the SDK's pre-initialised snapshot leaves for the calls (guest-sdk/go/headroom.go).
func freeHeap(string) error {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(sample)
	return fmt.Errorf("free heap: %d bytes", sample[0].Value.Uint64())
}
