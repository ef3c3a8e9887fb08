// The hook SDK's handler span with no tracer provider registered (the default): nothing is
// recorded, and the reply carries the request's own traceparent, so the gate's reply span still
// joins the attempt's trace.
import test from 'ava';
import type { HookRequest } from '../../../../hooks/sdk/index.ts';
import { startHandlerSpan } from '../../../../hooks/sdk/trace.ts';
import type { CloudEventRecord } from '../../../../schemas/event.ts';

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

function request(traceparent?: string): HookRequest {
  return {
    hook: 'db',
    version: 2,
    revision: { namespace: 'shop', name: 'checkout-00002', uid: 'u', labels: {}, annotations: {}, images: [], containers: [] },
    params: {},
    attempt: 1,
    deadline: new Date(Date.now() + 60_000),
    allowedContributions: [],
    event: { specversion: '1.0', id: '1', source: '/gate', type: 'revision.prestart.requested', ...(traceparent ? { traceparent } : {}) },
  };
}

const reply = (): CloudEventRecord => ({ specversion: '1.0', id: '2', source: '/hook', type: 'revision.prestart.completed' });

test('the reply continues the request traceparent', async (t) => {
  const span = startHandlerSpan(request(TP));
  t.is(await span.run(async () => 42), 42);
  span.end({ succeeded: true });
  t.is(span.stamp(reply()).traceparent, TP);
});

test('a request without a (valid) traceparent gives a reply without one', (t) => {
  for (const tp of [undefined, 'not-a-traceparent']) {
    const span = startHandlerSpan(request(tp));
    span.end({ thrown: new Error('boom') });
    t.false('traceparent' in span.stamp(reply()));
  }
});
