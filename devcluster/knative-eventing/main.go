// eventing-controllers runs the Knative Eventing reconcilers (knative.dev/eventing, the version
// build-binaries.sh pins) that an MT channel-based Broker over the InMemoryChannel needs, in one
// process: Channel, Subscription and EventPolicy from cmd/controller, Broker and Trigger from
// cmd/mtchannel_broker, and the InMemoryChannel reconciler from
// cmd/in_memory/channel_controller.
//
// Why not the three stock mains: each serves health probes on the fixed port :8080
// (knative.dev/pkg injection.HealthCheckDefaultPort, no flag or env to move it), so they cannot
// share a host, nor run next to the InMemoryChannel dispatcher, which takes :8080 for events.
// Nothing probes them here, so this main turns the probes off, as cmd/webhook does. The
// informer label selectors are the ones cmd/controller sets (OIDC service accounts, trust
// bundles). Left out: the reconcilers the Broker path does not use (sources, sequences,
// parallels, the API server source, sink bindings, job sinks, the integration sinks).
package main

import (
	kubefilteredfactory "knative.dev/pkg/client/injection/kube/informers/factory/filtered"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/signals"

	"knative.dev/eventing/pkg/auth"
	"knative.dev/eventing/pkg/eventingtls"
	"knative.dev/eventing/pkg/reconciler/broker"
	mttrigger "knative.dev/eventing/pkg/reconciler/broker/trigger"
	"knative.dev/eventing/pkg/reconciler/channel"
	"knative.dev/eventing/pkg/reconciler/eventpolicy"
	imc "knative.dev/eventing/pkg/reconciler/inmemorychannel/controller"
	"knative.dev/eventing/pkg/reconciler/subscription"
)

func main() {
	ctx := signals.NewContext()
	ctx = kubefilteredfactory.WithSelectors(ctx, auth.OIDCLabelSelector, eventingtls.TrustBundleLabelSelector)
	ctx = sharedmain.WithHealthProbesDisabled(ctx)
	sharedmain.MainWithContext(ctx, "controller",
		channel.NewController,
		subscription.NewController,
		eventpolicy.NewController,
		broker.NewController,
		mttrigger.NewController,
		imc.NewController,
	)
}
