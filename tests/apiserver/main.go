// Command apiserver runs an embedded etcd and a kube-apiserver in one process on
// 127.0.0.1, for the operator's integration tests (design.md §6, layer 3).
//
// It writes admin.kubeconfig (system:masters) and operator.kubeconfig (a user with
// no permissions until a test binds some) into --dir, prints "READY <dir>" on
// stdout, and shuts down cleanly when its standard input closes (or on
// SIGINT/SIGTERM). Everything else it prints goes to stderr.
//
// With --state-dir and --port, a second run on the same state directory and port is a
// restart of the same cluster: the etcd data, the CA and serving cert, the tokens and the
// service-account key are reused, so clients of the first run keep working.
//
// Usage: apiserver [--dir DIR] [--state-dir DIR] [--port N] [--self-test] [--etcd-log-level LEVEL] [-- kube-apiserver flags...]
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

const (
	adminUser    = "admin"
	operatorUser = "stunner-operator"
	// The operator user's group; lets tests bind a role to a group as well as to the user.
	operatorGroup = "stunner-operators"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "apiserver: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "directory for the kubeconfigs and ca.crt (created if missing; default: a new temp dir, removed on exit)")
	selfTest := flag.Bool("self-test", false, "after startup, create a namespace and a CRD as admin and check that RBAC denies the operator user; exit 1 on failure")
	etcdLogLevel := flag.String("etcd-log-level", "error", "embedded etcd log level (debug, info, warn, error)")
	readyTimeout := flag.Duration("ready-timeout", 3*time.Minute, "give up if the apiserver is not ready by then")
	stateDir := flag.String("state-dir", "", "keep etcd's data, the PKI, the tokens and etcd's ports here and reuse them on the next run (default: a temp dir, removed on exit)")
	port := flag.Int("port", 0, "the apiserver's port on 127.0.0.1 (default: one the kernel picks)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags] [-- kube-apiserver flags...]\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	extraArgs := flag.Args()

	t0 := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Stop on stdin EOF or a signal.
	stop := make(chan string, 2)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop <- "stdin closed"
	}()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() { s := <-sigs; stop <- "signal " + s.String() }()

	var work string
	var err error
	if *stateDir != "" {
		if work, err = filepath.Abs(*stateDir); err != nil {
			return err
		}
		if err := os.MkdirAll(work, 0o700); err != nil {
			return err
		}
	} else {
		if work, err = os.MkdirTemp("", "stunner-apiserver-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	reuse := *stateDir != ""

	outDir := *dir
	if outDir == "" {
		outDir = filepath.Join(work, "out")
	}
	if outDir, err = filepath.Abs(outDir); err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}

	// --- etcd ---------------------------------------------------------------
	etcd, etcdURL, err := startEtcd(work, *etcdLogLevel, reuse)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer func() {
		etcd.Close()
		klog.Infof("apiserver harness: etcd stopped")
	}()

	// --- certificates, tokens, keys ----------------------------------------
	pki, err := writePKI(work, outDir, reuse)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	adminToken, operatorToken := randToken(), randToken()
	tokenFile := filepath.Join(work, "tokens.csv")
	if old, err := readTokens(tokenFile); reuse && err == nil {
		adminToken, operatorToken = old[0], old[1]
	} else {
		tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n%s,%s,%s,\"%s\"\n",
			adminToken, adminUser, "uid-admin", operatorToken, operatorUser, "uid-"+operatorUser, operatorGroup)
		if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
			return err
		}
	}

	// --- kube-apiserver -----------------------------------------------------
	ln, err := listenRetry("127.0.0.1:"+strconv.Itoa(*port), 30*time.Second)
	if err != nil {
		return err
	}
	apiPort := ln.Addr().(*net.TCPAddr).Port
	host := "https://127.0.0.1:" + strconv.Itoa(apiPort)

	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(work, "certs"),
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saKey,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--profiling=false",
		// The default (lease) reconciler keeps trying to publish 127.0.0.1 as the
		// "kubernetes" Service's endpoint, which validation rejects as loopback.
		"--endpoint-reconciler-type=none",
	}
	args = append(args, extraArgs...)

	s := options.NewServerRunOptions()
	featureGate := s.GenericServerRunOptions.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	namedFlagSets := s.Flags()
	globalflag.AddGlobalFlags(namedFlagSets.FlagSet("global"), "kube-apiserver", logs.SkipLoggingConfigurationFlags())
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("kube-apiserver flags: %w", err)
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	if err := logsapi.ValidateAndApply(s.Logs, featureGate); err != nil {
		return err
	}
	s.SecureServing.Listener = ln

	completed, err := s.Complete(ctx)
	if err != nil {
		return fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs))
	}
	featureGate.(featuregate.MutableFeatureGate).AddMetrics()

	apiCtx, apiCancel := context.WithCancel(ctx)
	// apiDone is closed when app.Run returns; apiErr is its result.
	apiDone := make(chan struct{})
	var apiErr error
	go func() { apiErr = app.Run(apiCtx, completed); close(apiDone) }()
	shutdownAPI := func() {
		apiCancel()
		select {
		case <-apiDone:
			if apiErr != nil {
				klog.Errorf("apiserver harness: kube-apiserver: %v", apiErr)
			}
		case <-time.After(60 * time.Second):
			klog.Errorf("apiserver harness: kube-apiserver did not stop within 60s")
		}
		klog.Infof("apiserver harness: kube-apiserver stopped")
	}

	caPEM, err := os.ReadFile(pki.caCert)
	if err != nil {
		return err
	}
	adminCfg := &rest.Config{Host: host, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}

	if err := waitReady(ctx, adminCfg, apiDone, &apiErr, stop, *readyTimeout); err != nil {
		shutdownAPI()
		return err
	}
	if err := writeKubeconfig(filepath.Join(outDir, "admin.kubeconfig"), host, caPEM, adminUser, adminToken); err != nil {
		shutdownAPI()
		return err
	}
	if err := writeKubeconfig(filepath.Join(outDir, "operator.kubeconfig"), host, caPEM, operatorUser, operatorToken); err != nil {
		shutdownAPI()
		return err
	}
	startup := time.Since(t0)

	if *selfTest {
		// Go through the kubeconfig files, as a test would.
		adminKC, err1 := clientcmd.BuildConfigFromFlags("", filepath.Join(outDir, "admin.kubeconfig"))
		operatorKC, err2 := clientcmd.BuildConfigFromFlags("", filepath.Join(outDir, "operator.kubeconfig"))
		if err := errors.Join(err1, err2); err != nil {
			shutdownAPI()
			return fmt.Errorf("reading the kubeconfigs back: %w", err)
		}
		if err := runSelfTest(ctx, adminKC, operatorKC); err != nil {
			fmt.Printf("SELF-TEST FAIL: %v\n", err)
			shutdownAPI()
			return errors.New("self-test failed")
		}
		fmt.Println("SELF-TEST PASS")
	}

	fmt.Fprintf(os.Stderr, "apiserver harness: ready in %s at %s (etcd %s)\n", startup.Round(time.Millisecond), host, etcdURL)
	fmt.Printf("READY %s\n", outDir)
	_ = os.Stdout.Sync()

	select {
	case why := <-stop:
		fmt.Fprintf(os.Stderr, "apiserver harness: %s, shutting down\n", why)
	case <-apiDone:
		return fmt.Errorf("kube-apiserver exited: %v", apiErr)
	}
	shutdownAPI()
	if *dir != "" {
		// The caller owns --dir; leave it, but drop the credentials of a dead server.
		_ = os.Remove(filepath.Join(outDir, "admin.kubeconfig"))
		_ = os.Remove(filepath.Join(outDir, "operator.kubeconfig"))
	}
	return nil
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

