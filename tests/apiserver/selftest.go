package main

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// runSelfTest checks the things the operator's tests rely on: the admin can
// create a namespace and a CRD (and an object of it), the operator user is denied
// until a ClusterRoleBinding grants it access, and then allowed. It cleans up the
// RBAC objects it made; the namespace and CRD stay (nothing garbage-collects them).
func runSelfTest(ctx context.Context, adminCfg, operatorCfg *rest.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(adminCfg)
	op := kubernetes.NewForConfigOrDie(operatorCfg)
	ext := apiextensionsclient.NewForConfigOrDie(adminCfg)
	step := func(format string, a ...any) { fmt.Printf("self-test: "+format+"\n", a...) }

	// 1. whoami for both users
	for name, c := range map[string]*kubernetes.Clientset{"admin": admin, "operator": op} {
		r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("%s SelfSubjectReview: %w", name, err)
		}
		step("%s token authenticates as %q groups %v", name, r.Status.UserInfo.Username, r.Status.UserInfo.Groups)
	}

	// 2. namespace
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "harness-self-test"}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace: %w", err)
	}
	step("admin created namespace %s", ns.Name)

	// 3. CRD, wait for Established, create an object of it
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.harness.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "harness.example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", XPreserveUnknownFields: ptrTrue()},
						"status": {Type: "object", XPreserveUnknownFields: ptrTrue()},
					},
				}},
			}},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD: %w", err)
	}
	t0 := time.Now()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		c, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD not Established: %w", err)
	}
	step("admin created CRD %s (Established after %s)", crd.Name, time.Since(t0).Round(time.Millisecond))

	gvr := schema.GroupVersionResource{Group: "harness.example.com", Version: "v1", Resource: "widgets"}
	dyn := dynamic.NewForConfigOrDie(adminCfg)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "harness.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": ns.Name},
		"spec":     map[string]any{"size": int64(3)},
	}}
	// The CR endpoint can lag Established by a moment.
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).Namespace(ns.Name).Create(ctx, w, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	if err != nil {
		return fmt.Errorf("create Widget: %w", err)
	}
	step("admin created Widget %s/w1", ns.Name)

	// 4. RBAC denies the operator user
	if _, err := op.CoreV1().ConfigMaps(ns.Name).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		return fmt.Errorf("operator list configmaps before binding: want Forbidden, got %v", err)
	}
	opDyn := dynamic.NewForConfigOrDie(operatorCfg)
	if _, err := opDyn.Resource(gvr).Namespace(ns.Name).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		return fmt.Errorf("operator list widgets before binding: want Forbidden, got %v", err)
	}
	step("operator denied (403) before any binding")

	// 5. bind, then allowed
	cr := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "harness-self-test"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"harness.example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "harness-self-test"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: cr.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: operatorUser}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRole: %w", err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRoleBinding: %w", err)
	}
	// RBAC is served from an informer cache: poll briefly.
	t0 = time.Now()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := opDyn.Resource(gvr).Namespace(ns.Name).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("operator still denied after ClusterRoleBinding: %w", err)
	}
	if _, err := op.CoreV1().ConfigMaps(ns.Name).List(ctx, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("operator list configmaps after binding: %w", err)
	}
	if _, err := op.CoreV1().Secrets(ns.Name).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		return fmt.Errorf("operator list secrets (not granted): want Forbidden, got %v", err)
	}
	step("operator allowed after ClusterRoleBinding (%s), still denied secrets", time.Since(t0).Round(time.Millisecond))

	// SelfSubjectAccessReview, as a test would use it
	ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "deployments", Group: "apps", Namespace: ns.Name},
	}}
	r, err := op.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("SelfSubjectAccessReview: %w", err)
	}
	if r.Status.Allowed {
		return fmt.Errorf("operator may create deployments without a grant")
	}

	// clean up the RBAC objects so the operator user starts with nothing
	_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{})
	_ = admin.RbacV1().ClusterRoles().Delete(ctx, cr.Name, metav1.DeleteOptions{})
	step("cleaned up RBAC objects")
	return nil
}

func ptrTrue() *bool { b := true; return &b }
