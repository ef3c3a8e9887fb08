import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { drainDone, trackRequests } from '../../../../gate/server/drain.ts';

const o = { quietMs: 5_000, maxMs: 20_000 };

test('a drain ends only when nothing is in flight and no request came for the quiet period', (t) => {
  t.false(drainDone({ inFlight: 0, lastRequestAt: 0, startedAt: 1_000 }, 5_999, o), 'quiet counts from the start');
  t.true(drainDone({ inFlight: 0, lastRequestAt: 0, startedAt: 1_000 }, 6_000, o));
  t.false(drainDone({ inFlight: 0, lastRequestAt: 4_000, startedAt: 1_000 }, 8_000, o), 'a request restarts the quiet period');
  t.true(drainDone({ inFlight: 0, lastRequestAt: 4_000, startedAt: 1_000 }, 9_000, o));
  t.false(drainDone({ inFlight: 1, lastRequestAt: 0, startedAt: 1_000 }, 20_999, o), 'a request in flight holds it');
  t.true(drainDone({ inFlight: 1, lastRequestAt: 20_000, startedAt: 1_000 }, 21_000, o), 'the bound ends it whatever arrives');
});

function get(port: number, path: string): Promise<{ status: number; connection: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ port, host: '127.0.0.1', path, agent: false, headers: { connection: 'keep-alive' } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => {
        body += d.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('a draining server answers what arrives, closing each connection after it, and ends after the quiet period', async (t) => {
  let release: () => void = () => undefined;
  const slow = new Promise<void>((resolve) => {
    release = resolve;
  });
  let arrived: () => void = () => undefined;
  const slowArrived = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const server = createServer((req, res) => {
    if (req.url === '/slow') {
      arrived();
      void slow.then(() => res.end('slow done'));
    } else res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const drainer = trackRequests([server]);
  t.is((await get(port, '/')).connection, 'keep-alive', 'before the drain connections are kept');

  const inFlight = get(port, '/slow');
  await slowArrived;
  let ended = false;
  const drained = drainer.drain({ quietMs: 200, maxMs: 10_000 }).then(() => {
    ended = true;
  });
  const during = await get(port, '/');
  t.deepEqual([during.status, during.connection], [200, 'close'], 'answered while draining, then the connection closes');
  // Twice the quiet period with nothing arriving: only the request in flight can hold it.
  await new Promise((resolve) => setTimeout(resolve, 400));
  t.false(ended, 'a request in flight holds the drain');
  release();
  t.is((await inFlight).body, 'slow done', 'the request in flight is answered');
  await drained;
  t.true(ended);
  server.close();
});

test("the kubelet's probes and Prometheus' scrapes do not keep a drain going", async (t) => {
  const server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const drainer = trackRequests([server]);
  let drained = false;
  const done = drainer.drain({ quietMs: 300, maxMs: 60_000 }).then(() => {
    drained = true;
  });
  let probes = 0;
  while (!drained) {
    const res = await get(port, probes % 2 === 0 ? '/readyz' : '/metrics');
    t.is(res.connection, 'close');
    probes++;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await done;
  t.true(probes >= 4, `${probes} probes while draining`);
  server.close();
});
