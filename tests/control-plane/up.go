// The `up` role: the launcher. It prepares a run directory (PKI, kubeconfigs), starts etcd,
// kube-apiserver and kube-controller-manager as child processes on free loopback ports, waits
// until each is ready, writes state.json, and then serves line commands on stdin until
// `shutdown`, end of input, or SIGINT/SIGTERM/SIGHUP, when it stops everything it started.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// readyTimeout bounds each component's start. A cold kube-apiserver installs its bootstrap
// RBAC policy and priority levels before /readyz passes: seconds on an idle machine, but much
// longer on a 2-core machine busy compiling, and a false failure costs a whole test run.
const readyTimeout = 3 * time.Minute

// portAttempts is how often start-up is tried with fresh ports when a component finds its port
// taken: a port is free when picked but another process may bind it before the component does,
// which happens rarely, so a few attempts make it vanishingly unlikely.
const portAttempts = 3

// serviceClusterIPRange is required by kube-apiserver; no traffic ever goes there, it only
// allocates the `kubernetes` Service's address (clusterServiceIP).
const serviceClusterIPRange = "10.0.0.0/24"

// controllers are the kube-controller-manager controllers that make the API behave like a real
// cluster for wasmop: cascade deletion, namespace deletion, and each namespace's `default`
// ServiceAccount. Nothing that needs nodes or pods.
var controllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
}

// launcher owns the run directory and the three components.
type launcher struct {
	dir      string
	self     string
	human    bool
	ca       *authority
	ports    ports
	etcd     *component
	api      *component
	kcm      *component
	apiProbe *clientTLS
	// Flags given with --apiserver-arg and --controller-manager-arg, appended to ours.
	extraAPIServerArgs         []string
	extraControllerManagerArgs []string
}

// repeatedFlag collects every value of a flag given several times.
type repeatedFlag []string

func (r *repeatedFlag) String() string     { return strings.Join(*r, " ") }
func (r *repeatedFlag) Set(v string) error { *r = append(*r, v); return nil }

type ports struct {
	EtcdClient        int `json:"etcd_client"`
	EtcdPeer          int `json:"etcd_peer"`
	APIServer         int `json:"kube_apiserver"`
	ControllerManager int `json:"kube_controller_manager"`
}

// clientTLS is the admin identity the launcher probes the apiserver with.
type clientTLS struct{ config *tls.Config }

// state is what state.json holds and what `up` prints when ready (one JSON line in json mode).
type state struct {
	Dir               string         `json:"dir"`
	Kubeconfig        string         `json:"kubeconfig"`
	Server            string         `json:"server"`
	CAFile            string         `json:"ca_file"`
	LauncherPID       int            `json:"launcher_pid"`
	KubernetesVersion string         `json:"kubernetes_version"`
	Ports             ports          `json:"ports"`
	Etcd              componentState `json:"etcd"`
	APIServer         componentState `json:"kube_apiserver"`
	ControllerManager componentState `json:"kube_controller_manager"`
}

type componentState struct {
	URL string `json:"url"`
	// PID is 0 while the component is stopped.
	PID int    `json:"pid"`
	Log string `json:"log"`
}

