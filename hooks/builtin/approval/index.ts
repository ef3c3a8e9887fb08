// The `approval` built-in hook: holds a Revision until an authorised person approves it
// (released) or rejects it (held, with who and why). See decision.ts for how a decision is
// recorded, and config/610-approval-policy.yaml for who may make one.
import { CustomObjectsApi } from '@kubernetes/client-node';
import { REVISIONS } from '../../../api/resources.ts';
import type { HookServer } from '../../sdk/http.ts';
import { fail, type HookHandler, succeed } from '../../sdk/types.ts';
import { giveUpAt, humanDuration } from '../common/deadline.ts';
import { errorLine } from '../common/kube.ts';
import { ParamReader, paramsMessage } from '../common/params.ts';
import { pollUntil } from '../common/poll.ts';
import { type BuiltinHookOptions, DEFAULT_POLL_MAX_MS, type ServeBuiltinOptions, serveBuiltin } from '../common/serve.ts';
import { type RevisionResource, verifyRequest } from '../common/verify.ts';
import { type Decision, describeDecision, readDecision } from './decision.ts';

export { ApproveError, type ApproveOptions, type ApproveResult, approveRevision } from './approve.ts';
export {
  APPROVAL_ANNOTATION,
  APPROVAL_BY_ANNOTATION,
  APPROVAL_REASON_ANNOTATION,
  type ApprovalVerdict,
  type Decision,
  decidedAt,
  describeDecision,
  readDecision,
} from './decision.ts';

export function createApprovalHandler(opts: BuiltinHookOptions): HookHandler {
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const pollMaxMs = opts.pollMaxMs ?? DEFAULT_POLL_MAX_MS;

  return async (req, ctx) => {
    const verified = await verifyRequest(custom, req, ctx.signal);
    if (typeof verified === 'string') return fail(verified);
    const r = new ParamReader(verified.params);
    // Narrows who counts beyond the policy's RBAC check, per hook (e.g. production needs the SRE lead).
    const approvers = r.strings('approvers');
    if (r.problems.length > 0) return fail(paramsMessage(req.hook, r.problems));

    const { namespace, name } = req.revision;
    const where = `Revision ${namespace}/${name}`;
    const command = `knative-prestart approve ${name} -n ${namespace}`;
    await ctx.progress(0, `waiting for approval: ${command} (or --reject --reason "…")`);
    const started = Date.now();
    let noted = '';

    let decision: Decision | undefined;
    try {
      decision = await pollUntil(
        async () => {
          const revision = (await custom.getNamespacedCustomObject({
            group: REVISIONS.group,
            version: REVISIONS.version,
            plural: REVISIONS.plural,
            namespace,
            name,
          })) as RevisionResource;
          if (revision.metadata?.uid !== req.revision.uid) throw new Error(`${where} was replaced by another of the same name`);
          const read = readDecision(revision.metadata);
          let ignored: string | undefined;
          if (read && 'invalid' in read) ignored = read.invalid;
          else if (read && approvers && !approvers.includes(read.by)) {
            ignored = `${describeDecision(read)}, but this hook counts only ${approvers.join(', ')} (params.approvers)`;
          } else return read;
          if (ignored !== noted) {
            noted = ignored;
            await ctx.progress(0, `waiting for approval (${command}); ignored: ${ignored}`);
          }
          return undefined;
        },
        { signal: ctx.signal, until: giveUpAt(req.deadline), maxMs: pollMaxMs, logger: ctx.logger },
      );
    } catch (err) {
      ctx.signal.throwIfAborted();
      return fail(`cannot read ${where}: ${errorLine(err)}`);
    }
    if (!decision) {
      return fail(
        `nobody approved or rejected ${where} within ${humanDuration(Date.now() - started)}. ` +
          `To approve it now: ${command}, then re-run the hook: kubectl annotate prestartrun ${name} -n ${namespace} prestart.dev/retry=$(date +%s) --overwrite`,
      );
    }
    return decision.verdict === 'approved' ? succeed(describeDecision(decision)) : fail(describeDecision(decision));
  };
}

export function serveApprovalHook(opts: ServeBuiltinOptions): Promise<HookServer> {
  return serveBuiltin('approval', createApprovalHandler(opts), opts);
}
