// The Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance, the release in
// go.mod) run against a STUNner gateway operator that already runs on the cluster of
// KUBECONFIG: server/tests/e2e_conformance.rs starts it and this test binary (build.sh), and
// judges the results file this binary writes. See docs/conformance.md.
//
// Run:
//
//	KUBECONFIG=... bin/conformance -test.v -test.run '^TestConformance$' \
//	    -gateway-class NAME -results FILE [the suite's flags, e.g. -run-test NAME]
package conformance

import (
	"context"
	"embed"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	upstream "sigs.k8s.io/gateway-api/conformance"
	"sigs.k8s.io/gateway-api/conformance/tests"
	confconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/flags"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// resultsPath: ours; the suite's own flags (-gateway-class, -run-test, ..., see its
// utils/flags) are registered by its packages and applied below.
var resultsPath = flag.String("results", "", "where to write the per-test results (JSON)")

// Our manifests, looked up before the suite's own: only the base manifests are ours.
//
//go:embed manifests/*.yaml
var manifests embed.FS

// baseManifests: the suite's namespaces, backend Services and a Gateway, with TURN listeners
// (the suite's own base manifests have HTTP/HTTPS Gateways and echo Deployments).
const baseManifests = "manifests/base.yaml"

// claimedFeatures: what the operator supports, for a GatewayClass whose status does not list
// supportedFeatures (GEP-2162; the operator does not publish them yet, issue #58).
var claimedFeatures = []features.FeatureName{
	features.SupportGateway,
	features.SupportUDPRoute,
	features.SupportTCPRoute,
	features.SupportReferenceGrant,
}

// result is one suite test's outcome, as e2e_conformance.rs reads it.
type result struct {
	Test string `json:"test"`
	// passed, failed, skipped (in `skipped`, Reason says why) or unsupported (a feature the
	// GatewayClass does not claim, named in Reason)
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
	// The skip list's reason for this test, whatever its result: also for a test the suite
	// reports unsupported before it reaches the skip list (docs list them all).
	SkipListed string   `json:"skip_listed,omitempty"`
	Features   []string `json:"features"`
}

func TestConformance(t *testing.T) {
	if *resultsPath == "" {
		t.Fatal("-results is required")
	}
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	cfg, err := config.GetConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	for _, install := range []func() error{
		func() error { return gatewayv1.Install(c.Scheme()) },
		func() error { return xv1alpha1.Install(c.Scheme()) },
		func() error { return apiextensionsv1.AddToScheme(c.Scheme()) },
	} {
		if err := install(); err != nil {
			t.Fatalf("scheme: %v", err)
		}
	}
	cs, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}

	skips := make([]string, 0, len(skipped))
	for name := range skipped {
		// A name the suite lacks would be a reason docs give for nothing.
		if !slices.ContainsFunc(tests.ConformanceTests, func(c suite.ConformanceTest) bool { return c.ShortName == name }) {
			t.Fatalf("the skip list names %s, which this suite does not have", name)
		}
		skips = append(skips, name)
	}
	configurable := suite.ConfigurableOptions{
		GatewayClassName:     flags.DefaultGatewayClassName,
		SkipTests:            skips,
		TimeoutConfig:        timeouts(),
		CleanupTestResources: true,
		// One at a time: each test's log is then one block of the output, which
		// e2e_conformance.rs quotes from; and the machine is shared.
		DisableParallelTests: true,
		Mode:                 flags.DefaultMode,
		// The suite is v1.6.3 and the CRDs v1.7.0 (go.mod says why): the suite refuses a
		// bundle of another version unless told.
		AllowCRDsMismatch: true,
	}
	flags.ApplyAll(&configurable)
	if len(configurable.SupportedFeatures) == 0 {
		configurable.SupportedFeatures = publishedFeatures(t, c, configurable.GatewayClassName)
	}

	var mu sync.Mutex
	results := map[string]result{}
	opts := suite.ConformanceOptions{
		ConfigurableOptions: configurable,
		Client:              c,
		Clientset:           cs,
		RestConfig:          cfg,
		BaseManifests:       baseManifests,
		ManifestFS:          []fs.FS{manifests, &upstream.Manifests},
		Hook: func(t *testing.T, test suite.ConformanceTest, s *suite.ConformanceTestSuite) {
			r := result{Test: test.ShortName, Result: "passed", SkipListed: skipped[test.ShortName], Features: []string{}}
			missing := ""
			for _, f := range test.Features {
				r.Features = append(r.Features, string(f))
				if !s.SupportedFeatures.Has(f) && missing == "" {
					missing = string(f)
				}
			}
			// The suite skips a test for a missing feature first, then for the skip list,
			// then for -run-test naming another.
			switch {
			case t.Failed():
				r.Result = "failed"
			case t.Skipped() && missing != "":
				r.Result, r.Reason = "unsupported", missing
			case t.Skipped() && skipped[test.ShortName] != "":
				r.Result, r.Reason = "skipped", skipped[test.ShortName]
			case t.Skipped():
				r.Result, r.Reason = "skipped", "not selected (-run-test or -skip-tests)"
			}
			mu.Lock()
			results[test.ShortName] = r
			mu.Unlock()
		},
	}
	cSuite, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		t.Fatalf("conformance suite: %v", err)
	}
	// Written when every subtest is done, whatever their outcome.
	t.Cleanup(func() { writeResults(t, results) })
	cSuite.Setup(t, tests.ConformanceTests)
	if err := cSuite.Run(t, tests.ConformanceTests); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// publishedFeatures: the GatewayClass's status.supportedFeatures, or claimedFeatures when it
