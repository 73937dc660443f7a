package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// What makes the node usable once its components run: the Node Ready, and CoreDNS serving
// the cluster domain at the cluster DNS address.

//go:embed coredns.yaml
var coreDNSManifest string

// applyCoreDNS creates CoreDNS's objects (coredns.yaml) with the given image.
func applyCoreDNS(ctx context.Context, cs kubernetes.Interface, image string) error {
	manifest := strings.NewReplacer("COREDNS_IMAGE", image, "CLUSTER_DOMAIN", clusterDomain,
		"CLUSTER_DNS_IP", clusterDNSIP).Replace(coreDNSManifest)
	decoder := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := decoder.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("coredns.yaml: %w", err)
		}
		if err := create(ctx, cs, obj); err != nil {
			return fmt.Errorf("coredns: %w", err)
		}
	}
}

func create(ctx context.Context, cs kubernetes.Interface, obj runtime.Object) error {
	opts := metav1.CreateOptions{}
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
	case *corev1.ConfigMap:
		_, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, opts)
	case *corev1.Service:
		_, err = cs.CoreV1().Services(o.Namespace).Create(ctx, o, opts)
	case *appsv1.Deployment:
		_, err = cs.AppsV1().Deployments(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.ClusterRole:
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	default:
		err = fmt.Errorf("no create for %T", obj)
	}
	return err
}

// waitFor polls check every interval until it returns true, an error, or timeout passes; a
// process in failed ends the wait early with that process's exit.
func waitFor(ctx context.Context, what string, timeout time.Duration, failed <-chan error, check func(context.Context) (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, state, err := check(cctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if state != "" {
			last = state
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %s (last seen: %s)", what, timeout, last)
		}
		select {
		case err := <-failed:
			return fmt.Errorf("%s: %w", what, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// nodeReady reports whether the node has registered with the Ready condition true.
func nodeReady(cs kubernetes.Interface) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, c.Reason + ": " + c.Message, nil
			}
		}
		return false, "no Ready condition yet", nil
	}
}

// coreDNSAnswers reports whether the cluster DNS address resolves the kubernetes Service's
// name to its ClusterIP, asked from the host through kube-proxy's rules, as a pod would ask.
func coreDNSAnswers(ctx context.Context) (bool, string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(clusterDNSIP, "53"))
	}}
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	name := "kubernetes.default.svc." + clusterDomain + "."
	addrs, err := r.LookupHost(qctx, name)
	if err != nil {
		return false, err.Error(), nil
	}
	for _, a := range addrs {
		if a == kubernetesServiceIP {
			return true, "", nil
		}
	}
	return false, fmt.Sprintf("%s resolved to %v", name, addrs), nil
}

// coreDNSReady reports whether CoreDNS's Deployment has an available replica.
func coreDNSReady(cs kubernetes.Interface) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if d.Status.AvailableReplicas > 0 {
			return true, "", nil
		}
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil || len(pods.Items) == 0 {
			return false, "no CoreDNS pod yet", nil
		}
		return false, podState(&pods.Items[0]), nil
	}
}

// podState is a one-line summary of why a pod is not ready yet.
func podState(p *corev1.Pod) string {
	s := fmt.Sprintf("pod %s: %s", p.Name, p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s += fmt.Sprintf("; %s: %s", c.Type, c.Message)
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			s += fmt.Sprintf("; %s waiting: %s %s", c.Name, w.Reason, w.Message)
		}
	}
	return s
}
