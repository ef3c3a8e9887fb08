// The job hook's params (PrestartHook spec.params), checked before anything is created.
import type { V1EnvVar } from '@kubernetes/client-node';
import { isPlainObject, ParamReader } from '../common/params.ts';

export const CLEANUP_POLICIES = ['Always', 'OnSuccess', 'Never'] as const;
export type CleanupPolicy = (typeof CLEANUP_POLICIES)[number];

export interface JobParams {
  /** The image to run; or */
  image?: string;
  /** run the Revision's own image (by digest once Knative resolved it), e.g. for database migrations. */
  useRevisionImage: boolean;
  /** Which container of the Revision useRevisionImage/useRevisionEnv take from; default the first. */
  container?: string;
  /** Give the Job the env and envFrom of that container (its DATABASE_URL and the like). */
  useRevisionEnv: boolean;
  command?: string[];
  args?: string[];
  env: V1EnvVar[];
  /** Retries of a failed pod; default 0: a failed migration is not re-run blindly. */
  backoffLimit: number;
  /** Upper bound on the Job's run time; it never exceeds the hook's deadline anyway. */
  activeDeadlineSeconds?: number;
  /** When the Job is deleted after it finished; default OnSuccess (a failed Job stays for kubectl logs). */
  cleanup: CleanupPolicy;
  /** Runs as this ServiceAccount of the Revision's namespace; without one, the default account with no API token mounted. */
  serviceAccountName?: string;
  podLabels: Record<string, string>;
  podAnnotations: Record<string, string>;
  /** Log lines quoted in a failure message; default 20. */
  logLines: number;
}

export function readJobParams(params: Record<string, unknown>): JobParams | string[] {
  const r = new ParamReader(params);
  const image = r.string('image');
  const useRevisionImage = r.bool('useRevisionImage') ?? false;
  if (image === undefined && !useRevisionImage && !r.problems.some((p) => p.startsWith('params.image'))) {
    r.problem('params.image or params.useRevisionImage: true is required');
  }
  if (image !== undefined && useRevisionImage) r.problem('params.image and params.useRevisionImage: true exclude each other');
  const out: JobParams = {
    useRevisionImage,
    useRevisionEnv: r.bool('useRevisionEnv') ?? false,
    env: readEnv(r),
    backoffLimit: r.int('backoffLimit', { min: 0 }) ?? 0,
    cleanup: r.oneOf('cleanup', CLEANUP_POLICIES) ?? 'OnSuccess',
    podLabels: r.stringMap('podLabels') ?? {},
    podAnnotations: r.stringMap('podAnnotations') ?? {},
    logLines: r.int('logLines', { min: 0 }) ?? 20,
  };
  const optional = {
    image,
    container: r.string('container'),
    command: r.strings('command'),
    args: r.strings('args'),
    activeDeadlineSeconds: r.int('activeDeadlineSeconds', { min: 1 }),
    serviceAccountName: r.string('serviceAccountName'),
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) Object.assign(out, { [k]: v });
  return r.problems.length > 0 ? r.problems : out;
}

/** `env` as a map {NAME: "value"}, or as a list of Kubernetes EnvVars (to use valueFrom). */
function readEnv(r: ParamReader): V1EnvVar[] {
  const v = r.raw('env');
  if (v === undefined) return [];
  if (Array.isArray(v)) {
    const ok = v.every(
      (e) =>
        isPlainObject(e) &&
        typeof e.name === 'string' &&
        e.name !== '' &&
        (e.value === undefined || typeof e.value === 'string') &&
        (e.valueFrom === undefined || isPlainObject(e.valueFrom)),
    );
    if (ok) return v as V1EnvVar[];
  } else if (isPlainObject(v) && Object.values(v).every((s) => typeof s === 'string')) {
    return Object.entries(v as Record<string, string>).map(([name, value]) => ({ name, value }));
  }
  r.problem('params.env must be a map of strings or a list of {name, value | valueFrom}');
  return [];
}
