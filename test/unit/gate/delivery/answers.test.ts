// What comes back with a request enters the state the way every reply does: through the intake
// the sinks use, with the core's rules for refusals and invalid synchronous answers.
import test from 'ava';
import pino from 'pino';
import { requestRef } from '../../../../gate/core/index.ts';
import { takeAnswers } from '../../../../gate/delivery/answers.ts';
import { toBinary } from '../../../../schemas/index.ts';
import { createIntake } from '../../../../sinks/intake.ts';
import { completedEvent, recordingOnReply, requestEvent } from '../../../support/events.ts';
import { foreignKeys, keys } from '../../../support/keys.ts';

const log = pino({ level: 'silent' });
const request = requestRef({ namespace: 'shop', name: 'web-00002', uid: 'uid-web-00002' }, 'run-uid-web-00002', 'db-migrate', 1);

function intake() {
  const { seen, onReply } = recordingOnReply();
  return { seen, intake: createIntake({ keys, maxBytes: 65536, onReply }) };
}

test('a synchronous reply is parsed, verified and recorded like one a sink received', async (t) => {
  const { seen, intake: into } = intake();
  const message = toBinary(completedEvent(requestEvent(), { message: 'migrated at once' }));
  await takeAnswers([{ request, result: { type: 'replied', message } }], into, log);
  t.is(seen.length, 1);
  t.like(seen[0], { hook: 'db-migrate', attempt: 1, outcome: 'succeeded', message: 'migrated at once' });
});

test('an invalid synchronous reply fails the hook with the reason the intake gave', async (t) => {
  const { seen, intake: into } = intake();
  const message = toBinary(completedEvent(requestEvent({ ring: foreignKeys })));
  await takeAnswers([{ request, result: { type: 'replied', message } }], into, log);
  t.is(seen.length, 1);
  t.like(seen[0], { ...request, outcome: 'failed', eventKey: 'gate/delivery-failure' });
  t.regex(seen[0]?.message ?? '', /^the hook answered with an invalid reply: /);
});

test('a permanent refusal fails the hook; a retriable one and an accepted request record nothing', async (t) => {
  const { seen, intake: into } = intake();
  await takeAnswers(
    [
      { request, result: { type: 'accepted' } },
      { request, result: { type: 'undelivered', retriable: true, reason: 'POST http://db/: hook answered 503' } },
      {
        request: { ...request, hook: 'cache' },
        result: { type: 'undelivered', retriable: false, reason: 'POST http://cache/: hook answered 404' },
      },
    ],
    into,
    log,
  );
  t.deepEqual(
    seen.map((r) => [r.hook, r.outcome, r.message]),
    [['cache', 'failed', 'the hook could not take the request: POST http://cache/: hook answered 404']],
  );
});
