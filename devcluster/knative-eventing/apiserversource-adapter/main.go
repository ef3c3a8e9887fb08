// apiserversource-adapter is Knative Eventing's cmd/apiserver_receive_adapter (knative.dev/eventing,
// the version build-binaries.sh pins) with one change: its health probes are off. The upstream
// main serves them on the fixed port :8080 (knative.dev/pkg injection.HealthCheckDefaultPort, no
// flag or env to move it), which the channel dispatcher and other adapters on this host would
// need too; nothing probes a process here. Everything else, the watch of the API server and the
// CloudEvents it sends to its sink, is the upstream adapter's code.
package main

import (
	filteredFactory "knative.dev/pkg/client/injection/kube/informers/factory/filtered"
	"knative.dev/pkg/signals"

	"knative.dev/eventing/pkg/adapter/apiserver"
	"knative.dev/eventing/pkg/adapter/v2"
	"knative.dev/eventing/pkg/auth"
	"knative.dev/eventing/pkg/eventingtls"
)

func main() {
	ctx := signals.NewContext()
	ctx = adapter.WithInjectorEnabled(ctx)
	ctx = adapter.WithHealthProbesDisabled(ctx)
	ctx = filteredFactory.WithSelectors(ctx,
		auth.OIDCLabelSelector,
		eventingtls.TrustBundleLabelSelector,
	)
	adapter.MainWithContext(ctx, "apiserversource", apiserver.NewEnvConfig, apiserver.NewAdapter)
}
