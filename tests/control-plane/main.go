// Command wasmop-control-plane runs a real Kubernetes control plane for wasmop's tests and demo.
//
// One binary plays every role, chosen by its first argument, and each role runs in its own
// process so that the components share no global state:
//
//	wasmop-control-plane up [flags]                   generate PKI, start everything, serve commands
//	wasmop-control-plane etcd [flags]                 embedded etcd server (go.etcd.io/etcd/server/v3)
//	wasmop-control-plane kube-apiserver [flags]       upstream k8s.io/kubernetes/cmd/kube-apiserver
//	wasmop-control-plane kube-controller-manager ...  upstream k8s.io/kubernetes/cmd/kube-controller-manager
//	wasmop-control-plane kubectl ARGS...               upstream kubectl
//	wasmop-control-plane version                      versions of the components
package main

import (
	"fmt"
	"os"
	_ "time/tzdata" // as in upstream kube-apiserver: time zone data for CronJob validation

	etcdversion "go.etcd.io/etcd/api/v3/version"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // as upstream: JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // as upstream: client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // as upstream: version metric
	kubeversion "k8s.io/component-base/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

const usage = `usage: wasmop-control-plane ROLE [flags]

roles:
  up                        start etcd, kube-apiserver and kube-controller-manager on loopback
                            (see "up -h"); reads commands from stdin, stops everything on EOF
  etcd                      run the embedded etcd server (see "etcd -h")
  kube-apiserver            run the upstream kube-apiserver (upstream flags)
  kube-controller-manager   run the upstream kube-controller-manager (upstream flags)
  kubectl                   run the upstream kubectl (same version as the apiserver)
  version                   print the component versions
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	role, args := os.Args[1], os.Args[2:]
	switch role {
	case "up":
		os.Exit(runUp(args))
	case "etcd":
		os.Exit(runEtcd(args))
	case "kube-apiserver":
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "kube-controller-manager":
		cmd := controllermanager.NewControllerManagerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "kubectl":
		runKubectl(args)
	case "version":
		fmt.Printf("kubernetes %s\netcd v%s\n", kubernetesVersion(), etcdversion.Version)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q\n%s", role, usage)
		os.Exit(2)
	}
}

// kubernetesVersion is the version the `cp` script stamps into k8s.io/component-base/version
// from go.mod (as the upstream build does); the apiserver reports the same at /version.
func kubernetesVersion() string { return kubeversion.Get().GitVersion }
