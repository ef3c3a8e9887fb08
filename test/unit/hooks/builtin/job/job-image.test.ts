// The job hook's useRevisionImage: it runs the digest the request named, confirmed against what
// the gate recorded on the PrestartRun, and never guesses for a request that names no containers.
import test from 'ava';
import type { ContainerImage } from '../../../../../api/types.ts';
import { imageFromRequest } from '../../../../../hooks/builtin/job/image.ts';

const APP = `registry.example/shop/checkout@sha256:${'2c'.repeat(32)}`;
const MIGRATE = `registry.example/shop/migrate@sha256:${'fc'.repeat(32)}`;
const containers: ContainerImage[] = [
  { name: 'migrate', image: 'registry.example/shop/migrate:v2', digest: MIGRATE, init: true },
  { name: 'user-container', image: 'registry.example/shop/checkout:v2', digest: APP },
  { name: 'cache-warmer', image: 'kind.local/shop/cache-warmer:dev' },
];
const input = (over: Partial<Parameters<typeof imageFromRequest>[0]> = {}) => ({
  requested: containers,
  recorded: containers,
  container: undefined,
  revision: 'shop/checkout-00002',
  ...over,
});

test('the first container that is not an init container runs by the digest the request named', (t) => {
  t.deepEqual(imageFromRequest(input()), { name: 'user-container', image: APP });
});

test('params.container picks any container; one Knative does not resolve runs its image as written', (t) => {
  t.deepEqual(imageFromRequest(input({ container: 'cache-warmer' })), { name: 'cache-warmer', image: 'kind.local/shop/cache-warmer:dev' });
  t.deepEqual(imageFromRequest(input({ container: 'migrate' })), { name: 'migrate', image: MIGRATE });
});

test('a request from a version 1 gate fails the hook: it does not say what will run', (t) => {
  const why = imageFromRequest(input({ requested: undefined }));
  t.is(typeof why, 'string');
  t.regex(why as string, /^the request names no containers \(it comes from a gate older than protocol version 2\)/);
  t.regex(why as string, /upgrade the gate, or name params\.image$/);
});

test('a container the request does not name fails the hook, with the names it has', (t) => {
  t.is(
    imageFromRequest(input({ container: 'worker' })),
    'the request names no container "worker" (params.container) of Revision shop/checkout-00002; it names: migrate, user-container, cache-warmer',
  );
  t.is(
    imageFromRequest(input({ requested: [containers[0] as ContainerImage] })),
    'the request names no container of Revision shop/checkout-00002 that is not an init container (it names: migrate)',
  );
});

test('a request whose digest the PrestartRun does not record is not run (a made-up request)', (t) => {
  const forged = containers.map((c) =>
    c.name === 'user-container' ? { ...c, digest: `attacker.example/x@sha256:${'00'.repeat(32)}` } : c,
  );
  t.is(
    imageFromRequest(input({ requested: forged })),
    `cannot confirm the request's image: it names attacker.example/x@sha256:${'00'.repeat(32)} for container "user-container", but PrestartRun shop/checkout-00002 records ${APP}`,
  );
  t.regex(
    imageFromRequest(input({ recorded: undefined })) as string,
    /PrestartRun shop\/checkout-00002 records no container "user-container"/,
  );
  // Dropping the digest is no way around it: the image as written is not what the run recorded either.
  const undigested = containers.map((c) => (c.name === 'user-container' ? { name: c.name, image: c.image } : c));
  t.regex(
    imageFromRequest(input({ requested: undigested })) as string,
    /names registry\.example\/shop\/checkout:v2 for container "user-container"/,
  );
});
