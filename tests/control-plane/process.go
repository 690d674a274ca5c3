// Child processes of the launcher: each component runs as this same binary in another role, in
// its own process group, killed by the kernel if the launcher dies, with its output in a log file.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before its whole process group
// is killed: the apiserver drains its requests and watches, which takes a few seconds at most.
const stopGrace = 30 * time.Second

// probeInterval is how often readiness is polled: a start takes seconds, so a quarter second
// adds little to it while keeping the probes too few to load the component.
const probeInterval = 250 * time.Millisecond

// logTailLines is how much of a failed component's log goes into the error: enough for the
// fatal message and the few lines that lead to it.
const logTailLines = 40

// errPortTaken marks a start that failed because another process had bound the port.
var errPortTaken = errors.New("a port was taken")

// component is one running (or stopped) child process.
type component struct {
	name    string
	args    []string
	logPath string
	cmd     *exec.Cmd
	// exited is closed once the process has been reaped; exitErr is its result.
	exited  chan struct{}
	exitErr error
	// stopping is set while the launcher itself stops the process, so its exit is expected.
	stopping bool
	// logStart is the log's size when this start began: the log is appended to on every
	// start (a retry, a restart), and a failure is judged by this start's lines only.
	logStart int64
}

func newComponent(name, logPath string, args []string) *component {
	return &component{name: name, args: args, logPath: logPath}
}

// start launches the component as `self name args...`.
func (c *component) start(self string) error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s log %s: %w", c.name, c.logPath, err)
	}
	c.logStart = 0
	if info, err := logFile.Stat(); err == nil {
		c.logStart = info.Size()
	}
	fmt.Fprintf(logFile, "==== wasmop launcher: starting %s at %s\n", c.name, time.Now().Format(time.RFC3339))
	cmd := exec.Command(self, append([]string{c.name}, c.args...)...)
	cmd.Stdin = nil
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group, so stopping it reaches anything it spawned, and a Ctrl-C in the
		// launcher's terminal reaches only the launcher, which then stops everything in order.
		Setpgid: true,
		// If the launcher dies without stopping it (SIGKILL), the kernel kills it.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", c.name, err)
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	c.exitErr = nil
	c.stopping = false
	go func() {
		err := cmd.Wait()
		logFile.Close()
		c.exitErr = err
		close(c.exited)
	}()
	return nil
}

// running tells whether the process was started and has not exited.
func (c *component) running() bool {
	if c.cmd == nil {
		return false
	}
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

func (c *component) pid() int {
	if !c.running() {
		return 0
	}
	return c.cmd.Process.Pid
}

// stop sends SIGTERM to the component's process group, and SIGKILL after stopGrace.
func (c *component) stop() {
	if !c.running() {
		return
	}
	c.stopping = true
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.exited
	}
	// Anything the component left in its group goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// waitReady polls url until it answers 200 OK, the component exits, or timeout passes.
func (c *component) waitReady(ctx context.Context, client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		status, err := probe(ctx, client, url)
		if err == nil && status == "" {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = status
		}
		select {
		case <-c.exited:
			tail := c.logTail()
			err := fmt.Errorf("%s exited before it was ready (%v); last lines of %s:\n%s",
				c.name, c.exitErr, c.logPath, tail)
			if strings.Contains(tail, "address already in use") {
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("start of %s interrupted: %w", c.name, context.Cause(ctx))
			}
			return fmt.Errorf("%s was not ready at %s within %s (last answer: %s); last lines of %s:\n%s",
				c.name, url, timeout, last, c.logPath, c.logTail())
		case <-time.After(probeInterval):
		}
	}
}

// probe returns "" when url answers 200 OK, else a description of the answer.
func probe(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusOK {
		return "", nil
	}
	return fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body))), nil
}

// logTail returns the last logTailLines lines of the component's log.
func (c *component) logTail() string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	// Only this start's lines: an earlier start's "address already in use" must not make a
	// different failure look like a taken port.
	if c.logStart <= int64(len(data)) {
		data = data[c.logStart:]
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// httpClient returns a client that trusts tlsConfig, for readiness probes.
func httpClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{
		// A single probe must not hang on a component that accepted but never answers.
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true},
	}
}

// freePort picks an unused loopback port below the kernel's ephemeral range. A port the kernel
// hands out for "port 0" comes from that range, which is also where every outgoing connection
// gets its local port: between picking such a port and the component binding it, one of the
// connections that start-up itself opens (the apiserver to etcd, the probes) can take it.
// Below the range only explicit listeners compete, and a taken port is detected by binding it
// here (and, should another listener win the moments after, by the launcher's retry).
func freePort() (int, error) {
	low := ephemeralLow()
	const floor = 10000
	if low <= floor+1000 {
		return 0, fmt.Errorf("the ephemeral port range starts at %d: no room for fixed loopback ports below it", low)
	}
	for tries := 0; tries < 200; tries++ {
		port := floor + rand.IntN(low-floor)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port between %d and %d after 200 tries", floor, low)
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when it cannot be read).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return low
}
