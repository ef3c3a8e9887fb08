// Whether the pods of a Job that completed ran what the hook asked for. A Job's Complete
// condition only says that some pod of it succeeded; in a tenant's namespace that pod may not be
// the template's: pod images are mutable (`kubectl set image pod/…` makes the kubelet restart the
// container on the new image), and a pod of one's own that carries the Job's selector label is
// adopted by the Job controller and counted. Pure: the shell lists the pods by the controller-uid
// of the very Job it waited for.
import type { V1Container, V1Pod, V1PodTemplateSpec } from '@kubernetes/client-node';

/** The fields of a container that the Job controller copies from the template and admission leaves alone. */
const RUN_FIELDS = ['image', 'command', 'args', 'workingDir'] as const;

/**
 * Why the Job's completion is not trusted, or undefined when every pod ran the template's
 * containers (and, where the template names a digest, that digest).
 */
export function untrustedRun(
  job: { namespace: string; name: string },
  template: V1PodTemplateSpec,
  pods: readonly V1Pod[],
): string | undefined {
  const where = `Job ${job.namespace}/${job.name} completed, but`;
  // Fail closed: the Job's pods stay until the Job is deleted (the hook sets no TTL, and deletes
  // the Job only once it answered), so a completed Job without a succeeded pod means its pods were
  // deleted (by someone, or by the pod garbage collector with its node); then nothing shows what
  // ran, and the safe answer is a failure that a retry (a new Job) mends.
  if (!pods.some((p) => p.status?.phase === 'Succeeded')) {
    return `${where} no pod of it that succeeded is left to show what ran (deleted?): not trusted; retry the hook to run it again`;
  }
  for (const pod of pods) {
    const name = pod.metadata?.name ?? '(unnamed)';
    for (const wanted of template.spec?.containers ?? []) {
      const ran = pod.spec?.containers?.find((c) => c.name === wanted.name);
      if (!ran) return `${where} its pod ${name} has no container "${wanted.name}": not the Job's template; not trusted`;
      const changed = RUN_FIELDS.filter((f) => JSON.stringify(ran[f] ?? null) !== JSON.stringify(wanted[f] ?? null));
      if (changed.length > 0) {
        return `${where} its pod ${name} does not run the Job's template (container "${wanted.name}": ${changed.join(', ')} changed): not trusted`;
      }
      const why = digestMismatch(wanted, pod);
      if (why) return `${where} its pod ${name} ${why}: not trusted`;
    }
  }
  return undefined;
}

/**
 * When the template pins a digest, the container status must show that digest. A status with no
 * imageID at all passes: the kubelet writes it for every container that started (a fake node,
 * such as kwok in the tests, does not), and only a writer of pods/status could leave it out,
 * who could as well write the expected digest there, so refusing it would defend nothing.
 */
function digestMismatch(wanted: V1Container, pod: V1Pod): string | undefined {
  const digest = digestOf(wanted.image ?? '');
  if (!digest) return undefined;
  const status = pod.status?.containerStatuses?.find((s) => s.name === wanted.name);
  if (!status) {
    return pod.status?.phase === 'Succeeded' ? `reports no status for container "${wanted.name}", so not which image ran` : undefined;
  }
  if (!status.imageID) return undefined;
  // imageID is `repo@sha256:…` (or `docker-pullable://repo@sha256:…`); a bare `sha256:…` is the
  // image's config id, which never equals a manifest digest: that fails, as it should when unsure.
  const ran = digestOf(status.imageID) ?? status.imageID;
  return ran === digest ? undefined : `ran ${status.imageID} for container "${wanted.name}", not the digest its template names (${digest})`;
}

function digestOf(reference: string): string | undefined {
  const at = reference.lastIndexOf('@');
  return at >= 0 ? reference.slice(at + 1) : undefined;
}
