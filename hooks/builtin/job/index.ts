// The `job` built-in hook: runs a Kubernetes Job for each Revision (and attempt) in the
// Revision's namespace, and answers with how it ended. With params.useRevisionImage it runs the
// Revision's own image, like Heroku's release phase or Fly's release_command: migrate the
// database before the new code takes traffic. That image is the digest the request named (the
// one every hook was asked about), confirmed against the PrestartRun (image.ts).
import { BatchV1Api, CoreV1Api, CustomObjectsApi, type V1Container, type V1Job, type V1Pod } from '@kubernetes/client-node';
import type { HookServer } from '../../sdk/http.ts';
import { CancelledError, DeadlineError, fail, type HookHandler, type HookRequest, succeed } from '../../sdk/types.ts';
import { giveUpAt, humanDuration } from '../common/deadline.ts';
import { errorLine, statusOf } from '../common/kube.ts';
import { paramsMessage } from '../common/params.ts';
import { pollUntil, withRetries } from '../common/poll.ts';
import { type BuiltinHookOptions, DEFAULT_POLL_MAX_MS, type ServeBuiltinOptions, serveBuiltin } from '../common/serve.ts';
import { type RevisionResource, type VerifiedRequest, verifyRequest } from '../common/verify.ts';
import { deleteJob, ensureJob } from './ensure.ts';
import { imageFromRequest } from './image.ts';
import { buildJob, JOB_CONTAINER } from './manifest.ts';
import { type JobParams, readJobParams } from './params.ts';
import { untrustedRun } from './ran.ts';
import { describePodFailure, type FailureReport, failureMessage, jobState, lastFailedPod } from './status.ts';

export { buildJob, jobName } from './manifest.ts';
export { type CleanupPolicy, type JobParams, readJobParams } from './params.ts';

const LOG_TIMEOUT_MS = 10_000;
const CONTROLLER_UID_LABEL = 'batch.kubernetes.io/controller-uid';

export function createJobHandler(opts: BuiltinHookOptions): HookHandler {
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const batch = opts.kubeConfig.makeApiClient(BatchV1Api);
  const core = opts.kubeConfig.makeApiClient(CoreV1Api);
  const pollMaxMs = opts.pollMaxMs ?? DEFAULT_POLL_MAX_MS;

  return async (req, ctx) => {
    const verified = await verifyRequest(custom, req, ctx.signal);
    if (typeof verified === 'string') return fail(verified);
    const params = readJobParams(verified.params);
    if (Array.isArray(params)) return fail(paramsMessage(req.hook, params));
    const source = revisionContainer(verified, req.revision.containers, params);
    if (typeof source === 'string') return fail(source);

    const namespace = req.revision.namespace;
    const started = Date.now();
    const giveUp = giveUpAt(req.deadline);
    // The Job stops itself a margin before the hook gives up, so its own DeadlineExceeded is what gets reported.
    const jobEnds = giveUp.getTime() - (req.deadline.getTime() - giveUp.getTime());
    const leftSeconds = Math.max(1, Math.floor((jobEnds - started) / 1000));
    const manifest = buildJob({
      namespace,
      revision: { name: req.revision.name, uid: req.revision.uid },
      hook: req.hook,
      attempt: req.attempt,
      image: source.image,
      params,
      ...(source.container ? { revisionContainer: source.container } : {}),
      activeDeadlineSeconds: Math.min(params.activeDeadlineSeconds ?? leftSeconds, leftSeconds),
    });
    const name = manifest.metadata?.name ?? '';
    const job = { namespace, name, where: `${namespace}/${name}` };
    // The details link of every reply: the command that prints this Job's logs.
    const logs = `kubectl logs job/${name} -n ${namespace} --all-containers`;
    const retry = `kubectl annotate prestartrun ${req.revision.name} -n ${namespace} prestart.dev/retry=$(date +%s) --overwrite`;
    // Until the Job is ours (created or adopted), a cancel deletes whatever Job holds the name, as
    // before; after, only the Job of that uid.
    let uid: string | undefined;
    const remove = () => deleteJob(batch, namespace, name, uid);

    try {
      const ensured = await ensureJob({ batch, custom }, manifest, req.revision.uid, giveUp, ctx, retry);
      if ('error' in ensured) return fail(ensured.error);
      uid = ensured.uid;
      await ctx.progress(5, ensured.outcome === 'created' ? `Job ${job.where} created` : `Job ${job.where} exists: waiting for it`, logs);

      let reported = '';
      const ended = await pollUntil(
        async () => {
          let current: V1Job;
          try {
            current = await batch.readNamespacedJob({ name, namespace });
          } catch (err) {
            if (statusOf(err) === 404) return { gone: true as const };
            throw err;
          }
          // Someone deleted the Job and made another under its name: that one was not checked.
          if (current.metadata?.uid !== ensured.uid) return { replaced: true as const };
          const state = jobState(current);
          if (state.state !== 'running') return { job: current, state };
          const note = state.active > 0 ? `Job ${job.where} running` : `Job ${job.where} starting`;
          const line = state.failed > 0 ? `${note}; ${state.failed} of ${params.backoffLimit + 1} tries failed` : note;
          if (line !== reported) {
            reported = line;
            await ctx.progress(state.active > 0 ? 50 : 10, line, logs);
          }
          return undefined;
        },
        { signal: ctx.signal, until: giveUp, maxMs: pollMaxMs, logger: ctx.logger },
      );

      if (!ended) {
        await remove();
        return fail(
          `Job ${job.where} was still running when the hook's time ran out (${humanDuration(Date.now() - started)}); it was deleted`,
        );
      }
      if ('gone' in ended) return fail(`Job ${job.where} was deleted before it finished`);
      if ('replaced' in ended) {
        return fail(`Job ${job.where} was deleted and another Job made under its name while the hook waited: not adopted; retry: ${retry}`);
      }
      if (ended.state.state === 'complete') {
        const pods = await jobPods(core, job, ensured.uid, ctx.signal);
        const distrust = typeof pods === 'string' ? pods : untrustedRun(job, manifest.spec?.template ?? {}, pods);
        // The Job stays, for whoever looks into it.
        if (distrust) return fail(distrust, logs);
        const cleaned = params.cleanup !== 'Never' && (await remove());
        const done = succeed(`Job ${job.where} completed${cleaned ? ' and was deleted' : ''}`);
        return cleaned ? done : { ...done, details: logs };
      }
      const { reason, message } = ended.state;
      const report = await failureReport(core, ended.job, { namespace, name, reason, message, logLines: params.logLines });
      if (params.cleanup === 'Always') await remove();
      // A deleted Job has no logs left to print: the link only while it exists.
      return params.cleanup === 'Always' ? fail(failureMessage(report)) : fail(failureMessage(report), logs);
    } catch (err) {
      // The gate cancelled the Revision, or its deadline passed: the Job belongs to nobody now.
      // On shutdown the Job is left alone: the re-sent request will find it.
      const reason: unknown = ctx.signal.reason;
      if (ctx.signal.aborted && (reason instanceof CancelledError || reason instanceof DeadlineError)) {
        const deleted = await remove();
        ctx.logger.info({ job: job.where, deleted, reason: (reason as Error).message }, 'run aborted; Job deleted');
      }
      throw err;
    }
  };
}