func runUp(args []string) int {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	dir := fs.String("dir", "", "run directory; created if missing, reused (PKI and etcd data) if it exists; default: a new temporary directory")
	output := fs.String("output", "human", `"human": print an export KUBECONFIG line; "json": print one JSON line per event (for programs)`)
	removeOnExit := fs.Bool("remove-on-exit", false, "delete the run directory when stopping")
	noStdin := fs.Bool("no-stdin", false, "do not read commands from stdin (stop with SIGINT/SIGTERM only)")
	var apiserverArgs, controllerManagerArgs repeatedFlag
	fs.Var(&apiserverArgs, "apiserver-arg", "extra kube-apiserver flag, e.g. --apiserver-arg=--feature-gates=X=true (repeatable; later flags win)")
	fs.Var(&controllerManagerArgs, "controller-manager-arg", "extra kube-controller-manager flag (repeatable; later flags win)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: wasmop-control-plane up [flags]

Commands on stdin, one per line, each answered with one JSON line on stdout:
  stop-apiserver               stop kube-apiserver (etcd keeps the data)
  start-apiserver              start kube-apiserver again on the same port and wait for /readyz
  mint-user USER [GROUP,...]   write a kubeconfig for a client-certificate identity
  state                        print the state
  shutdown                     stop everything and exit (end of input does the same)

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *output != "human" && *output != "json" {
		fmt.Fprintf(os.Stderr, "up: --output must be human or json, not %q\n", *output)
		return 2
	}
	l := &launcher{human: *output == "human", extraAPIServerArgs: apiserverArgs, extraControllerManagerArgs: controllerManagerArgs}

	// Signals are caught from the start, so a Ctrl-C during start-up still stops what started.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// The reader of our stdout (a test process) may be gone; a failed write must not kill us
	// before the children are stopped.
	signal.Ignore(syscall.SIGPIPE)

	commands, stdinClosed := make(chan string, commandQueue), make(chan struct{})
	if !*noStdin {
		go readCommands(commands, stdinClosed)
	}
	ctx, stopWatching := watchStartUp(signals, stdinClosed)
	err := l.prepare(*dir)
	for attempt := 1; err == nil; attempt++ {
		if err = l.assignPorts(); err != nil {
			break
		}
		err = l.startAll(ctx)
		if err == nil || attempt == portAttempts || !errors.Is(err, errPortTaken) {
			break
		}
		l.stopAll()
		fmt.Fprintf(os.Stderr, "wasmop-control-plane: %v\nretrying with other ports\n", err)
		// The loop runs while err is nil: without this, the "retry" ended the loop and the
		// port-taken error was reported as the start-up's failure.
		err = nil
	}
	if cause := stopWatching(); err == nil && cause != nil {
		err = fmt.Errorf("stopped during start-up: %w", cause)
	}
	if err != nil {
		l.stopAll()
		l.fail(err)
		l.cleanup(*removeOnExit)
		return 1
	}
	l.announce()

	code := l.serve(commands, signals)
	l.stopAll()
	l.cleanup(*removeOnExit)
	return code
}

// commandQueue is how many commands may wait while start-up runs: a person may type a few, a
// program sends none before the ready line.
const commandQueue = 64

// readCommands sends each stdin line to commands; at end of input it closes closed (which
// start-up watches) and commands (which serve drains first).
func readCommands(commands chan<- string, closed chan<- struct{}) {
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		commands <- scanner.Text()
	}
	close(closed)
	close(commands)
}

// errStdinClosed is why a start-up stops when its standard input ends: started in the
// background by a script, `up` gets /dev/null there, and a bare "interrupted" left the user
// guessing.
var errStdinClosed = errors.New("standard input closed: `up` reads commands from stdin and " +
	"stops at its end; to run it in the background, pass --no-stdin (and stop it with SIGTERM)")

// watchStartUp returns a context that is cancelled when a signal arrives or stdin closes, so a
// start-up that takes minutes stops at once; its cause (context.Cause) says which. stop ends
// the watch and returns that cause, or nil when it did not fire.
func watchStartUp(signals <-chan os.Signal, stdinClosed <-chan struct{}) (ctx context.Context, stop func() error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case sig := <-signals:
			fmt.Fprintf(os.Stderr, "wasmop-control-plane: stopping on %s\n", sig)
			cancel(fmt.Errorf("stopping on %s", sig))
		case <-stdinClosed:
			cancel(errStdinClosed)
		case <-done:
		}
	}()
	return ctx, func() error {
		close(done)
		<-finished
		if ctx.Err() == nil {
			return nil
		}
		return context.Cause(ctx)
	}
}