type pkiFiles struct {
	caCert, servingCert, servingKey, saKey string
}

// writePKI makes a CA, a serving certificate for 127.0.0.1/localhost/the in-cluster
// names, and the service-account signing key. ca.crt also goes to outDir. With reuse,
// the files of a previous run are kept when they are all there.
func writePKI(work, outDir string, reuse bool) (*pkiFiles, error) {
	d := filepath.Join(work, "pki")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, err
	}
	p := &pkiFiles{
		caCert:      filepath.Join(d, "ca.crt"),
		servingCert: filepath.Join(d, "apiserver.crt"),
		servingKey:  filepath.Join(d, "apiserver.key"),
		saKey:       filepath.Join(d, "sa.key"),
	}
	if reuse {
		complete := true
		for _, f := range []string{p.caCert, p.servingCert, p.servingKey, p.saKey} {
			if _, err := os.Stat(f); err != nil {
				complete = false
			}
		}
		if complete {
			caPEM, err := os.ReadFile(p.caCert)
			if err != nil {
				return nil, err
			}
			return p, os.WriteFile(filepath.Join(outDir, "ca.crt"), caPEM, 0o600)
		}
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "stunner-test-apiserver-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	writes := []struct {
		path string
		data []byte
	}{
		{p.caCert, caPEM},
		{filepath.Join(outDir, "ca.crt"), caPEM},
		{p.servingCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})},
		{p.servingKey, ecKeyPEM(srvKey)},
		{p.saKey, ecKeyPEM(saKey)},
	}
	for _, w := range writes {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func ecKeyPEM(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// readTokens returns the admin and operator tokens of a token file written by a
// previous run.
func readTokens(path string) ([2]string, error) {
	var out [2]string
	data, err := os.ReadFile(path)
	if err != nil {
		return out, err
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 2 {
		return out, fmt.Errorf("%s: want 2 lines", path)
	}
	for i := range out {
		out[i], _, _ = strings.Cut(lines[i], ",")
	}
	return out, nil
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
