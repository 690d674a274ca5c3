// The kubectl role: upstream kubectl (k8s.io/kubectl/pkg/cmd) at the same version as the
// apiserver, so a person can inspect the control plane without installing anything.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectl "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

// runKubectl runs kubectl with args. kubectl reads its arguments from os.Args (for plugins and
// its own verbosity), so they are put there as if it had been started as `kubectl args...`.
func runKubectl(args []string) {
	os.Args = append([]string{"kubectl"}, args...)
	// As upstream: verbosity is set before the flags are parsed; a bad value fails there.
	_, _ = logs.GlogSetter(kubectl.GetLogVerbosity(os.Args))
	command := kubectl.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