// serve answers commands until shutdown, end of input, or a signal; it returns the exit code.
func (l *launcher) serve(commands <-chan string, signals <-chan os.Signal) int {
	for {
		select {
		case sig := <-signals:
			fmt.Fprintf(os.Stderr, "wasmop-control-plane: stopping on %s\n", sig)
			return 0
		case line, ok := <-commands:
			if !ok {
				return 0
			}
			if done := l.handle(strings.Fields(line)); done {
				return 0
			}
		case <-l.etcd.exited:
			if !l.etcd.stopping {
				l.fail(fmt.Errorf("etcd exited unexpectedly (%v); last lines of %s:\n%s", l.etcd.exitErr, l.etcd.logPath, l.etcd.logTail()))
				return 1
			}
		case <-l.kcmExited():
			l.kcm.stopping = true // report once
			fmt.Fprintf(os.Stderr, "wasmop-control-plane: kube-controller-manager exited unexpectedly (%v); last lines of %s:\n%s\n",
				l.kcm.exitErr, l.kcm.logPath, l.kcm.logTail())
		}
	}
}

// kcmExited is the controller-manager's exit channel while its exit would be unexpected.
func (l *launcher) kcmExited() <-chan struct{} {
	if l.kcm.stopping {
		return nil
	}
	return l.kcm.exited
}

// handle runs one command and answers it; it returns true on shutdown.
func (l *launcher) handle(words []string) bool {
	if len(words) == 0 {
		return false
	}
	reply := map[string]any{"ok": true}
	var err error
	switch words[0] {
	case "stop-apiserver":
		l.api.stop()
	case "start-apiserver":
		err = l.startAPIServer(context.Background())
	case "mint-user":
		if len(words) < 2 || len(words) > 3 {
			err = fmt.Errorf("usage: mint-user USER [GROUP,...]")
			break
		}
		var groups []string
		if len(words) == 3 {
			groups = strings.Split(words[2], ",")
		}
		var path string
		path, err = l.mintUser(words[1], groups)
		reply["kubeconfig"] = path
	case "state":
		reply["state"] = l.state()
	case "help":
		reply["commands"] = []string{"stop-apiserver", "start-apiserver", "mint-user USER [GROUP,...]", "state", "shutdown"}
	case "shutdown":
		l.stopAll()
		l.reply(reply)
		return true
	default:
		err = fmt.Errorf("unknown command %q (known: stop-apiserver, start-apiserver, mint-user, state, help, shutdown)", words[0])
	}
	if err != nil {
		reply = map[string]any{"ok": false, "error": err.Error()}
	}
	l.reply(reply)
	if err == nil {
		l.writeState()
	}
	return false
}

// prepare creates the run directory, the PKI and the kubeconfigs, and picks the ports.
func (l *launcher) prepare(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locating own executable: %w", err)
	}
	l.self = self
	if dir == "" {
		dir, err = os.MkdirTemp("", "wasmop-control-plane-")
		if err != nil {
			return fmt.Errorf("creating a run directory: %w", err)
		}
	}
	if l.dir, err = filepath.Abs(dir); err != nil {
		return fmt.Errorf("resolving run directory %s: %w", dir, err)
	}
	for _, sub := range []string{"pki", "logs", "users"} {
		if err := os.MkdirAll(filepath.Join(l.dir, sub), 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Join(l.dir, sub), err)
		}
	}
	return l.preparePKI()
}

// assignPorts picks free ports and writes what names them: the kubeconfigs and the components'
// flags.
func (l *launcher) assignPorts() error {
	var err error
	for _, p := range []*int{&l.ports.EtcdClient, &l.ports.EtcdPeer, &l.ports.APIServer, &l.ports.ControllerManager} {
		if *p, err = freePort(); err != nil {
			return err
		}
	}
	if err := writeKubeconfig(l.path("admin.kubeconfig"), l.server(), l.ca, "wasmop-admin", []string{"system:masters"}); err != nil {
		return err
	}
	// The controller-manager's identity has its bootstrap RBAC role in every kube-apiserver.
	if err := writeKubeconfig(l.path("kube-controller-manager.kubeconfig"), l.server(), l.ca, "system:kube-controller-manager", nil); err != nil {
		return err
	}
	return l.buildComponents()
}

