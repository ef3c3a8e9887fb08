// The Kubernetes and Knative Serving releases this release supports: docs/compatibility.md shows
// the cells behind the range, and a unit test keeps that page and this constant the same.

export const SUPPORTED = {
  kubernetes: { min: 34, max: 37 },
  knativeServing: { min: 23, max: 24 },
} as const;

/** docs/compatibility.md's and the refusal's wording of SUPPORTED. */
export const SUPPORTED_RANGE = `Kubernetes 1.${SUPPORTED.kubernetes.min}–1.${SUPPORTED.kubernetes.max} with Knative Serving 1.${SUPPORTED.knativeServing.min}–1.${SUPPORTED.knativeServing.max}`;

/** The CRD whose release label names the Knative Serving release installed (as Knative's release manifests set it). */
export const KNATIVE_REVISION_CRD = 'revisions.serving.knative.dev';
export const VERSION_LABEL = 'app.kubernetes.io/version';

/**
 * The minor of a 1.x version as Kubernetes (`v1.36.3`, `v1.36.3+k3s1`, `v1.36.3-gke.100`) and
 * Knative (`1.24.0`, `v1.24.0`) write them; undefined for anything else (`devel`, empty).
 */
export function minorOf(version: string | undefined): number | undefined {
  const m = /^v?1\.(\d+)(?:\.\d+)?(?:[-+].*)?$/.exec(version?.trim() ?? '');
  return m?.[1] === undefined ? undefined : Number(m[1]);
}

export interface ClusterVersions {
  kubernetes: string;
  /** The label's value, or undefined when Knative Serving's CRD carries none (or is not installed). */
  knativeServing: string | undefined;
}

export type Compatibility = { supported: true; warning?: string } | { supported: false; reason: string };

/**
 * Whether the gate may run here. Outside the range (or an unreadable Kubernetes version): refused,
 * with one line. A Knative Serving that says no release (a build from source labels itself
 * `devel`) is not evidence of an unsupported one: allowed with a warning.
 */
export function judgeCluster(v: ClusterVersions): Compatibility {
  const k8s = minorOf(v.kubernetes);
  const range = `this release supports ${SUPPORTED_RANGE} (docs/compatibility.md)`;
  if (k8s === undefined || k8s < SUPPORTED.kubernetes.min || k8s > SUPPORTED.kubernetes.max) {
    return { supported: false, reason: `Kubernetes ${v.kubernetes || '(unknown version)'} is not supported: ${range}` };
  }
  const serving = minorOf(v.knativeServing);
  if (serving === undefined) {
    return {
      supported: true,
      warning: `Knative Serving's release is unknown (${KNATIVE_REVISION_CRD} label ${VERSION_LABEL}: ${v.knativeServing ?? 'none'}); ${range}`,
    };
  }
  if (serving < SUPPORTED.knativeServing.min || serving > SUPPORTED.knativeServing.max) {
    return { supported: false, reason: `Knative Serving ${v.knativeServing} is not supported: ${range}` };
  }
  return { supported: true };
}
