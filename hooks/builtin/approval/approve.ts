// `knative-prestart approve|reject`: records the decision of the user of the kubeconfig on a held
// Revision. Who that is (username and groups) is what the apiserver authenticates
// (SelfSubjectReview), not what the kubeconfig claims, and the approval policy refuses any other.
import { AuthenticationV1Api, CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { REVISIONS, RUNS, type RunObject } from '../../../api/resources.ts';
import { errorLine, statusOf } from '../common/kube.ts';
import type { RevisionResource } from '../common/verify.ts';
import { type ApprovalVerdict, type Approver, decisionAnnotations, decisionId, describeDecision, readDecisions } from './decision.ts';

/** Each person writes as a field manager of their own, so managedFields keeps the time of each decision. */
export const APPROVE_FIELD_MANAGER = 'knative-prestart-approve';

export interface ApproveOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  revision: string;
  verdict: ApprovalVerdict;
  message?: string;
}

export interface ApproveResult {
  user: string;
  /** What to tell the user next, e.g. how to re-run hooks that already failed. */
  hint?: string;
}

/** Refused by the apiserver or not possible; the message is meant for the user as is. */
export class ApproveError extends Error {
  override readonly name = 'ApproveError';
}

export async function approveRevision(opts: ApproveOptions): Promise<ApproveResult> {
  const me = await whoAmI(opts.kubeConfig);
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const where = `${opts.namespace}/${opts.revision}`;
  const what = opts.verdict === 'approved' ? 'approval' : 'rejection';
  const target = {
    group: REVISIONS.group,
    version: REVISIONS.version,
    plural: REVISIONS.plural,
    namespace: opts.namespace,
    name: opts.revision,
  };
  let current: RevisionResource;
  try {
    current = (await custom.getNamespacedCustomObject(target)) as RevisionResource;
  } catch (err) {
    if (statusOf(err) === 404) throw new ApproveError(`there is no Revision ${where}`);
    throw new ApproveError(`cannot read Revision ${where} as ${me.username}: ${message(err)}`);
  }
  // Writing the same decision again would change nothing, so the apiserver would not refuse it: say so here.
  const mine = readDecisions(current.metadata).decisions.find((d) => d.username === me.username);
  if (mine) {
    throw new ApproveError(
      `${me.username} already decided on Revision ${where}: ${describeDecision(mine)}. A decision is final; nothing was changed`,
    );
  }
  try {
    await custom.patchNamespacedCustomObject(
      {
        ...target,
        fieldManager: `${APPROVE_FIELD_MANAGER}-${decisionId(me.username)}`,
        body: { metadata: { annotations: decisionAnnotations(me, opts.verdict, opts.message) } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  } catch (err) {
    if (statusOf(err) === 404) throw new ApproveError(`there is no Revision ${where}`);
    throw new ApproveError(`the apiserver refused the ${what} of ${where} by ${me.username}: ${message(err)}`);
  }
  const result: ApproveResult = { user: me.username };
  const run = await custom
    .getNamespacedCustomObject({
      group: RUNS.group,
      version: RUNS.version,
      plural: RUNS.plural,
      namespace: opts.namespace,
      name: opts.revision,
    })
    .then((r) => r as RunObject)
    .catch(() => undefined);
  if (opts.verdict === 'approved' && run?.status?.phase === 'Failed') {
    result.hint = `its PrestartRun has failed hooks (a timeout ends the approval hook); once enough approvals are in, re-run them: kubectl annotate prestartrun ${opts.revision} -n ${opts.namespace} prestart.dev/retry=$(date +%s) --overwrite`;
  }
  return result;
}

/** The user of `kc` as the apiserver authenticates them. */
export async function whoAmI(kc: KubeConfig): Promise<Approver> {
  try {
    const review = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    });
    const info = review.status?.userInfo;
    if (info?.username) return { username: info.username, groups: info.groups ?? [] };
    throw new Error('the apiserver returned no username');
  } catch (err) {
    throw new ApproveError(`cannot tell who you are (SelfSubjectReview): ${errorLine(err)}`);
  }
}

/** The apiserver's own sentence (the policy's message), without the HTTP wrapping. */
function message(err: unknown): string {
  const line = errorLine(err);
  return line.replace(/^HTTP \d+: /, '');
}
