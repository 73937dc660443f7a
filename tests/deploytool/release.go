package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
)

// releaseFlags are the flags the release commands (template, install, upgrade, uninstall)
// share, with helm's meanings: --set k=v, -f/--values file, -n/--namespace, --release, --kubeconfig,
// --create-namespace, --wait, --timeout.
type releaseFlags struct {
	chart, namespace, release, kubeconfig string
	createNamespace, wait                 bool
	timeout                               time.Duration
	values                                values.Options
}

func parseReleaseFlags(args []string, wantChart bool) (releaseFlags, error) {
	f := releaseFlags{namespace: "stunner-system", release: "stunner-gateway-operator", timeout: 5 * time.Minute}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch {
		case a == "--set":
			var v string
			v, err = next()
			f.values.Values = append(f.values.Values, v)
		case a == "--values" || a == "-f":
			var v string
			v, err = next()
			f.values.ValueFiles = append(f.values.ValueFiles, v)
		case a == "--namespace" || a == "-n":
			f.namespace, err = next()
		case a == "--release":
			f.release, err = next()
		case a == "--kubeconfig":
			f.kubeconfig, err = next()
		case a == "--create-namespace":
			f.createNamespace = true
		case a == "--wait":
			f.wait = true
		case a == "--timeout":
			var v string
			if v, err = next(); err == nil {
				f.timeout, err = time.ParseDuration(v)
			}
		case wantChart && f.chart == "" && !strings.HasPrefix(a, "-"):
			f.chart = a
		default:
			err = fmt.Errorf("unexpected argument %q", a)
		}
		if err != nil {
			return f, err
		}
	}
	if wantChart && f.chart == "" {
		return f, fmt.Errorf("no chart given")
	}
	return f, nil
}

// configuration is helm's action configuration for a cluster: the kubeconfig given, release
// records in Secrets (helm's default driver) of the release namespace.
func (f releaseFlags) configuration() (*action.Configuration, error) {
	settings := cli.New()
	settings.KubeConfig = f.kubeconfig
	settings.SetNamespace(f.namespace)
	cfg := new(action.Configuration)
	logf := func(format string, v ...interface{}) { fmt.Fprintf(os.Stderr, format+"\n", v...) }
	if err := cfg.Init(settings.RESTClientGetter(), f.namespace, "secret", logf); err != nil {
		return nil, err
	}
	return cfg, nil
}

// load is what installing or upgrading the release needs: helm's configuration for the
// cluster, the merged values and the chart.
func (f releaseFlags) load() (*action.Configuration, map[string]interface{}, *chart.Chart, error) {
	cfg, err := f.configuration()
	if err != nil {
		return nil, nil, nil, err
	}
	vals, err := f.values.MergeValues(getter.Providers{})
	if err != nil {
		return nil, nil, nil, err
	}
	ch, err := loader.Load(f.chart)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, vals, ch, nil
}

// helmInstall is `helm install RELEASE CHART`: CRDs from the chart's crds/ first, then the
// templates; with --wait until every Deployment is available.
func helmInstall(args []string) error {
	f, err := parseReleaseFlags(args, true)
	if err != nil {
		return err
	}
	cfg, vals, ch, err := f.load()
	if err != nil {
		return err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName = f.release
	install.Namespace = f.namespace
	install.CreateNamespace = f.createNamespace
	install.Wait = f.wait
	install.Timeout = f.timeout
	rel, err := install.Run(ch, vals)
	if err != nil {
		return err
	}
	fmt.Printf("release %s installed in %s: revision %d, %s\n", rel.Name, rel.Namespace, rel.Version, rel.Info.Status)
	printNotes(rel.Info.Notes)
	return nil
}

// helmUpgrade is `helm upgrade RELEASE CHART` (the release must exist), values reset to the
// chart's plus --set.
func helmUpgrade(args []string) error {
	f, err := parseReleaseFlags(args, true)
	if err != nil {
		return err
	}
	cfg, vals, ch, err := f.load()
	if err != nil {
		return err
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = f.namespace
	upgrade.Wait = f.wait
	upgrade.Timeout = f.timeout
	rel, err := upgrade.Run(f.release, ch, vals)
	if err != nil {
		return err
	}
	fmt.Printf("release %s upgraded in %s: revision %d, %s\n", rel.Name, rel.Namespace, rel.Version, rel.Info.Status)
	printNotes(rel.Info.Notes)
	return nil
}

// helmUninstall is `helm uninstall RELEASE`: every object the release made goes (CRDs
// stay, as helm keeps them); with --wait until they are gone.
func helmUninstall(args []string) error {
	f, err := parseReleaseFlags(args, false)
	if err != nil {
		return err
	}
	cfg, err := f.configuration()
	if err != nil {
		return err
	}
	uninstall := action.NewUninstall(cfg)
	uninstall.Wait = f.wait
	uninstall.Timeout = f.timeout
	res, err := uninstall.Run(f.release)
	if err != nil {
		return err
	}
	if res != nil && res.Info != "" {
		fmt.Println(res.Info)
	}
	fmt.Printf("release %s uninstalled from %s\n", f.release, f.namespace)
	return nil
}

// printNotes prints the chart's rendered NOTES.txt, as helm does after an install or upgrade.
func printNotes(notes string) {
	if notes != "" {
		fmt.Printf("NOTES:\n%s\n", notes)
	}
}
