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
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

const (
	adminUser    = "admin"
	operatorUser = "stunner-operator"
	// The operator user's group; lets tests bind a role to a group as well as to the user.
	operatorGroup = "stunner-operators"
)

func main() {
	// Run through a link named after a component (envtest's KUBEBUILDER_ASSETS), it is that
	// component.
	if name := filepath.Base(os.Args[0]); isComponent(name) {
		os.Exit(runComponent(append([]string{name}, os.Args[1:]...)))
	}
	// The same binary also runs the node's other components and the node itself.
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "component":
			os.Exit(runComponent(os.Args[2:]))
		case "node":
			if err := runNode(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "node: %v\n", err)
				os.Exit(1)
			}
			return
		}
	}
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
	stop := stopSignals()

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

	api, err := startKubeAPIServer(ctx, ln, args)
	if err != nil {
		return err
	}
	apiDone, shutdownAPI := api.done, api.shutdown

	caPEM, err := os.ReadFile(pki.caCert)
	if err != nil {
		return err
	}
	adminCfg := &rest.Config{Host: host, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}

	if err := waitReady(ctx, adminCfg, apiDone, &api.err, stop, *readyTimeout); err != nil {
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
		return fmt.Errorf("kube-apiserver exited: %v", api.err)
	}
	shutdownAPI()
	if *dir != "" {
		// The caller owns --dir; leave it, but drop the credentials of a dead server.
		_ = os.Remove(filepath.Join(outDir, "admin.kubeconfig"))
		_ = os.Remove(filepath.Join(outDir, "operator.kubeconfig"))
	}
	return nil
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
	ca, err := newCertAuthority("stunner-test-apiserver-ca")
	if err != nil {
		return nil, err
	}
	srvCert, srvKey, err := ca.issue(certSpec{commonName: "kube-apiserver", server: true,
		ips: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}, dnsNames: kubernetesDNSNames})
	if err != nil {
		return nil, err
	}
	saKey, err := newECKeyPEM()
	if err != nil {
		return nil, err
	}
	return p, writeFiles([]fileWrite{
		{p.caCert, ca.pem},
		{filepath.Join(outDir, "ca.crt"), ca.pem},
		{p.servingCert, srvCert},
		{p.servingKey, srvKey},
		{p.saKey, saKey},
	})
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

// stopSignals says why the harness should stop: stdin reached EOF (the test that started it
// is gone or let go), or SIGINT/SIGTERM.
func stopSignals() <-chan string {
	stop := make(chan string, 2)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop <- "stdin closed"
	}()
	notifyStopSignals(stop)
	return stop
}

// notifyStopSignals sends the first SIGINT or SIGTERM on stop.
func notifyStopSignals(stop chan<- string) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() { s := <-sigs; stop <- "signal " + s.String() }()
}
