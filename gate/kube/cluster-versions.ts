// Where the gate runs: the apiserver's version and the Knative Serving release its CRD names.
import { ApiextensionsV1Api, type KubeConfig, VersionApi } from '@kubernetes/client-node';
import { type ClusterVersions, KNATIVE_REVISION_CRD, VERSION_LABEL } from '../../api/compatibility.ts';

/**
 * Reads both versions. The apiserver must answer (an error propagates: the gate does not start on
 * a cluster it cannot read); a missing CRD or label reads as an unknown Knative release.
 */
export async function readClusterVersions(kc: KubeConfig, crd: string = KNATIVE_REVISION_CRD): Promise<ClusterVersions> {
  const kubernetes = (await kc.makeApiClient(VersionApi).getCode()).gitVersion;
  let knativeServing: string | undefined;
  try {
    const labels = (await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: crd })).metadata?.labels;
    // Older Knative releases labelled their CRDs serving.knative.dev/release: v1.x.y instead.
    knativeServing = labels?.[VERSION_LABEL] ?? labels?.['serving.knative.dev/release'];
  } catch {
    knativeServing = undefined;
  }
  return { kubernetes, knativeServing };
}
