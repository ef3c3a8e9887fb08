// The details link (issue 12, item 5): a reply's optional `details` lands in the hook's status,
// survives a later reply without one, and goes wherever the outcome is told; the SDK sends it.
import test from 'ava';
import { decideRevision } from '../../../../gate/core/decide-revision.ts';
import { describeOutcome } from '../../../../gate/core/status.ts';
import { finalEvent, progressEvent } from '../../../../hooks/sdk/outcome.ts';
import { fail } from '../../../../hooks/sdk/types.ts';
import { answer, apply, at, heldRevision, hook, observed, ofType } from './_builders.ts';

const LOGS = 'kubectl logs job/migrate-hello-00001 -n team-a --all-containers';

test('a progress reply’s details are kept by the final reply without any, and shown in the failure line, Event and condition', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = apply(o, decideRevision(o).actions);
  o = answer({ ...o, now: at(2) }, 'db', { outcome: 'progress', progress: 10, message: 'Job created', details: LOGS });
  t.is(o.run?.status?.hooks[0]?.details, LOGS);
  o = answer({ ...o, now: at(3) }, 'db', { outcome: 'failed', message: 'exit code 3' });
  t.is(o.run?.status?.hooks[0]?.details, LOGS);
  const d = decideRevision(o);
  t.true(ofType(d, 'recordEvent')[0]?.message.startsWith(`hook db failed: exit code 3 (details: ${LOGS}); retry: `));
  t.regex(ofType(d, 'setRevisionCondition')[0]?.condition.message ?? '', new RegExp(`\\(details: ${LOGS}\\)`));
});

test('a details-only change is a progress update, not a duplicate', (t) => {
  let o = observed(heldRevision(['db']), [hook('db')]);
  o = apply(o, decideRevision(o).actions);
  o = answer({ ...o, now: at(2) }, 'db', { outcome: 'progress', progress: 10 });
  o = answer({ ...o, now: at(3) }, 'db', { outcome: 'progress', progress: 10, details: 'https://ci.example/7' });
  t.is(o.run?.status?.hooks[0]?.details, 'https://ci.example/7');
});

test('describeOutcome without details is unchanged', (t) => {
  t.is(describeOutcome({ name: 'db', phase: 'Failed', attempt: 1, message: 'boom' }), 'hook db failed: boom');
});

test('the SDK sends details with a final outcome and a progress report, as one line', (t) => {
  const request = { correlationid: 'c', hook: 'db', attempt: 1 };
  t.like(finalEvent(request, fail('exit code 3', LOGS), '/h').data, { outcome: 'failed', message: 'exit code 3', details: LOGS });
  t.like(progressEvent(request, 50, 'running', '/h', 'kubectl logs\njob/x').data, { outcome: 'progress', details: 'kubectl logs job/x' });
  t.like(finalEvent(request, { succeeded: false, message: 'x', details: 3 }, '/h').data, {
    outcome: 'failed',
    message: 'the hook returned details that are not a string',
  });
});
