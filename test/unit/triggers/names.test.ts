import test from 'ava';
import { boundedName, replyTriggerName, requestTriggerName } from '../../../triggers/names.ts';

test('short names are kept as they are', (t) => {
  t.is(requestTriggerName('db-migrate'), 'prestart-hook-db-migrate');
  t.is(replyTriggerName('default'), 'prestart-gate-replies-default');
});

test('a Broker name with dots becomes a DNS-1123 label that differs from the dashed spelling', (t) => {
  const dotted = replyTriggerName('team.events');
  const dashed = replyTriggerName('team-events');
  t.regex(dotted, /^prestart-gate-replies-team-events-[0-9a-f]{10}$/);
  t.is(dashed, 'prestart-gate-replies-team-events');
});

test('names are deterministic and never longer than 63', (t) => {
  const long = 'x'.repeat(200);
  t.is(boundedName(long), boundedName(long));
  t.is(boundedName(long).length, 63);
  t.not(boundedName(long), boundedName(`${long}y`));
  t.regex(boundedName(`${'-'.repeat(80)}`), /^[0-9a-f]{10}$/);
});
