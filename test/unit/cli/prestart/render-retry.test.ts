// `kn prestart list/get/why` for a hook that asked to be asked again (outcome retry): when, why,
// and which attempt comes next; and, once asked again, how many retries it took.
import test from 'ava';
import type { RunObject } from '../../../../api/resources.ts';
import type { HookStatus } from '../../../../api/types.ts';
import { renderRunList, renderRunTree, retryText, whyParagraph } from '../../../../cli/prestart/render.ts';

const NOW = new Date('2025-01-01T00:10:00.000Z');
const quota = {
  name: 'quota',
  order: 0,
  timeoutSeconds: 600,
  resendIntervalSeconds: 30,
  retryAfter: { maxDelaySeconds: 300, maxRetries: 5 },
  failurePolicy: 'Fail' as const,
  allowedContributions: [],
  delivery: { transport: 'http' as const, url: 'http://x/' },
};

function run(hook: HookStatus): RunObject {
  return {
    metadata: { name: 'demo-00002', namespace: 'team-a', creationTimestamp: new Date('2025-01-01T00:05:00.000Z') },
    spec: { revisionUID: 'u', hooks: [quota] },
    status: { phase: 'Running', hooks: [hook], conditions: [], summary: '0/1' },
  };
}

const waiting: HookStatus = {
  name: 'quota',
  phase: 'Requested',
  attempt: 2,
  deadline: '2025-01-01T00:15:00.000Z',
  retryAt: '2025-01-01T00:10:40.000Z',
  retries: 2,
  retryReason: 'quota busy',
};

test('retryText: the countdown, the reason and the attempt to come, with the limit from the snapshot', (t) => {
  t.is(retryText(waiting, quota, NOW), 'retrying in 40s: quota busy (attempt 3, retry 2 of 5)');
  t.is(retryText(waiting, undefined, new Date('2025-01-01T00:11:00.000Z')), 'retrying now: quota busy (attempt 3, retry 2)');
  t.is(retryText({ name: 'quota', phase: 'Requested', attempt: 3, retries: 2 }, quota, NOW), 'after 2 retries');
  t.is(retryText({ name: 'quota', phase: 'Requested', attempt: 1 }, quota, NOW), '');
});

test('get, why and list show the retry', (t) => {
  const r = run(waiting);
  t.regex(
    renderRunTree(r, NOW),
    /◌ quota {2}Requested {2}attempt 2 {2}retrying in 40s: quota busy \(attempt 3, retry 2 of 5\) {2}deadline in 5m0s/,
  );
  t.is(
    whyParagraph(r, NOW),
    'Revision demo-00002 in team-a is held while it waits for hook quota (order 0, attempt 2, retrying in 40s: quota busy (attempt 3, retry 2 of 5), times out in 5m0s). Nothing to do unless it is stuck: watch it with kn prestart get demo-00002 -n team-a -w.',
  );
  t.regex(renderRunList([r], NOW), /Running {2}0\/1 {4}5m0s {2}quota retrying in 40s: quota busy \(attempt 3, retry 2 of 5\)$/m);
});
