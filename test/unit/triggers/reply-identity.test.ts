// Sender identity on the Broker road, the Trigger side: the reply Trigger asks Eventing for a token
// for the sink's audience, and only the gate's own reply Trigger on the hook's Broker lends its
// OIDC ServiceAccount to replies.
import test from 'ava';
import { desiredTriggers } from '../../../triggers/desired.ts';
import { replyTriggerName, requestTriggerName } from '../../../triggers/names.ts';
import { triggerServiceAccount } from '../../../triggers/reply-identity.ts';
import { brokerHook, GATE } from './_hooks.ts';

const hooks = [brokerHook('db', { name: 'default', namespace: 'shop', subscriber: { uri: 'http://db.shop.svc/' } })];

test('with identity on, the reply Trigger’s subscriber names the sink’s audience; the request Trigger does not', (t) => {
  const triggers = desiredTriggers(hooks, { ...GATE, audience: 'knative-prestart-gate' });
  const reply = triggers.find((tr) => tr.metadata.name === replyTriggerName('default'));
  const request = triggers.find((tr) => tr.metadata.name === requestTriggerName('db'));
  t.deepEqual(reply?.spec.subscriber, { uri: GATE.uri, audience: 'knative-prestart-gate' });
  t.deepEqual(request?.spec.subscriber, { uri: 'http://db.shop.svc/' });
});

test('with identity off, no audience is set (the Trigger is as before)', (t) => {
  const reply = desiredTriggers(hooks, GATE).find((tr) => tr.metadata.name === replyTriggerName('default'));
  t.deepEqual(reply?.spec.subscriber, { uri: GATE.uri });
});

test('only a managed Trigger on the hook’s Broker with status.auth lends its ServiceAccount', (t) => {
  const managed = { 'app.kubernetes.io/managed-by': 'knative-prestart' };
  const live = (labels: Record<string, string>, broker: string, sa?: string) => ({
    metadata: { labels },
    spec: { broker },
    status: sa === undefined ? {} : { auth: { serviceAccountName: sa } },
  });
  t.is(triggerServiceAccount(live(managed, 'default', 'r-oidc'), 'default'), 'r-oidc');
  t.is(triggerServiceAccount(live(managed, 'default'), 'default'), undefined, 'Eventing has not set status.auth (OIDC off)');
  t.is(triggerServiceAccount(live({}, 'default', 'r-oidc'), 'default'), undefined, 'someone else’s Trigger of that name');
  t.is(triggerServiceAccount(live(managed, 'other', 'r-oidc'), 'default'), undefined, 'a Trigger on another Broker');
  t.is(triggerServiceAccount(undefined, 'default'), undefined);
});
