// The path every received completed event takes, and what each result means to a sender.
import test from 'ava';
import { flattenHeaders } from '../../../schemas/http-binding.ts';
import { toBinary } from '../../../schemas/index.ts';
import { handleCompleted, httpAnswer } from '../../../sinks/intake.ts';
import { completedEvent, recordingOnReply, requestEvent } from '../../support/events.ts';
import { foreignKeys, keys } from '../../support/keys.ts';

const maxBytes = 65536;

test('a genuine reply reaches onReply with its identity taken from the verified replyid', async (t) => {
  const { seen, onReply } = recordingOnReply();
  const handled = await handleCompleted(toBinary(completedEvent(requestEvent({ hook: 'warm', attempt: 2, uid: 'uid-7' }))), {
    keys,
    maxBytes,
    onReply,
  });
  t.is(handled.outcome, 'applied');
  t.like(seen[0], { hook: 'warm', attempt: 2, namespace: 'shop', revisionUID: 'uid-7' });
});

test('invalid input never reaches onReply and keeps the schemas’ status', async (t) => {
  const { seen, onReply } = recordingOnReply();
  const handled = await handleCompleted(toBinary(completedEvent(requestEvent({ ring: foreignKeys }))), { keys, maxBytes, onReply });
  t.like(handled, { outcome: 'invalid', code: 'bad-replyid', status: 403 });
  t.is(seen.length, 0);
});

test('a throwing onReply is transient, a rejecting one is permanent', async (t) => {
  const message = toBinary(completedEvent());
  const transient = await handleCompleted(message, {
    keys,
    maxBytes,
    onReply: async () => {
      throw new Error('etcd leader election');
    },
  });
  t.is(transient.outcome, 'transient');
  const rejected = await handleCompleted(message, { keys, maxBytes, onReply: async () => ({ type: 'rejected', reason: 'stale' }) });
  t.like(rejected, { outcome: 'rejected', reason: 'stale' });
});

test('HTTP answers: 2xx without a body for taken replies, 4xx with the reason for permanent refusals, 503 for transient', async (t) => {
  const reply = {
    namespace: 'n',
    revision: 'r',
    revisionUID: 'u',
    runUID: 'ru',
    hook: 'h',
    attempt: 1,
    outcome: 'succeeded' as const,
    eventKey: 'k',
  };
  t.deepEqual(httpAnswer({ outcome: 'applied', reply }), { status: 202 });
  t.deepEqual(httpAnswer({ outcome: 'duplicate', reply }), { status: 202 });
  t.deepEqual(httpAnswer({ outcome: 'rejected', reply, reason: 'unknown hook' }), { status: 422, error: 'unknown hook' });
  t.deepEqual(httpAnswer({ outcome: 'invalid', code: 'too-large', status: 413, reason: 'big' }), { status: 413, error: 'big' });
  t.is(httpAnswer({ outcome: 'transient', reply, error: new Error('x') }).status, 503);
});

test('incoming headers become one lowercase value each', (t) => {
  t.deepEqual(flattenHeaders({ 'CE-ID': 'a', via: ['1.1 a', '1.1 b'], none: undefined }), { 'ce-id': 'a', via: '1.1 a, 1.1 b' });
});
