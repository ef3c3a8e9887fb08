// A team's hooks share their namespace's send slots (gate/delivery/send-queue.ts perNamespace):
// twenty hooks of one namespace that all hang hold that many, and another team's hook and the
// admin's hooks still send.
import test from 'ava';
import { type SendJob, SendQueue } from '../../../../gate/delivery/send-queue.ts';

const tick = () => new Promise((resolve) => setImmediate(resolve));

test("one namespace's hooks, all hanging, take their namespace's slots only", async (t) => {
  const queue = new SendQueue({ perHook: 8, overall: 64, perNamespace: 4 });
  const started: string[] = [];
  let release: () => void = () => undefined;
  const hang = new Promise<void>((resolve) => {
    release = resolve;
  });
  const job = (lane: string, key: string, group?: string): SendJob => ({
    lane,
    key,
    ...(group === undefined ? {} : { group }),
    run: async () => {
      started.push(key);
      await hang;
    },
  });
  // Team A: 20 hooks, 50 Revisions each, every send hanging.
  for (let h = 0; h < 20; h++) for (let r = 0; r < 50; r++) queue.add(job(`team-a/h${h}`, `team-a/rev-${r}/team-a/h${h}/start`, 'team-a'));
  queue.add(job('team-b/migrate', 'team-b/web-1/team-b/migrate/start', 'team-b'));
  queue.add(job('scan', 'team-c/api-1/scan/start'));
  await tick();
  t.is(started.filter((k) => k.startsWith('team-a/')).length, 4, "team A holds its namespace's 4 slots");
  t.true(started.includes('team-b/web-1/team-b/migrate/start'), "another team's hook is sent");
  t.true(started.includes('team-c/api-1/scan/start'), "the admin's hook is sent");
  t.is(queue.sending, 6);
  release();
  await queue.idle();
  t.is(started.length, 1002);
});
