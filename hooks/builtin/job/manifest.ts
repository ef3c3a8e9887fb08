// The Job a request runs: its name (deterministic, so a redelivered request finds the Job its
// first delivery created) and its manifest. Pure: everything it needs is passed in.
import { createHash } from 'node:crypto';
import type { V1Container, V1Job } from '@kubernetes/client-node';
import type { JobParams } from './params.ts';

export const REVISION_LABEL = 'prestart.dev/revision';
export const REVISION_UID_LABEL = 'prestart.dev/revision-uid';
export const HOOK_LABEL = 'prestart.dev/hook';
export const ATTEMPT_LABEL = 'prestart.dev/attempt';
/** The container the Job runs, named so `kubectl logs job/<name> -c prestart` finds it. */
export const JOB_CONTAINER = 'prestart';

const MAX_NAME = 63;

/**
 * `<revision>-<hook>-<attempt>`, made a DNS-1123 label: the Job controller puts the name in a
 * label of every pod, so it may not exceed 63 characters. A longer one keeps its start and end
 * and gets a hash of the whole in between.
 */
export function jobName(revision: string, hook: string, attempt: number): string {
  const clean = (s: string) => s.toLowerCase().replace(/[^a-z0-9-]+/g, '-');
  const full = `${clean(revision)}-${clean(hook)}-${attempt}`.replace(/-+/g, '-').replace(/^-|-$/g, '');
  if (full.length <= MAX_NAME) return full;
  const hash = createHash('sha256').update(`${revision}/${hook}`).digest('hex').slice(0, 8);
  const tail = `-${hash}-${attempt}`;
  return `${full.slice(0, MAX_NAME - tail.length).replace(/-+$/, '')}${tail}`;
}

/** A label value (≤ 63 characters, alphanumerics at both ends); a longer one is shortened with a hash. */
export function labelValue(value: string): string {
  if (value.length <= MAX_NAME && /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/.test(value)) return value;
  const hash = createHash('sha256').update(value).digest('hex').slice(0, 8);
  const head = value
    .slice(0, MAX_NAME - 9)
    .replace(/[^-A-Za-z0-9_.]/g, '-')
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return head ? `${head}-${hash}` : hash;
}

export interface JobInput {
  namespace: string;
  revision: { name: string; uid: string };
  hook: string;
  attempt: number;
  image: string;
  params: JobParams;
  /** The Revision's container, when params.useRevisionEnv asks for its env. */
  revisionContainer?: V1Container;
  /** Seconds the Job may run: the smaller of params.activeDeadlineSeconds and what the hook's deadline leaves. */
  activeDeadlineSeconds: number;
}

export function buildJob(input: JobInput): V1Job {
  const { params } = input;
  const name = jobName(input.revision.name, input.hook, input.attempt);
  const labels = {
    ...params.podLabels,
    'app.kubernetes.io/managed-by': 'knative-prestart',
    [REVISION_LABEL]: labelValue(input.revision.name),
    [REVISION_UID_LABEL]: labelValue(input.revision.uid),
    [HOOK_LABEL]: labelValue(input.hook),
    [ATTEMPT_LABEL]: String(input.attempt),
  };
  const annotations = { 'prestart.dev/revision': input.revision.name, 'prestart.dev/hook': input.hook };
  const fromRevision = params.useRevisionEnv ? input.revisionContainer : undefined;
  const env = [...(fromRevision?.env ?? []), ...params.env];
  const container: V1Container = {
    name: JOB_CONTAINER,
    image: input.image,
    ...(params.command ? { command: params.command } : {}),
    ...(params.args ? { args: params.args } : {}),
    ...(env.length > 0 ? { env } : {}),
    ...(fromRevision?.envFrom?.length ? { envFrom: fromRevision.envFrom } : {}),
  };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace: input.namespace, labels, annotations },
    spec: {
      backoffLimit: params.backoffLimit,
      activeDeadlineSeconds: input.activeDeadlineSeconds,
      template: {
        metadata: { labels, annotations: { ...params.podAnnotations, ...annotations } },
        spec: {
          restartPolicy: 'Never',
          containers: [container],
          // A migration rarely needs the Kubernetes API: no token unless an account is named.
          ...(params.serviceAccountName ? { serviceAccountName: params.serviceAccountName } : { automountServiceAccountToken: false }),
        },
      },
    },
  };
}
