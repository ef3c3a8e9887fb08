// apiserversource-controller runs Knative Eventing's ApiServerSource reconciler (knative.dev/eventing,
// the version build-binaries.sh pins), the one cmd/controller runs among many, for the
// notifications test (test/e2e/notifications.test.ts).
//
// Why a main of ours: cmd/controller serves health probes on the fixed port :8080 (no flag or env
// to move it), which the eventing-controllers process (devcluster/knative-eventing/main.go) and
// the channel dispatcher already need, and it runs a dozen reconcilers this test does not use.
// The informer label selectors are the ones cmd/controller sets (OIDC service accounts, trust
// bundles). The reconciler writes the adapter Deployment exactly as in a cluster; with no kubelet
// here, devcluster/knative-apiserversource.ts runs the adapter it describes as a local process.
package main

import (
	kubefilteredfactory "knative.dev/pkg/client/injection/kube/informers/factory/filtered"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/signals"

	"knative.dev/eventing/pkg/auth"
	"knative.dev/eventing/pkg/eventingtls"
	"knative.dev/eventing/pkg/reconciler/apiserversource"
)

func main() {
	ctx := signals.NewContext()
	ctx = kubefilteredfactory.WithSelectors(ctx, auth.OIDCLabelSelector, eventingtls.TrustBundleLabelSelector)
	ctx = sharedmain.WithHealthProbesDisabled(ctx)
	sharedmain.MainWithContext(ctx, "apiserversource-controller", apiserversource.NewController)
}
