// Projecting hook contributions into a Revision's pod (the Pod webhook's decision), following the
// servicebinding.io workload projection: a Secret volume per binding mounted at
// $SERVICE_BINDING_ROOT/<name>, with SERVICE_BINDING_ROOT set on the container. Only the fields
// read here are typed, so a @kubernetes/client-node V1Pod (with its spec) fits.

import type { Contribution } from '../../api/types.ts';
import { VOLUME_PREFIX } from './contributions.ts';
import { type JsonPatchOp, pointer } from './jsonpatch.ts';

export const SERVICE_BINDING_ROOT = 'SERVICE_BINDING_ROOT';
/** Knative's sidecar: it serves the Revision, not the user's code, and must not see the bindings. */
export const QUEUE_PROXY = 'queue-proxy';

export interface PodEnvVar {
  name: string;
  value?: string;
}
export interface PodEnvFrom {
  prefix?: string;
  secretRef?: { name?: string };
}
export interface PodVolumeMount {
  name: string;
  mountPath: string;
}
export interface PodContainer {
  name: string;
  env?: PodEnvVar[];
  envFrom?: PodEnvFrom[];
  volumeMounts?: PodVolumeMount[];
}
export interface PodView {
  spec: { containers: PodContainer[]; volumes?: { name: string }[] };
}

export function volumeNameFor(contribution: Pick<Contribution, 'name'>): string {
  return `${VOLUME_PREFIX}${contribution.name}`;
}

/**
 * JSON Patch adding what `contributions` ask for; entries the pod already has (same env var
 * name, same envFrom Secret, same volume name or mount path) are left alone, so the user's own
 * settings win and patching an already patched pod adds nothing.
 */
export function podPatch(pod: PodView, contributions: readonly Contribution[], bindingRoot = '/bindings'): JsonPatchOp[] {
  const patch: JsonPatchOp[] = [];
  const volumes = contributions.filter((c) => c.as === 'volume');

  const existingVolumes = new Set((pod.spec.volumes ?? []).map((v) => v.name));
  const newVolumes = [];
  for (const c of volumes) {
    const name = volumeNameFor(c);
    if (existingVolumes.has(name)) continue;
    existingVolumes.add(name);
    newVolumes.push({ name, secret: { secretName: c.secretName } });
  }
  appendAll(patch, ['spec', 'volumes'], pod.spec.volumes, newVolumes);

  pod.spec.containers.forEach((container, index) => {
    if (container.name === QUEUE_PROXY) return;
    const at = (field: string) => ['spec', 'containers', index, field];

    const env = container.env ?? [];
    const envNames = new Set(env.map((e) => e.name));
    const newEnv: unknown[] = [];
    const addEnv = (name: string, entry: unknown) => {
      if (envNames.has(name)) return;
      envNames.add(name);
      newEnv.push(entry);
    };
    // servicebinding.io: an existing SERVICE_BINDING_ROOT on the container is the root to use.
    const root = env.find((e) => e.name === SERVICE_BINDING_ROOT)?.value ?? bindingRoot;
    if (volumes.length > 0) addEnv(SERVICE_BINDING_ROOT, { name: SERVICE_BINDING_ROOT, value: root });
    for (const c of contributions) {
      if (c.as !== 'env') continue;
      for (const [name, key] of Object.entries(c.env ?? {})) {
        addEnv(name, { name, valueFrom: { secretKeyRef: { name: c.secretName, key } } });
      }
    }
    appendAll(patch, at('env'), container.env, newEnv);

    const fromSecrets = new Set((container.envFrom ?? []).filter((e) => !e.prefix && e.secretRef?.name).map((e) => e.secretRef?.name));
    const newEnvFrom: unknown[] = [];
    for (const c of contributions) {
      if (c.as !== 'envFrom' || fromSecrets.has(c.secretName)) continue;
      fromSecrets.add(c.secretName);
      newEnvFrom.push({ secretRef: { name: c.secretName } });
    }
    appendAll(patch, at('envFrom'), container.envFrom, newEnvFrom);

    const mounts = container.volumeMounts ?? [];
    const mountNames = new Set(mounts.map((m) => m.name));
    const mountPaths = new Set(mounts.map((m) => m.mountPath));
    const newMounts: unknown[] = [];
    for (const c of volumes) {
      const name = volumeNameFor(c);
      const mountPath = `${root.replace(/\/+$/, '')}/${c.name}`;
      if (mountNames.has(name) || mountPaths.has(mountPath)) continue;
      mountNames.add(name);
      mountPaths.add(mountPath);
      newMounts.push({ name, mountPath, readOnly: true });
    }
    appendAll(patch, at('volumeMounts'), container.volumeMounts, newMounts);
  });
  return patch;
}

/** Adds `items` to the array at `path`, creating it when it is absent or empty. */
function appendAll(patch: JsonPatchOp[], path: (string | number)[], current: unknown[] | undefined, items: unknown[]): void {
  if (items.length === 0) return;
  if (!current || current.length === 0) {
    patch.push({ op: 'add', path: pointer(...path), value: items });
    return;
  }
  for (const value of items) patch.push({ op: 'add', path: `${pointer(...path)}/-`, value });
}
