// Where the gate runs, read from the real apiserver under the gate's own RBAC
// (config/300-rbac.yaml): the apiserver's version, and Knative Serving's release from a CRD's
// label. The CRD here is one of the test's own, labelled as an unsupported release, so that the
// cluster the other tests share keeps its Knative CRDs as they are.

import { GATE_GROUPS, GATE_USER, installedCluster } from '@knative-prestart/devcluster/gate/env.ts';
import { ApiextensionsV1Api, KubeConfig } from '@kubernetes/client-node';
import test from 'ava';
import { judgeCluster, KNATIVE_REVISION_CRD } from '../../../api/compatibility.ts';
import { readClusterVersions } from '../../../gate/kube/cluster-versions.ts';

const GROUP = `compat${process.pid}.prestart.test`;
const CRD = `revisions.${GROUP}`;
let admin: ApiextensionsV1Api;
let adminKc: KubeConfig;
let gate: KubeConfig;

test.before(async () => {
  const cluster = await installedCluster();
  adminKc = cluster.kubeConfig;
  admin = adminKc.makeApiClient(ApiextensionsV1Api);
  gate = new KubeConfig();
  gate.loadFromFile(await cluster.mintUserKubeconfig(GATE_USER, GATE_GROUPS));
  await admin.createCustomResourceDefinition({
    body: {
      metadata: { name: CRD, labels: { 'app.kubernetes.io/version': '1.22.0' } },
      spec: {
        group: GROUP,
        names: { plural: 'revisions', singular: 'revision', kind: 'Revision' },
        scope: 'Namespaced',
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } },
          },
        ],
      },
    },
  });
});

test.after.always(async () => {
  await admin?.deleteCustomResourceDefinition({ name: CRD }).catch(() => undefined);
});

test("the gate reads the apiserver's version and Knative Serving's release; an unsupported release is refused with one line", async (t) => {
  // An admin reads the labelled CRD (the gate's RBAC names only Knative's own).
  const v = await readClusterVersions(adminKc, CRD);
  t.regex(v.kubernetes, /^v1\.\d+\.\d+/);
  t.is(v.knativeServing, '1.22.0');
  const verdict = judgeCluster(v);
  t.false(verdict.supported);
  t.regex(
    (verdict as { reason: string }).reason,
    /^Knative Serving 1\.22\.0 is not supported: this release supports Kubernetes 1\.34–1\.37/,
  );
});

test("under the gate's RBAC, Knative's Revision CRD is readable and the verdict is the supported range's", async (t) => {
  const v = await readClusterVersions(gate);
  t.regex(v.kubernetes, /^v1\.3[4-7]\./);
  // The test cluster's Knative CRDs come from the build cache, stamped with the release as Knative's release manifests are.
  const crd = await admin.readCustomResourceDefinition({ name: KNATIVE_REVISION_CRD }).catch(() => undefined);
  t.is(v.knativeServing, crd?.metadata?.labels?.['app.kubernetes.io/version']);
  t.true(judgeCluster(v).supported);
});
