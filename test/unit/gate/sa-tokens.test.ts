// The gate's own tokens for hooks (gate/shell/sa-tokens.ts): kept per audience, replaced at 80%
// of their life, the old one used while a refresh fails and it still lives.
import test from 'ava';
import { createTokenSource, refreshAt } from '../../../gate/shell/sa-tokens.ts';

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
