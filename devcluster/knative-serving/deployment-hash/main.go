// deployment-hash prints the serving.knative.dev/deployment-hash label Knative Serving's revision
// reconciler (the version build-binaries.sh pins) gives the Deployment of a Revision: the
// Revision defaulted as the reconciler defaults it, then resources.MakeDeployment with the
// configuration of Knative's ConfigMaps. Knative leaves an existing `<revision>-deployment`
// controlled by the Revision untouched when that label matches (checkAndUpdateDeployment), so
// this is the one thing a tenant needs to hand Knative a Deployment of their own; the e2e test
// test/e2e/adoption.test.ts computes it to make that attempt for real.
//
// Input on stdin: {"revision": <Revision, as read from the apiserver>, "configMaps": [<every
// ConfigMap of knative-serving>]}. Output: the hash, one line.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"knative.dev/pkg/configmap"
	"knative.dev/serving/pkg/apis/serving"
	v1 "knative.dev/serving/pkg/apis/serving/v1"
	"knative.dev/serving/pkg/reconciler/revision/config"
	"knative.dev/serving/pkg/reconciler/revision/resources"
)

func main() {
	var in struct {
		Revision   v1.Revision         `json:"revision"`
		ConfigMaps []*corev1.ConfigMap `json:"configMaps"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "deployment-hash: reading the input:", err)
		os.Exit(1)
	}
	// The reconciler's own configuration store, fed the ConfigMaps it watches.
	store := config.NewStore(zap.NewNop().Sugar())
	store.WatchConfigs(configmap.NewStaticWatcher(in.ConfigMaps...))
	ctx := store.ToContext(context.Background())
	// knative.dev/pkg's generated reconciler defaults each object before ReconcileKind.
	rev := in.Revision.DeepCopy()
	rev.SetDefaults(ctx)
	d, err := resources.MakeDeployment(rev, config.FromContext(ctx))
	if err != nil {
		fmt.Fprintln(os.Stderr, "deployment-hash: MakeDeployment:", err)
		os.Exit(1)
	}
	fmt.Println(d.Labels[serving.RevisionDeploymentHashLabelKey])
}
