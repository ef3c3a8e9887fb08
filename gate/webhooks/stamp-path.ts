// Who stamps a new Revision: the apiserver (config/230-stamp-mutating-policy.yaml, two
// MutatingAdmissionPolicies and their bindings, served from Kubernetes 1.36) or the gate's Revision
// webhook. The apiserver stamps only when all four objects are there: a policy without its binding
// does nothing, and without the strip policy a Revision no hook matches would keep forged keys.
// Anything else (an older apiserver answers 404 for the resource, a read is refused, fails or
// times out) keeps the webhook: registering it beside the policies is harmless, as both write the
// same stamp, while dropping it with no policy in place would refuse every hooked Revision.
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { errorLine, isNotFound, statusOf } from '../../api/kube-errors.ts';

export type Stamper = 'apiserver' | 'webhook';

export const STAMP_POLICIES: readonly string[] = ['prestart-stamp-revisions', 'prestart-strip-revisions'];

const GROUP = 'admissionregistration.k8s.io';
const VERSION = 'v1';
const KINDS = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'] as const;

export interface StampPath {
  stamper: Stamper;
  /** Why, for a log line or `kn prestart plan`. */
  why: string;
  /** Set when the apiserver could not be asked (refused or failed): the answer is a fallback. */
  unknown?: boolean;
}

export async function whoStamps(api: CustomObjectsApi): Promise<StampPath> {
  const missing: string[] = [];
  for (const plural of KINDS) {
    for (const name of STAMP_POLICIES) {
      try {
        await api.getClusterCustomObject({ group: GROUP, version: VERSION, plural, name });
      } catch (err) {
        if (!isNotFound(err)) {
          const refused = statusOf(err) === 403;
          return {
            stamper: 'webhook',
            unknown: true,
            why: `could not read ${plural}/${name} (${errorLine(err)})${refused ? '' : '; asking again later'}`,
          };
        }
        missing.push(`${plural}/${name}`);
      }
    }
  }
  if (missing.length === 0) {
    return { stamper: 'apiserver', why: `MutatingAdmissionPolicies ${STAMP_POLICIES.join(', ')} and their bindings are installed` };
  }
  return { stamper: 'webhook', why: `not installed or not served: ${missing.join(', ')}` };
}
