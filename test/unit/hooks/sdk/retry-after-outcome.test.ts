// retryAfter(): a hook that is not ready yet asks the gate to ask again; the SDK turns it into a
// `retry` reply the schema accepts, or a `failed` one saying why when the delay is unusable.
import test from 'ava';
import { finalEvent } from '../../../../hooks/sdk/outcome.ts';
import { retryAfter } from '../../../../hooks/sdk/types.ts';
import { checkCompletedData } from '../../../../schemas/index.ts';
import { parsed, requestEvent } from '../../../support/events.ts';

const request = parsed(requestEvent({ hook: 'db' }));
const source = '/prestart-hooks/db';

test('retryAfter() becomes a retry reply with the delay in whole seconds and the reason', (t) => {
  const event = finalEvent(request, retryAfter(40, 'quota busy', 'https://quota.example/db'), source);
  t.deepEqual(event.data, { outcome: 'retry', message: 'quota busy', details: 'https://quota.example/db', retryAfter: 40 });
  t.true(checkCompletedData(event.data).ok);
  t.like(finalEvent(request, retryAfter(0.2, 'soon'), source).data, { outcome: 'retry', retryAfter: 1 }, 'a fraction rounds up');
});

test('an unusable delay ends the attempt as failed, saying why', (t) => {
  t.like(finalEvent(request, retryAfter(-1, 'x'), source).data, {
    outcome: 'failed',
    message: 'the hook returned a retryAfter that is not a positive number of seconds',
  });
  t.like(finalEvent(request, retryAfter(100_000, 'x'), source).data, {
    outcome: 'failed',
    message: 'the hook returned an invalid outcome: data/retryAfter must be <= 86400',
  });
});