export function serveJobHook(opts: ServeBuiltinOptions): Promise<HookServer> {
  return serveBuiltin('job', createJobHandler(opts), opts);
}

/** The image to run and, for useRevisionEnv, the Revision's container; or why there is none. */
function revisionContainer(
  verified: VerifiedRequest,
  requested: HookRequest['revision']['containers'],
  params: JobParams,
): { image: string; container?: V1Container } | string {
  const { revision } = verified;
  const where = `${revision.metadata?.namespace}/${revision.metadata?.name}`;
  let image = params.image;
  let name = params.container;
  if (params.useRevisionImage) {
    const chosen = imageFromRequest({ requested, recorded: verified.run.spec.containers, container: params.container, revision: where });
    if (typeof chosen === 'string') return chosen;
    ({ image, name } = chosen);
  }
  if (!params.useRevisionEnv) return image ? { image } : 'params.image or params.useRevisionImage: true is required';
  const container = envSource(revision, name);
  if (!container) {
    return name ? `Revision ${where} has no container "${name}" (params.container)` : `Revision ${where} has no container`;
  }
  return image ? { image, container } : 'params.image or params.useRevisionImage: true is required';
}

/** The spec container whose env and envFrom useRevisionEnv gives the Job: by name, or the first. */
function envSource(revision: RevisionResource, name: string | undefined): V1Container | undefined {
  const containers = revision.spec?.containers ?? [];
  return name ? containers.find((c) => c.name === name) : containers[0];
}

/** The pods of the Job of that uid (the label the Job API puts on them), or why they cannot be listed. */
async function jobPods(
  core: CoreV1Api,
  { namespace, where }: { namespace: string; where: string },
  uid: string,
  signal: AbortSignal,
): Promise<V1Pod[] | string> {
  try {
    const list = await withRetries(() => core.listNamespacedPod({ namespace, labelSelector: `${CONTROLLER_UID_LABEL}=${uid}` }), signal);
    return list.items;
  } catch (err) {
    signal.throwIfAborted();
    return `Job ${where} completed, but its pods cannot be listed to check what ran: ${errorLine(err)}`;
  }
}

async function failureReport(
  core: CoreV1Api,
  job: V1Job,
  r: { namespace: string; name: string; reason: string; message: string; logLines: number },
): Promise<FailureReport> {
  const report: FailureReport = {
    namespace: r.namespace,
    job: r.name,
    reason: r.reason,
    message: r.message,
    logs: { unavailable: 'no failed pod' },
  };
  const uid = job.metadata?.uid;
  const pods = uid
    ? await core
        .listNamespacedPod({ namespace: r.namespace, labelSelector: `${CONTROLLER_UID_LABEL}=${uid}` })
        .then((l) => l.items)
        .catch(() => [])
    : [];
  const pod = lastFailedPod(pods);
  if (!pod?.metadata?.name) return report;
  report.pod = { name: pod.metadata.name, failure: describePodFailure(pod) };
  report.logs =
    r.logLines === 0 ? { unavailable: 'params.logLines is 0' } : await tailLogs(core, r.namespace, pod.metadata.name, r.logLines);
  return report;
}

/** The end of the pod's log. Fake nodes (kwok) and nodes that already dropped the pod have none. */
async function tailLogs(core: CoreV1Api, namespace: string, pod: string, lines: number): Promise<FailureReport['logs']> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the kubelet did not answer within ${LOG_TIMEOUT_MS / 1000}s`)), LOG_TIMEOUT_MS);
  });
  try {
    const text = await Promise.race([
      core.readNamespacedPodLog({ name: pod, namespace, container: JOB_CONTAINER, tailLines: lines, limitBytes: 16 * 1024 }),
      timeout,
    ]);
    const got = String(text ?? '').trimEnd();
    return { lines: got, count: got === '' ? 0 : got.split('\n').length };
  } catch (err) {
    return { unavailable: errorLine(err).split('\n')[0] ?? 'unknown error' };
  } finally {
    clearTimeout(timer);
  }
}
