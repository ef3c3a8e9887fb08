// Sender identity of replies: the HTTP sink checks a reply's bearer token against the hook's
// ServiceAccount (a TokenReview, cached per token), read from the hooks cache so an edited
// identity counts at once.
import type { KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_SINK_AUDIENCE } from '../../sinks/identity.ts';
import { createReplyIdentity, kubeTokenReview, type ReplyIdentity } from '../../sinks/token-review.ts';
import { replyTriggerLookup } from '../../triggers/reply-identity.ts';
import type { GateConfig } from '../config.ts';
import type { Caches } from '../kube/caches.ts';

/** Undefined while replies are not checked (the default). */
export function replyIdentity(kc: KubeConfig, caches: Caches, settings: GateConfig['senderIdentity']): ReplyIdentity | undefined {
  const mode = settings?.replies ?? 'off';
  if (mode === 'off') return undefined;
  return createReplyIdentity({
    mode,
    audience: settings?.audience ?? DEFAULT_SINK_AUDIENCE,
    identityOf: (hook) => caches.catalog.get(hook)?.spec?.identity,
    hookExists: (hook) => caches.catalog.get(hook) !== undefined,
    // Broker-delivered replies come as the gate's reply Trigger's OIDC ServiceAccount.
    replyTriggerOf: replyTriggerLookup(kc, { deliveryOf: (hook) => caches.catalog.get(hook)?.spec?.delivery }),
    review: kubeTokenReview(kc),
  });
}
