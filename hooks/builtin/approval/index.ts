// The `approval` built-in hook: holds a Revision until enough authorised people approve it
// (released) or one rejects it (failed, with who and why). See decision.ts for how a decision
// is recorded, rules.ts for what counts, and config/610-approval-policy.yaml for who may write one.
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
import { CREATOR_ANNOTATION, readDecisions } from './decision.ts';
import { decisionEventRecorder } from './events.ts';
import { countText, readRules, type Tally, tally, tallyMessage } from './rules.ts';

export { ApproveError, type ApproveOptions, type ApproveResult, approveRevision, whoAmI } from './approve.ts';
export {
  APPROVAL_BY_PREFIX,
  APPROVAL_GROUPS_PREFIX,
  APPROVAL_MESSAGE_PREFIX,
  APPROVAL_VERDICT_PREFIX,
  type ApprovalVerdict,
  type Approver,
  CREATOR_ANNOTATION,
  type Decision,
  decidedAt,
  decisionAnnotations,
  decisionId,
  describeDecision,
  readDecisions,
} from './decision.ts';
export { type ApprovalRules, countText, readRules, type Tally, tally, tallyMessage } from './rules.ts';

/** The PrestartRun keeps a hook's message up to 4096 characters. */
const MAX_MESSAGE = 4000;

export function createApprovalHandler(opts: BuiltinHookOptions): HookHandler {
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const pollMaxMs = opts.pollMaxMs ?? DEFAULT_POLL_MAX_MS;
  const recordEvent = decisionEventRecorder(opts.kubeConfig, opts.logger);

  return async (req, ctx) => {
    const verified = await verifyRequest(custom, req, ctx.signal);
    if (typeof verified === 'string') return fail(verified);
    const r = new ParamReader(verified.params);
    const rules = readRules(r);
    if (r.problems.length > 0) return fail(paramsMessage(req.hook, r.problems));

    const { namespace, name } = req.revision;
    const where = `Revision ${namespace}/${name}`;
    const commands = `knative-prestart approve ${name} -n ${namespace} --message "…" (or: knative-prestart reject ${name} -n ${namespace} --message "…")`;
    const started = Date.now();
    let noted = '';
    const told = new Set<string>();
    let last: Tally | undefined;

    const look = async (): Promise<Tally | undefined> => {
      const revision = (await custom.getNamespacedCustomObject({
        group: REVISIONS.group,
        version: REVISIONS.version,
        plural: REVISIONS.plural,
        namespace,
        name,
      })) as RevisionResource;
      if (revision.metadata?.uid !== req.revision.uid) throw new Error(`${where} was replaced by another of the same name`);
      const { decisions, invalid } = readDecisions(revision.metadata);
      const t = tally(decisions, rules, revision.metadata?.annotations?.[CREATOR_ANNOTATION]);
      last = t;
      for (const d of decisions) {
        const key = `${d.id}/${d.verdict}`;
        if (told.has(key)) continue;
        told.add(key);
        const ignored = t.ignored.find((i) => i.decision === d);
        const effect = ignored ? `does not count: ${ignored.why}` : t.outcome === 'rejected' ? 'rejected' : countText(t);
        await recordEvent({ revision: req.revision, hook: req.hook, decision: d, effect });
      }
      if (t.outcome !== 'waiting') return t;
      const text = [tallyMessage(t), ...invalid.map((i) => `ignored: ${i}`)].join('; ');
      if (text !== noted) {
        noted = text;
        const outOf = Math.max(t.needed, t.approvals.length + t.missing.length);
        await ctx.progress(Math.min(99, Math.floor((100 * t.approvals.length) / outOf)), clip(`waiting for approval: ${text}`), commands);
      }
      return undefined;
    };

    let outcome: Tally | undefined;
    try {
      outcome = await pollUntil(look, { signal: ctx.signal, until: giveUpAt(req.deadline), maxMs: pollMaxMs, logger: ctx.logger });
    } catch (err) {
      ctx.signal.throwIfAborted();
      return fail(`cannot read ${where}: ${errorLine(err)}`);
    }
    if (!outcome) {
      return fail(
        clip(
          `nobody approved or rejected ${where} enough within ${humanDuration(Date.now() - started)}` +
            `${last ? ` (${tallyMessage(last)})` : ''}. To approve it now: ${commands.replace(/ \(or: .*$/, '')}, then re-run the hook: ` +
            `kubectl annotate prestartrun ${name} -n ${namespace} prestart.dev/retry=$(date +%s) --overwrite`,
        ),
      );
    }
    if (outcome.outcome === 'approved') return succeed(clip(tallyMessage(outcome)));
    return fail(clip(tallyMessage(outcome)), 'a rejection is final for this Revision: change the Service to make a new one');
  };
}

function clip(text: string): string {
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 1)}…` : text;
}

export function serveApprovalHook(opts: ServeBuiltinOptions): Promise<HookServer> {
  return serveBuiltin('approval', createApprovalHandler(opts), opts);
}
