// `knative-prestart approve`: records a decision on a held Revision as the user of the
// kubeconfig. The username is the one the apiserver authenticates (SelfSubjectReview), not a
// name the kubeconfig claims, and the approval policy refuses any other.
import { AuthenticationV1Api, CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { REVISIONS, RUNS, type RunObject } from '../../../api/resources.ts';
import { errorLine, statusOf } from '../common/kube.ts';
import { APPROVAL_ANNOTATION, APPROVAL_BY_ANNOTATION, APPROVAL_REASON_ANNOTATION, type ApprovalVerdict } from './decision.ts';

export const APPROVE_FIELD_MANAGER = 'knative-prestart-approve';

export interface ApproveOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  revision: string;
  verdict: ApprovalVerdict;
  reason?: string;
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
  const user = await whoAmI(opts.kubeConfig);
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const where = `${opts.namespace}/${opts.revision}`;
  try {
    await custom.patchNamespacedCustomObject(
      {
        group: REVISIONS.group,
        version: REVISIONS.version,
        plural: REVISIONS.plural,
        namespace: opts.namespace,
        name: opts.revision,
        fieldManager: APPROVE_FIELD_MANAGER,
        body: {
          metadata: {
            annotations: {
              [APPROVAL_ANNOTATION]: opts.verdict,
              [APPROVAL_BY_ANNOTATION]: user,
              [APPROVAL_REASON_ANNOTATION]: opts.reason?.trim() ? opts.reason.trim() : null,
            },
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  } catch (err) {
    if (statusOf(err) === 404) throw new ApproveError(`there is no Revision ${where}`);
    throw new ApproveError(
      `the apiserver refused the ${opts.verdict === 'approved' ? 'approval' : 'rejection'} of ${where} by ${user}: ${message(err)}`,
    );
  }
  const result: ApproveResult = { user };
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
    result.hint = `its PrestartRun has failed hooks (a rejection or a timeout ends the approval hook); re-run them: kubectl annotate prestartrun ${opts.revision} -n ${opts.namespace} prestart.dev/retry=$(date +%s) --overwrite`;
  }
  return result;
}

async function whoAmI(kc: KubeConfig): Promise<string> {
  try {
    const review = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    });
    const user = review.status?.userInfo?.username;
    if (user) return user;
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
