// The checker against real hook services: the TypeScript example and an SDK hook in sync mode
// pass; each deliberately broken hook fails, on its rule, with a message that says what to fix.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import test, { type ExecutionContext } from 'ava';
import { start as startExample } from '../../../../examples/typescript-binding-hook/index.ts';
import { failuresOf, runConformance } from '../../../../hooks/conformance/index.ts';
import { RULES_WITHOUT_IDENTITY } from '../../../../hooks/conformance/rules.ts';
import { fail, succeed } from '../../../../hooks/sdk/index.ts';
import { start as nonCloudEventBody } from '../../../fixtures/broken-hooks/non-cloudevent-body.ts';
import { start as nonIdempotent } from '../../../fixtures/broken-hooks/non-idempotent.ts';
import { start as wrongReplyId } from '../../../fixtures/broken-hooks/wrong-replyid.ts';
import { hookFor, silent } from '../_support.ts';

const fast = { timeoutMs: 10_000, quietMs: 300 };

test('the TypeScript example passes every rule', async (t) => {
  const hook = await startExample({ port: 0, host: '127.0.0.1', durationMs: 300, logger: silent });
  t.teardown(() => hook.close());
  const report = await runConformance(hook.url, { hook: 'provision-db', ...fast });
  t.deepEqual(failuresOf(report), []);
  t.true(report.passed);
  t.deepEqual(
    [...new Set(report.checks.map((c) => c.rule))].sort(),
    [...RULES_WITHOUT_IDENTITY].sort(),
    'every rule was checked (R10 only with --identity)',
  );
});

test('an SDK hook in sync mode passes too (200 with the completed event)', async (t) => {
  const hook = await hookFor(t, {
    name: 'quick',
    mode: 'sync',
    handler: async (req) => (req.params.fail ? fail('asked to') : succeed('done')),
  });
  const report = await runConformance(hook.url, { hook: 'quick', ...fast });
  t.deepEqual(failuresOf(report), []);
  t.regex(report.checks[0]?.detail ?? '', /succeeded "done" in the 200 answer/);
});

test('a hook that runs twice and answers differently fails R2, naming both outcomes', async (t) => {
  const hook = await nonIdempotent('db');
  t.teardown(() => hook.close());
  const report = await runConformance(hook.url, { hook: 'db', ...fast });
  t.false(report.passed);
  t.deepEqual(
    failuresOf(report).map((c) => c.rule),
    ['R2-idempotent-on-redelivery'],
  );
  t.is(
    failuresOf(report)[0]?.detail,
    'sent again after it finished, the request got a different outcome: first succeeded "database created", then failed "database already exists": the handler ran twice; remember finished results and send the same one again',
  );
});

test('a hook that echoes the wrong replyid fails R6, showing what it sent', async (t) => {
  const hook = await wrongReplyId('db');
  t.teardown(() => hook.close());
  const report = await runConformance(hook.url, { hook: 'db', ...fast });
  const r6 = failuresOf(report, 'R6-reply-carries-replyid');
  t.is(r6.length, 1);
  t.regex(
    r6[0]?.detail ?? '',
    /^reply [0-9a-f-]+… has replyid "[0-9a-f-]+\/db\/1", which is not the request's correlationid "eyJ[^"]+" \(and \d+ more\): copy the request's ce-correlationid into ce-replyid byte for byte$/,
  );
  t.is(
    failuresOf(report, 'R1-replies-with-valid-completed')[0]?.detail,
    'the valid request (binary mode): no reply the gate accepts (see R6)',
  );
});

test('a hook that answers 200 {"status":"ok"} fails R5 and nothing else', async (t) => {
  const hook = await nonCloudEventBody('db');
  t.teardown(() => hook.close());
  const report = await runConformance(hook.url, { hook: 'db', ...fast });
  t.deepEqual(
    failuresOf(report).map((c) => c.rule),
    ['R5-no-non-cloudevent-2xx-body'],
  );
  t.regex(
    failuresOf(report)[0]?.detail ?? '',
    /^the valid request \(binary mode\) was answered 200 with a body that is not a CloudEvent \(application\/json; charset=utf-8\): \{"status":"ok"\} \(and \d+ more\): a Broker turns that into a 502 and retries, so the hook runs again; answer 202 with an empty body$/,
  );
});

/**
 * A hook whose validator refuses data members it does not know (422), in front of a correct SDK
 * hook that gets everything else: the mistake R9 exists for, and nothing besides.
 */
async function strictFront(t: ExecutionContext, behind: string): Promise<string> {
  const known = new Set(['action', 'reason', 'revision', 'hook', 'attempt', 'deadline', 'replyTo', 'contributions']);
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    let data: unknown;
    try {
      const json = JSON.parse(body.toString('utf8')) as { data?: unknown };
      data = String(headers['content-type']).startsWith('application/cloudevents') ? json.data : json;
    } catch {
      data = undefined;
    }
    const unknown = data && typeof data === 'object' ? Object.keys(data).find((k) => !known.has(k)) : undefined;
    if (unknown) {
      res.writeHead(422, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `data has an unknown member "${unknown}"` }));
      return;
    }
    const answer = await fetch(behind, { method: 'POST', headers, body });
    const relayed = Buffer.from(await answer.arrayBuffer());
    res.writeHead(answer.status, Object.fromEntries(answer.headers)).end(relayed);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

test('a hook that refuses data members it does not know fails R9 and nothing else', async (t) => {
  const hook = await hookFor(t, { name: 'db', mode: 'sync', handler: async () => succeed('done') });
  const report = await runConformance(await strictFront(t, hook.url), { hook: 'db', ...fast });
  t.deepEqual(
    failuresOf(report).map((c) => c.rule),
    ['R9-takes-newer-requests'],
  );
  t.regex(
    failuresOf(report)[0]?.detail ?? '',
    /^a valid request with data members a newer gate may add answered 422: .*unknown member \\"priority\\".* \(it carries data members a newer gate may add: ignore members you do not know\)/,
  );
});

test('a hook serving another name fails R1 with a hint at --hook', async (t) => {
  const hook = await hookFor(t, { name: 'something-else', handler: async () => succeed() });
  const report = await runConformance(hook.url, { hook: 'db', timeoutMs: 500, quietMs: 100 });
  t.regex(
    failuresOf(report, 'R1-replies-with-valid-completed')[0]?.detail ?? '',
    /no final completed event .* serves this hook name \(--hook\)$/,
  );
});

test('nothing listening is one clear failure', async (t) => {
  const [port] = await freePorts(1);
  const url = `http://127.0.0.1:${port}`;
  const report = await runConformance(url, { hook: 'db', waitForHookMs: 200 });
  t.false(report.passed);
  t.deepEqual(report.checks, [
    {
      rule: 'R1-replies-with-valid-completed',
      passed: false,
      detail: `nothing answers at ${url} (fetch failed (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:${port}))`,
    },
  ]);
});
