package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// waitReady polls /readyz as the admin user until it answers 200 (all post-start
// hooks done, including the RBAC bootstrap roles), the apiserver exits, or a
// stop request or the timeout arrives.
func waitReady(ctx context.Context, cfg *rest.Config, apiDone <-chan struct{}, apiErr *error, stop <-chan string, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	deadline := time.After(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		select {
		case <-apiDone:
			return fmt.Errorf("kube-apiserver exited before ready: %v", *apiErr)
		case why := <-stop:
			return fmt.Errorf("%s before the apiserver was ready", why)
		case <-deadline:
			return fmt.Errorf("kube-apiserver not ready after %s (last /readyz: %s)", timeout, last)
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var code int
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(rctx).StatusCode(&code).Raw()
		cancel()
		if err == nil && code == http.StatusOK {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = string(body)
		}
	}
}
