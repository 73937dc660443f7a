package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metrics, as the upstream binaries register them
	_ "k8s.io/component-base/metrics/prometheus/version"

	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// components are the Kubernetes binaries linked into this one, each run as its own process
// with `apiserver component NAME [flags...]` (node mode starts them so), or by a link to this
// binary named NAME (envtest execs `etcd` and `kube-apiserver` from KUBEBUILDER_ASSETS),
// exactly as the upstream binary of that name would run with the same flags.
var components = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy":              proxy.NewProxyCommand,
}

// etcdComponent is etcd's own command line (etcdmain, the code of the etcd binary), at the
// version the kube-apiserver here is built against.
const etcdComponent = "etcd"

// isComponent says whether name is one of the binaries runComponent runs.
func isComponent(name string) bool {
	_, ok := components[name]
	return ok || name == etcdComponent
}

// runComponent runs the component named by args[0] with the flags args[1:] and returns its
// exit code.
func runComponent(args []string) int {
	names := []string{etcdComponent}
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "usage: %s component {%s} [flags...]\n", os.Args[0], strings.Join(names, "|"))
		return 2
	}
	if args[0] == etcdComponent {
		etcdmain.Main(args) // exits on error, returns when etcd has stopped
		return 0
	}
	newCommand, ok := components[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown component %q (want one of %s)\n", args[0], strings.Join(names, ", "))
		return 2
	}
	cmd := newCommand()
	cmd.SetArgs(args[1:])
	return cli.Run(cmd)
}