// preparePKI loads the CA and ServiceAccount keys of an earlier run in the same directory, so
// credentials minted then stay valid, or creates them; serving certificates are made fresh.
func (l *launcher) preparePKI() error {
	pki := l.path("pki")
	caCert, caKey := filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key")
	var err error
	if _, statErr := os.Stat(caKey); statErr == nil {
		if l.ca, err = loadAuthority(caCert, caKey); err != nil {
			return fmt.Errorf("reusing the CA of %s: %w", l.dir, err)
		}
	} else {
		if l.ca, err = newAuthority(); err != nil {
			return err
		}
		if err := l.ca.save(pki); err != nil {
			return err
		}
	}
	if _, statErr := os.Stat(filepath.Join(pki, "sa.key")); statErr != nil {
		if err := writeServiceAccountKeys(pki); err != nil {
			return err
		}
	}
	serving, err := l.ca.servingCert()
	if err != nil {
		return err
	}
	if err := serving.save(pki, "serving"); err != nil {
		return err
	}
	admin, err := l.ca.clientCert("wasmop-launcher", []string{"system:masters"})
	if err != nil {
		return err
	}
	clientCert, err := tls.X509KeyPair(admin.certPEM, admin.keyPEM)
	if err != nil {
		return fmt.Errorf("loading the launcher's client certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(l.ca.cert)
	l.apiProbe = &clientTLS{config: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12}}
	return nil
}

func (l *launcher) buildComponents() error {
	pki := func(name string) string { return filepath.Join(l.path("pki"), name) }
	l.etcd = newComponent("etcd", l.path("logs/etcd.log"), []string{
		"--data-dir=" + l.path("etcd-data"),
		"--listen-client-url=" + l.etcdURL(),
		fmt.Sprintf("--listen-peer-url=http://127.0.0.1:%d", l.ports.EtcdPeer),
	})
	l.api = newComponent("kube-apiserver", l.path("logs/kube-apiserver.log"), append([]string{
		"--etcd-servers=" + l.etcdURL(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", l.ports.APIServer),
		"--tls-cert-file=" + pki("serving.crt"),
		"--tls-private-key-file=" + pki("serving.key"),
		"--client-ca-file=" + pki("ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki("sa.pub"),
		"--service-account-signing-key-file=" + pki("sa.key"),
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		// The `kubernetes` Service's endpoints would point at loopback, which no pod could use;
		// there are no pods, so the reconciler is off.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}, l.extraAPIServerArgs...))
	l.kcm = newComponent("kube-controller-manager", l.path("logs/kube-controller-manager.log"), append([]string{
		"--kubeconfig=" + l.path("kube-controller-manager.kubeconfig"),
		"--authentication-kubeconfig=" + l.path("kube-controller-manager.kubeconfig"),
		"--authorization-kubeconfig=" + l.path("kube-controller-manager.kubeconfig"),
		// The apiserver has no front proxy, so there is no request-header CA to look up.
		"--authentication-skip-lookup=true",
		"--client-ca-file=" + pki("ca.crt"),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", l.ports.ControllerManager),
		"--tls-cert-file=" + pki("serving.crt"),
		"--tls-private-key-file=" + pki("serving.key"),
		"--controllers=" + strings.Join(controllers, ","),
		"--root-ca-file=" + pki("ca.crt"),
		"--service-account-private-key-file=" + pki("sa.key"),
		// Each controller acts as its own ServiceAccount with its bootstrap RBAC role, as in
		// kubeadm clusters; the controller-manager's own role cannot delete, so without this
		// neither garbage collection nor namespace deletion would get anywhere.
		"--use-service-account-credentials=true",
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}, l.extraControllerManagerArgs...))
	return nil
}

// startAll starts etcd, the apiserver and the controller-manager in order, each once the one
// before it is ready.
func (l *launcher) startAll(ctx context.Context) error {
	if err := l.etcd.start(l.self); err != nil {
		return err
	}
	if err := l.etcd.waitReady(ctx, httpClient(nil), l.etcdURL()+"/health", readyTimeout); err != nil {
		return err
	}
	if err := l.startAPIServer(ctx); err != nil {
		return err
	}
	if err := l.kcm.start(l.self); err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", l.ports.ControllerManager)
	if err := l.kcm.waitReady(ctx, httpClient(l.apiProbe.config), url, readyTimeout); err != nil {
		return err
	}
	return l.writeState()
}

func (l *launcher) startAPIServer(ctx context.Context) error {
	if l.api.running() {
		return errors.New("kube-apiserver is already running")
	}
	if err := l.api.start(l.self); err != nil {
		return err
	}
	return l.api.waitReady(ctx, httpClient(l.apiProbe.config), l.server()+"/readyz", readyTimeout)
}

// stopAll stops the components in the reverse order of their start.
func (l *launcher) stopAll() {
	for _, c := range []*component{l.kcm, l.api, l.etcd} {
		if c != nil {
			c.stop()
		}
	}
}

func (l *launcher) cleanup(remove bool) {
	if remove && l.dir != "" {
		if err := os.RemoveAll(l.dir); err != nil {
			fmt.Fprintf(os.Stderr, "wasmop-control-plane: removing %s: %v\n", l.dir, err)
		}
	}
}

func (l *launcher) mintUser(user string, groups []string) (string, error) {
	if err := validateIdentity(user, groups); err != nil {
		return "", err
	}
	path := userKubeconfigPath(l.dir, user, groups)
	return path, writeKubeconfig(path, l.server(), l.ca, user, groups)
}

func (l *launcher) state() state {
	return state{
		Dir:               l.dir,
		Kubeconfig:        l.path("admin.kubeconfig"),
		Server:            l.server(),
		CAFile:            l.path("pki/ca.crt"),
		LauncherPID:       os.Getpid(),
		KubernetesVersion: kubernetesVersion(),
		Ports:             l.ports,
		Etcd:              componentState{URL: l.etcdURL(), PID: l.etcd.pid(), Log: l.etcd.logPath},
		APIServer:         componentState{URL: l.server(), PID: l.api.pid(), Log: l.api.logPath},
		ControllerManager: componentState{
			URL: "https://127.0.0.1:" + strconv.Itoa(l.ports.ControllerManager),
			PID: l.kcm.pid(), Log: l.kcm.logPath,
		},
	}
}

func (l *launcher) writeState() error {
	data, err := json.MarshalIndent(l.state(), "", "  ")
	if err != nil {
		return fmt.Errorf("encoding state: %w", err)
	}
	tmp := l.path("state.json.tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, l.path("state.json")); err != nil {
		return fmt.Errorf("writing %s: %w", l.path("state.json"), err)
	}
	return nil
}

// announce tells the caller that everything is ready.
func (l *launcher) announce() {
	if !l.human {
		l.reply(map[string]any{"ok": true, "state": l.state()})
		return
	}
	fmt.Printf(`wasmop control plane (kubernetes %s) is ready in %s
  kube-apiserver:  %s
  logs:            %s
  state:           %s

export KUBECONFIG=%s

Stop with Ctrl-C (or type "shutdown"); type "help" for more commands.
`, kubernetesVersion(), l.dir, l.server(), l.path("logs"), l.path("state.json"), l.path("admin.kubeconfig"))
}

// fail reports an error that ends the launcher.
func (l *launcher) fail(err error) {
	if l.human {
		fmt.Fprintf(os.Stderr, "wasmop-control-plane: %v\n", err)
		return
	}
	l.reply(map[string]any{"ok": false, "error": err.Error()})
}

func (l *launcher) reply(v map[string]any) {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(`{"ok":false,"error":"encoding reply failed"}`)
	}
	fmt.Println(string(data))
}

func (l *launcher) path(rel string) string { return filepath.Join(l.dir, rel) }
func (l *launcher) server() string         { return fmt.Sprintf("https://127.0.0.1:%d", l.ports.APIServer) }
func (l *launcher) etcdURL() string        { return fmt.Sprintf("http://127.0.0.1:%d", l.ports.EtcdClient) }
