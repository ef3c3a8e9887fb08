// Names of the Triggers the gate makes. They are derived from hook and Broker names, which may be
// longer than a Trigger name should be (63: Knative derives names of other objects from them)
// or contain dots (a Broker's name is a DNS subdomain): such names get a hash of the full name as
// suffix, so two different inputs never end up with the same Trigger name.
import { createHash } from 'node:crypto';

export const MAX_NAME_LENGTH = 63;
const HASH_LENGTH = 10;

/** `base` when it is a DNS-1123 label of at most 63 characters, else a shortened form with a hash. */
export function boundedName(base: string): string {
  const label = base.toLowerCase().replace(/[^a-z0-9-]/g, '-');
  if (label === base && label.length <= MAX_NAME_LENGTH && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(label)) return label;
  const hash = createHash('sha256').update(base).digest('hex').slice(0, HASH_LENGTH);
  const head = label
    .slice(0, MAX_NAME_LENGTH - HASH_LENGTH - 1)
    .replace(/-+$/, '')
    .replace(/^-+/, '');
  return head ? `${head}-${hash}` : hash;
}

/** The Trigger delivering one hook's requests to its subscriber. */
export function requestTriggerName(hook: string): string {
  return boundedName(`prestart-hook-${hook}`);
}

/** The gate's Trigger for completed replies on one Broker. */
export function replyTriggerName(broker: string): string {
  return boundedName(`prestart-gate-replies-${broker}`);
}
