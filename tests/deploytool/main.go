// Command deploytool runs real Helm (helm.sh/helm/v3) and real kustomize
// (sigs.k8s.io/kustomize/api) from their Go modules, so that tests/deploy.rs can check
// deploy/helm and deploy/manifests without any tool installed by hand.
//
//	deploytool helm-lint [--strict] <chart>
//	deploytool helm-template <chart> [--set k=v ...] [-f values.yaml ...] [--namespace ns] [--release name]
//	deploytool helm-package <chart> <outdir>     prints the path of the .tgz
//	deploytool kustomize <dir>
//	deploytool helm-install <chart> [--kubeconfig f] [-n ns] [--release name] [--set k=v ...] [--create-namespace] [--wait] [--timeout 5m]
//	deploytool helm-upgrade <chart> (same flags)
//	deploytool helm-uninstall [--kubeconfig f] [-n ns] [--release name] [--wait] [--timeout 5m]
//
// Rendered YAML goes to stdout; diagnostics to stderr; exit status 1 on any failure.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/getter"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const usage = `usage:
  deploytool helm-lint [--strict] <chart>
  deploytool helm-template <chart> [--set k=v ...] [-f values.yaml ...] [--namespace ns] [--release name]
  deploytool helm-package <chart> <outdir>
  deploytool kustomize <dir>
  deploytool helm-install <chart> [--kubeconfig f] [-n ns] [--release name] [--set k=v ...] [--create-namespace] [--wait] [--timeout 5m]
  deploytool helm-upgrade <chart> (same flags)
  deploytool helm-uninstall [--kubeconfig f] [-n ns] [--release name] [--wait] [--timeout 5m]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "helm-lint":
		err = helmLint(args)
	case "helm-template":
		err = helmTemplate(os.Stdout, args)
	case "helm-package":
		err = helmPackage(args)
	case "kustomize":
		err = kustomize(os.Stdout, args)
	case "helm-install":
		err = helmInstall(args)
	case "helm-upgrade":
		err = helmUpgrade(args)
	case "helm-uninstall":
		err = helmUninstall(args)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "deploytool %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// helmLint is `helm lint`: every message is printed; errors (and with --strict warnings)
// fail.
func helmLint(args []string) error {
	lint := action.NewLint()
	lint.Namespace = "stunner-system"
	var chart string
	for _, a := range args {
		switch {
		case a == "--strict":
			lint.Strict = true
		case chart == "" && !strings.HasPrefix(a, "-"):
			chart = a
		default:
			return fmt.Errorf("unexpected argument %q", a)
		}
	}
	if chart == "" {
		return fmt.Errorf("no chart given")
	}
	result := lint.Run([]string{chart}, map[string]interface{}{})
	for _, m := range result.Messages {
		fmt.Println(m.Error())
	}
	if len(result.Errors) > 0 {
		for _, e := range result.Errors {
			fmt.Fprintln(os.Stderr, e)
		}
		return fmt.Errorf("%s: %d chart(s) linted, %d error(s)", chart, result.TotalChartsLinted, len(result.Errors))
	}
	fmt.Printf("%s: %d chart(s) linted, 0 chart(s) failed\n", chart, result.TotalChartsLinted)
	return nil
}

// helmTemplate is `helm template --include-crds`: a client-only dry-run install whose
// manifest (CRDs first, then the templates, then any hooks) is printed.
func helmTemplate(out io.Writer, args []string) error {
	f, err := parseReleaseFlags(args, true)
	if err != nil {
		return err
	}
	vals, err := f.values.MergeValues(getter.Providers{})
	if err != nil {
		return err
	}
	ch, err := loader.Load(f.chart)
	if err != nil {
		return err
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...interface{}) {}})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName = f.release
	install.Namespace = f.namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.34.0", Major: "1", Minor: "34"}
	rel, err := install.Run(ch, vals)
	if err != nil {
		return err
	}
	fmt.Fprint(out, strings.TrimSpace(rel.Manifest)+"\n")
	for _, h := range rel.Hooks {
		fmt.Fprintf(out, "---\n# Source: %s\n%s\n", h.Path, strings.TrimSpace(h.Manifest))
	}
	return nil
}

// helmPackage is `helm package`: the chart directory (symlinks followed) becomes a .tgz.
func helmPackage(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("want <chart> <outdir>")
	}
	pkg := action.NewPackage()
	pkg.Destination = args[1]
	path, err := pkg.Run(args[0], nil)
	if err != nil {
		return err
	}
	fmt.Println(path)
	return nil
}

// kustomize is `kustomize build` (and `kubectl kustomize`) with the default options: load
// restrictions to the kustomization root, no plugins.
func kustomize(out io.Writer, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want exactly one directory")
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), args[0])
	if err != nil {
		return err
	}
	yaml, err := resources.AsYaml()
	if err != nil {
		return err
	}
	_, err = out.Write(yaml)
	return err
}
