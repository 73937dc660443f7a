package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// The parts of a control plane that both modes run in this process: etcd, kube-apiserver,
// and the credentials clients reach it with.

// kubeAPIServer is a kube-apiserver running in this process.
type kubeAPIServer struct {
	cancel context.CancelFunc
	// done is closed when the server has returned; err is what it returned.
	done chan struct{}
	err  error
}

// startKubeAPIServer runs kube-apiserver with the command-line flags args, serving on ln.
func startKubeAPIServer(ctx context.Context, ln net.Listener, args []string) (*kubeAPIServer, error) {
	s := options.NewServerRunOptions()
	featureGate := s.GenericServerRunOptions.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	namedFlagSets := s.Flags()
	globalflag.AddGlobalFlags(namedFlagSets.FlagSet("global"), "kube-apiserver", logs.SkipLoggingConfigurationFlags())
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	if err := logsapi.ValidateAndApply(s.Logs, featureGate); err != nil {
		return nil, err
	}
	s.SecureServing.Listener = ln

	completed, err := s.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return nil, fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs))
	}
	featureGate.(featuregate.MutableFeatureGate).AddMetrics()

	apiCtx, apiCancel := context.WithCancel(ctx)
	api := &kubeAPIServer{cancel: apiCancel, done: make(chan struct{})}
	go func() { api.err = app.Run(apiCtx, completed); close(api.done) }()
	return api, nil
}

// shutdown stops the server and waits (bounded) until it has.
func (api *kubeAPIServer) shutdown() {
	api.cancel()
	select {
	case <-api.done:
		if api.err != nil {
			klog.Errorf("apiserver harness: kube-apiserver: %v", api.err)
		}
	case <-time.After(60 * time.Second):
		klog.Errorf("apiserver harness: kube-apiserver did not stop within 60s")
	}
	klog.Infof("apiserver harness: kube-apiserver stopped")
}

// startEtcd starts a single-member etcd on 127.0.0.1 ports picked by the kernel, with
// its data in work/etcd. With reuse, existing data and the ports of the previous run
// (work/etcd-ports) are kept.
func startEtcd(work, logLevel string, reuse bool) (*embed.Etcd, string, error) {
	dataDir := filepath.Join(work, "etcd")
	portsFile := filepath.Join(work, "etcd-ports")
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		var ports []int
		var err error
		var a, b int
		if data, rerr := os.ReadFile(portsFile); reuse && rerr == nil {
			if _, err := fmt.Sscanf(string(data), "%d %d", &a, &b); err != nil {
				return nil, "", fmt.Errorf("%s: %w", portsFile, err)
			}
			ports = []int{a, b}
		} else {
			if ports, err = freePorts(2); err != nil {
				return nil, "", err
			}
		}
		cURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[0]))
		pURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[1]))

		cfg := embed.NewConfig()
		cfg.Name = "harness"
		cfg.Dir = dataDir
		cfg.ListenClientUrls = []url.URL{*cURL}
		cfg.AdvertiseClientUrls = []url.URL{*cURL}
		cfg.ListenPeerUrls = []url.URL{*pURL}
		cfg.AdvertisePeerUrls = []url.URL{*pURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.LogLevel = logLevel
		cfg.LogOutputs = []string{"stderr"}
		cfg.UnsafeNoFsync = true // test data only; much faster on shared disks
		cfg.QuotaBackendBytes = 256 << 20

		if !reuse {
			_ = os.RemoveAll(dataDir)
		}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err // most likely a port taken between freePorts and bind
			if reuse {
				time.Sleep(time.Second) // the previous run's sockets may still be closing
			}
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
			if reuse {
				if err := os.WriteFile(portsFile, []byte(fmt.Sprintf("%d %d\n", ports[0], ports[1])), 0o600); err != nil {
					e.Close()
					return nil, "", err
				}
			}
			return e, cURL.String(), nil
		case err := <-e.Err():
			e.Close()
			lastErr = err
		case <-time.After(60 * time.Second):
			e.Server.Stop()
			e.Close()
			return nil, "", errors.New("etcd did not become ready within 60s")
		}
	}
	return nil, "", lastErr
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// listenRetry listens on addr, retrying while the port is still held (by a previous
// run that is shutting down) for up to wait.
func listenRetry(addr string, wait time.Duration) (net.Listener, error) {
	deadline := time.Now().Add(wait)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return ln, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func randToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func writeKubeconfig(path, host string, caPEM []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["harness"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = user
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
