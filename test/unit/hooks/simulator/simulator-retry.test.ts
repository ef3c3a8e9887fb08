// The simulator on a retry reply: the step names when and why, and the verdict is the hold the
// gate would show while it waits to ask again (the simulator does not ask again itself).
import test from 'ava';
import { buildScenario, DEMO_REVISION } from '../../../../hooks/simulator/scenario.ts';
import { judge } from '../../../../hooks/simulator/verdict.ts';

const NOW = new Date('2025-06-01T12:00:00.000Z');

test('a retry reply holds the Revision, saying when the gate asks again and why', (t) => {
  const s = buildScenario({ hook: 'provision-db', url: 'http://127.0.0.1:9', params: {}, now: NOW });
  const v = judge(
    s,
    [
      {
        namespace: 'demo',
        revision: DEMO_REVISION,
        revisionUID: s.run.spec.revisionUID,
        runUID: s.run.uid,
        hook: 'provision-db',
        attempt: 1,
        outcome: 'retry',
        retryAfter: 40,
        message: 'quota busy',
        eventKey: '/hook#1',
      },
    ],
    NOW,
  );
  t.false(v.released);
  t.is(v.hookPhase, 'Requested');
  t.deepEqual(v.steps, ['retry at 2025-06-01T12:00:40.000Z: quota busy']);
  t.is(v.why, 'held: hook provision-db retrying at 12:00:40Z (attempt 2, retry 1 of 10): quota busy');
});