// lists none.
func publishedFeatures(t *testing.T, c client.Client, class string) []features.FeatureName {
	gwc := &gatewayv1.GatewayClass{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Get(ctx, types.NamespacedName{Name: class}, gwc); err != nil {
		t.Fatalf("GatewayClass %s: %v", class, err)
	}
	var out []features.FeatureName
	for _, f := range gwc.Status.SupportedFeatures {
		out = append(out, features.FeatureName(f.Name))
	}
	if len(out) == 0 {
		t.Logf("GatewayClass %s publishes no supportedFeatures: the harness's list %v", class, claimedFeatures)
		return claimedFeatures
	}
	t.Logf("GatewayClass %s publishes supportedFeatures %v", class, out)
	return out
}

// timeouts: the suite's defaults are sized for cloud load balancers; on a local API server
// the operator answers within a second, so a check that fails gives up after tens of
// seconds instead of minutes.
func timeouts() confconfig.TimeoutConfig {
	c := confconfig.DefaultTimeoutConfig()
	c.GatewayMustHaveAddress = 30 * time.Second
	c.GatewayMustHaveCondition = 30 * time.Second
	c.GatewayStatusMustHaveListeners = 30 * time.Second
	c.GatewayListenersMustHaveConditions = 30 * time.Second
	c.GWCMustBeAccepted = 60 * time.Second
	c.TCPRouteMustHaveCondition = 30 * time.Second
	c.UDPRouteMustHaveCondition = 30 * time.Second
	c.RouteMustHaveParents = 30 * time.Second
	c.LatestObservedGenerationSet = 30 * time.Second
	c.NamespacesMustBeReady = 120 * time.Second
	c.DefaultTestTimeout = 30 * time.Second
	return c
}

func writeResults(t *testing.T, results map[string]result) {
	list := make([]result, 0, len(results))
	for _, r := range results {
		list = append(list, r)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Test < list[j].Test })
	data, err := json.MarshalIndent(list, "", "  ")
	if err == nil {
		err = os.WriteFile(*resultsPath, data, 0o644)
	}
	if err != nil {
		t.Errorf("results: %v", err)
	}
}
