// Whether a Job found under the hook's Job name is the one the hook would have created, so that
// waiting for it is as good as running our own. The name and labels are predictable and a
// namespace editor can create Jobs, so those prove nothing: what runs must be compared. Pure:
// the shell passes the existing Job and the hook's own manifest as the apiserver defaulted it (a
// server-side dry run), both as raw JSON so that no field unknown to the client library is lost.
import { isPlainObject } from '../common/params.ts';

/** Labels the Job API writes into the pod template (from the Job's uid and name): never the same twice. */
export const JOB_CONTROLLER_LABELS = ['batch.kubernetes.io/controller-uid', 'controller-uid', 'batch.kubernetes.io/job-name', 'job-name'];

/**
 * Job spec fields left out of the comparison:
 * - template: compared on its own, without the Job controller's labels;
 * - selector: generated from the Job's uid (manualSelector, which would let the Job adopt pods
 *   someone else made, is compared);
 * - activeDeadlineSeconds: the hook sets it from the time its deadline leaves, so its own Job
 *   carries another value on every delivery. It only bounds how long the pods may run: a smaller
 *   value makes the Job fail, never succeed, and a larger one is cut short by the hook, which
 *   deletes the Job when its own time is up.
 * Everything else (backoffLimit, completions, parallelism, suspend, podFailurePolicy,
 * successPolicy, managedBy, …) decides what runs, how often, or who says it succeeded.
 */
const SPEC_NOT_COMPARED = new Set(['template', 'selector', 'activeDeadlineSeconds']);
const MAX_LISTED = 4;

/**
 * Where the existing Job differs from the hook's: paths such as `containers[0].command` (in the
 * pod spec), `metadata.labels["team"]` (the pod template's metadata) or `spec.backoffLimit`
 * (the Job's spec). Empty when it is the hook's Job.
 */
export function adoptionDiff(wanted: unknown, existing: unknown): string[] {
  const w = specOf(wanted);
  const e = specOf(existing);
  const out: string[] = [];
  const wTemplate = withoutControllerLabels(w.template);
  const eTemplate = withoutControllerLabels(e.template);
  diff(field(wTemplate, 'spec'), field(eTemplate, 'spec'), '', out);
  diff(field(wTemplate, 'metadata'), field(eTemplate, 'metadata'), 'metadata', out);
  const keys = new Set([...Object.keys(w), ...Object.keys(e)]);
  for (const key of [...keys].sort()) {
    if (!SPEC_NOT_COMPARED.has(key)) diff(w[key], e[key], `spec.${key}`, out);
  }
  return out;
}

/** The failure message for a Job that is not adopted: which Job, what differs, what to do. */
export function notAdoptedMessage(job: { namespace: string; name: string }, differences: readonly string[], retry: string): string {
  const listed = differences.slice(0, MAX_LISTED).join(', ');
  const more = differences.length > MAX_LISTED ? ` and ${differences.length - MAX_LISTED} more` : '';
  const verb = differences.length === 1 ? 'differs' : 'differ';
  return (
    `Job ${job.namespace}/${job.name} exists but is not the Job this hook would create (${listed}${more} ${verb}): not adopted, ` +
    `and left as it is; delete it (kubectl delete job ${job.name} -n ${job.namespace}) and retry: ${retry}`
  );
}

function specOf(job: unknown): Record<string, unknown> {
  const spec = field(job, 'spec');
  return isPlainObject(spec) ? spec : {};
}

function field(v: unknown, key: string): unknown {
  return isPlainObject(v) ? v[key] : undefined;
}

function withoutControllerLabels(template: unknown): unknown {
  if (!isPlainObject(template) || !isPlainObject(template.metadata) || !isPlainObject(template.metadata.labels)) return template;
  const labels = { ...template.metadata.labels };
  for (const key of JOB_CONTROLLER_LABELS) delete labels[key];
  return { ...template, metadata: { ...template.metadata, labels } };
}

/** Appends the paths where a and b differ; null and absent are the same in Kubernetes JSON. */
function diff(a: unknown, b: unknown, path: string, out: string[]): void {
  if (a === null) a = undefined;
  if (b === null) b = undefined;
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const key of [...keys].sort()) diff(a[key], b[key], join(path, key), out);
    return;
  }
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    a.forEach((item, i) => {
      diff(item, b[i], `${path}[${i}]`, out);
    });
    return;
  }
  if (!same(a, b)) out.push(path || 'the pod spec');
}

function same(a: unknown, b: unknown): boolean {
  if (isPlainObject(a) && Object.keys(a).length === 0 && b === undefined) return true;
  if (isPlainObject(b) && Object.keys(b).length === 0 && a === undefined) return true;
  return a === b;
}

function join(path: string, key: string): string {
  const part = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? key : `[${JSON.stringify(key)}]`;
  if (part.startsWith('[')) return `${path}${part}`;
  return path ? `${path}.${part}` : part;
}
