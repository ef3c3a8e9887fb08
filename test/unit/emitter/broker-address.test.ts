// Which Broker addresses the gate sends to (emitter/broker-address.ts addressOf): only what
// Eventing could have written, since a namespace editor may write any Broker's status.
import test from 'ava';
import { addressOf, BROKER_CLASS_ANNOTATION, type BrokerObject, brokerAudience } from '../../../emitter/broker-address.ts';
import { TransportError } from '../../../emitter/transport.ts';

const URL = 'http://broker-ingress.knative-eventing.svc.cluster.local/shop/default';

function broker(
  over: { class?: string | null; ready?: string; observed?: number; audience?: string; addresses?: boolean } = {},
): BrokerObject {
  const address = { url: URL, ...(over.audience === undefined ? {} : { audience: over.audience }) };
  return {
    metadata: {
      generation: 2,
      annotations: over.class === null ? {} : { [BROKER_CLASS_ANNOTATION]: over.class ?? 'MTChannelBasedBroker' },
    },
    status: {
      observedGeneration: over.observed ?? 2,
      conditions: [{ type: 'Ready', status: over.ready ?? 'True' }],
      ...(over.addresses ? { addresses: [{}, address] } : { address }),
    },
  };
}

const refused = (b: BrokerObject, classes?: string[]) => {
  try {
    addressOf(b, 'shop', 'default', classes);
  } catch (err) {
    if (err instanceof TransportError) return { message: err.message, retriable: err.retriable };
    throw err;
  }
  return undefined;
};

test('the audience Eventing gives a Broker: eventing.knative.dev/broker/<namespace>/<name>, lower case', (t) => {
  t.is(brokerAudience('shop', 'default'), 'eventing.knative.dev/broker/shop/default');
  t.is(brokerAudience('shop', 'Default'), 'eventing.knative.dev/broker/shop/default');
});

test('a Ready Broker of a known class: its URL, and its own audience when it announces one', (t) => {
  t.deepEqual(addressOf(broker(), 'shop', 'default'), { url: URL });
  t.deepEqual(addressOf(broker({ audience: 'eventing.knative.dev/broker/shop/default' }), 'shop', 'default'), {
    url: URL,
    audience: 'eventing.knative.dev/broker/shop/default',
  });
  t.deepEqual(
    addressOf(broker({ class: 'Kafka', addresses: true }), 'shop', 'default'),
    { url: URL },
    'status.addresses when address is absent',
  );
});

test('another audience is refused, whichever: the apiserver’s, another Broker’s, another namespace’s', (t) => {
  for (const audience of [
    'https://kubernetes.default.svc.cluster.local',
    'eventing.knative.dev/broker/shop/other',
    'eventing.knative.dev/broker/bank/default',
    'knative-prestart-gate',
  ]) {
    const r = refused(broker({ audience }));
    t.is(
      r?.message,
      `Broker shop/default announces the audience ${JSON.stringify(audience)}, but Eventing gives it "eventing.knative.dev/broker/shop/default": the gate sends it nothing (a token of the gate for another audience may be good elsewhere as the gate)`,
      audience,
    );
    t.true(r?.retriable, 'its controller may yet write the right one');
  }
});

test('a class no known controller reconciles, or none, is refused unless the admin trusts it', (t) => {
  t.regex(
    refused(broker({ class: 'Homemade' }))?.message ?? '',
    /^Broker shop\/default has class "Homemade", which is not one the gate trusts to write its status \(MTChannelBasedBroker, Kafka, KafkaNamespaced; --broker-class adds one\)/,
  );
  t.regex(refused(broker({ class: null }))?.message ?? '', /has class \(none\)/);
  t.deepEqual(addressOf(broker({ class: 'RabbitMQBroker' }), 'shop', 'default', ['RabbitMQBroker']), { url: URL });
});

test('not Ready, or Ready for an older generation: nothing yet', (t) => {
  t.is(
    refused(broker({ ready: 'False' }))?.message,
    'Broker shop/default is not Ready (Ready=False): the gate sends only to a Ready Broker',
  );
  t.is(
    refused(broker({ observed: 1 }))?.message,
    "Broker shop/default's status is for generation 1, not its current 2: waiting for Eventing to reconcile it",
  );
  const noConditions = broker();
  delete noConditions.status?.conditions;
  t.regex(refused(noConditions)?.message ?? '', /is not Ready \(no Ready condition\)/);
});
