package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// writeNodePKI makes the node's CA and certificates, the service-account key, the static
// tokens and kubeconfigs, and the pods' resolv.conf, under work (ca.crt, admin.kubeconfig and
// operator.kubeconfig also into outDir).
func writeNodePKI(work, outDir, host string) (nodeFiles, error) {
	d := filepath.Join(work, "pki")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nodeFiles{}, err
	}
	f := nodeFiles{
		caCert: filepath.Join(d, "ca.crt"), saKey: filepath.Join(d, "sa.key"),
		servingCert: filepath.Join(d, "apiserver.crt"), servingKey: filepath.Join(d, "apiserver.key"),
		kubeletCert: filepath.Join(d, "kubelet.crt"), kubeletKey: filepath.Join(d, "kubelet.key"),
		kubeletClientCert: filepath.Join(d, "apiserver-kubelet-client.crt"), kubeletClientKey: filepath.Join(d, "apiserver-kubelet-client.key"),
		tokenFile: filepath.Join(d, "tokens.csv"), resolvConf: filepath.Join(work, "resolv.conf"),
	}
	ca, err := newCertAuthority("stunner-test-node-ca")
	if err != nil {
		return f, err
	}
	issued := []struct {
		spec      certSpec
		cert, key string
	}{
		{certSpec{commonName: "kube-apiserver", server: true, ips: nodeServingIPs, dnsNames: kubernetesDNSNames}, f.servingCert, f.servingKey},
		{certSpec{commonName: nodeName, server: true, ips: []net.IP{net.ParseIP(nodeIP), net.ParseIP(nodeIPv6)}, dnsNames: []string{nodeName}}, f.kubeletCert, f.kubeletKey},
		// The apiserver's identity towards kubelet (logs, exec, port-forward, the pod proxy).
		{certSpec{commonName: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}}, f.kubeletClientCert, f.kubeletClientKey},
	}
	files := []fileWrite{{f.caCert, ca.pem}, {filepath.Join(outDir, "ca.crt"), ca.pem},
		// No upstream resolver: pods with dnsPolicy Default (CoreDNS) resolve nothing outside.
		{f.resolvConf, []byte("# stunner test node: no upstream resolver\n")}}
	for _, c := range issued {
		cert, key, err := ca.issue(c.spec)
		if err != nil {
			return f, err
		}
		files = append(files, fileWrite{c.cert, cert}, fileWrite{c.key, key})
	}
	saKey, err := newECKeyPEM()
	if err != nil {
		return f, err
	}
	if err := writeFiles(append(files, fileWrite{f.saKey, saKey})); err != nil {
		return f, err
	}
	f.kubeconfigs, err = writeTokens(f.tokenFile, d, outDir, host, ca.pem)
	return f, err
}

// nodeAPIServerArgs: the standalone mode's settings, but serving on the node address (which
// pods reach), the Service ranges 198.19.0.0/16 (the primary) and fd5e:3a7c:1b00:100::/112,
// the lease endpoint reconciler publishing the node address as the kubernetes Service's
// endpoint, and a client certificate for kubelet, whose serving certificate it verifies.
func nodeAPIServerArgs(work, etcdURL string, f nodeFiles) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + nodeIP,
		"--advertise-address=" + nodeIP,
		"--secure-port=" + strconv.Itoa(apiServerPort),
		"--cert-dir=" + filepath.Join(work, "certs"),
		"--tls-cert-file=" + f.servingCert,
		"--tls-private-key-file=" + f.servingKey,
		"--client-ca-file=" + f.caCert,
		"--token-auth-file=" + f.tokenFile,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc." + clusterDomain,
		"--service-account-key-file=" + f.saKey,
		"--service-account-signing-key-file=" + f.saKey,
		"--service-cluster-ip-range=" + joined(familyServiceCIDR),
		"--endpoint-reconciler-type=lease",
		"--kubelet-client-certificate=" + f.kubeletClientCert,
		"--kubelet-client-key=" + f.kubeletClientKey,
		"--kubelet-certificate-authority=" + f.caCert,
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true",
		"--profiling=false",
	}
}

// lockNode takes the machine-wide node lock (the node's names and addresses are fixed),
// released when this process exits, however it exits. It waits up to wait for another
// node to go.
func lockNode(wait time.Duration, log func(string, ...any)) (func(), error) {
	path := filepath.Join(os.TempDir(), "stunner-test-node.lock")
	fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for logged := false; ; {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			syscall.Close(fd)
			return nil, fmt.Errorf("another test node still runs on this machine after %s (%s is locked): %w", wait, path, err)
		}
		if !logged {
			log("waiting (up to %s) for another test node to stop (%s is locked)", wait, path)
			logged = true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return func() { syscall.Close(fd) }, nil
}
