// serving-controllers runs Knative Serving's own reconcilers (knative.dev/serving, the version
// build-binaries.sh pins) outside a cluster: the set cmd/controller runs plus the HPA-class
// PodAutoscaler reconciler of cmd/autoscaler-hpa, in one process.
//
// Why not the two stock mains: both serve health probes on the fixed port :8080 (knative.dev/pkg
// injection.HealthCheckDefaultPort, no flag or env to move it), so two of them cannot run on one
// host, nor next to anything else that holds 8080. Nothing probes them here, so this main turns
// the probes off (sharedmain.WithHealthProbesDisabled, as cmd/webhook does) and is otherwise
// what the stock mains do. Left out: cmd/controller's cert-manager branch, which is taken only
// when config-network asks for cert-manager certificates (the e2e config does not).
package main

import (
	"flag"

	"knative.dev/pkg/injection"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/reconciler"
	"knative.dev/pkg/signals"
	"knative.dev/serving/pkg/reconciler/autoscaling/hpa"
	"knative.dev/serving/pkg/reconciler/configuration"
	"knative.dev/serving/pkg/reconciler/domainmapping"
	"knative.dev/serving/pkg/reconciler/gc"
	"knative.dev/serving/pkg/reconciler/labeler"
	"knative.dev/serving/pkg/reconciler/nscert"
	"knative.dev/serving/pkg/reconciler/revision"
	"knative.dev/serving/pkg/reconciler/route"
	"knative.dev/serving/pkg/reconciler/serverlessservice"
	"knative.dev/serving/pkg/reconciler/service"
)

var ctors = []injection.ControllerConstructor{
	// cmd/controller
	configuration.NewController,
	labeler.NewController,
	revision.NewController,
	route.NewController,
	serverlessservice.NewController,
	service.NewController,
	gc.NewController,
	nscert.NewController,
	domainmapping.NewController,
	// cmd/autoscaler-hpa
	hpa.NewController,
}

func main() {
	flag.DurationVar(&reconciler.DefaultTimeout,
		"reconciliation-timeout", reconciler.DefaultTimeout,
		"The amount of time to give each reconciliation of a resource to complete before its context is canceled.")
	ctx := sharedmain.WithHealthProbesDisabled(signals.NewContext())
	// Parses the flags (--kubeconfig, --disable-ha, ...) and runs until SIGTERM.
	sharedmain.MainWithContext(ctx, "controller", ctors...)
}
