// The gate's own tokens for hooks (gate/delivery/sa-tokens.ts): kept per audience, replaced at 80%
// of their life, the old one used while a refresh fails and it still lives.
import test from 'ava';
import { createTokenSource, REFUSAL_KEPT_MS, refreshAt, refuseApiserverAudiences } from '../../../../gate/delivery/sa-tokens.ts';

test('a token is replaced at 80% of its lifetime', (t) => {
  t.is(refreshAt(0, 1000), 800);
  t.is(refreshAt(500, 400), 500, 'a token already expired is replaced at once');
});

test('one mint per audience until 80% of the lifetime, then a new one', async (t) => {
  let now = 0;
  const mints: string[] = [];
  const source = createTokenSource(
    async (audience) => {
      mints.push(audience);
      return { token: `${audience}-${mints.length}`, expiresAt: now + 1000 };
    },
    () => now,
  );
  t.is(await source.token('a'), 'a-1');
  t.is(await source.token('a'), 'a-1');
  t.is(await source.token('b'), 'b-2');
  now = 799;
  t.is(await source.token('a'), 'a-1');
  now = 800;
  t.is(await source.token('a'), 'a-3');
  t.is(source.minted, 3);
});

test('a failed refresh keeps the live token; an expired one is never handed out', async (t) => {
  let now = 0;
  let fail = false;
  const source = createTokenSource(
    async () => {
      if (fail) throw new Error('apiserver unavailable');
      return { token: 'tok', expiresAt: now + 1000 };
    },
    () => now,
  );
  await source.token('a');
  fail = true;
  now = 900;
  t.is(await source.token('a'), 'tok');
  now = 1000;
  await t.throwsAsync(source.token('a'), { message: /unavailable/ });
});

test('a token the apiserver accepts is never handed out: its audience is refused, and not minted for again for a while', async (t) => {
  let now = 0;
  const mints: string[] = [];
  const mint = refuseApiserverAudiences(
    async (audience) => {
      mints.push(audience);
      return { token: `tok-for-${audience}`, expiresAt: now + 3_600_000 };
    },
    async (token) => token === 'tok-for-https://kubernetes.default.svc',
    () => now,
  );
  const err = await t.throwsAsync(mint('https://kubernetes.default.svc'));
  t.is(
    err?.message,
    'the apiserver accepts a token for the audience "https://kubernetes.default.svc": one sent there would be the gate\'s own credentials, so the gate mints none for it',
  );
  await t.throwsAsync(mint('https://kubernetes.default.svc'), { message: /the apiserver accepts/ });
  t.is(mints.length, 1, 'refused without minting again');
  now = REFUSAL_KEPT_MS;
  await t.throwsAsync(mint('https://kubernetes.default.svc'));
  t.is(mints.length, 2, 'asked again once the refusal has aged');
  t.is((await mint('eventing.knative.dev/broker/shop/default')).token, 'tok-for-eventing.knative.dev/broker/shop/default');
});
