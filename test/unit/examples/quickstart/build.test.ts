// The binaries phase as a user sees it, with a stand-in for the build script that prints what
// the real one prints (its step lines on stderr) and takes its time: a long first build must
// show as progress, a warm cache as one line, a failure as one reason. A step the stand-in
// "builds" lasts until the test lets it finish (`finish`), once the line the test waits for is
// shown: a sleep would race the reader on a loaded machine (both lines read in one chunk look
// like a cache hit).
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { BuildError, buildBinaries, roughly } from '../../../../examples/quickstart/build.ts';
import type { Output } from '../../../../examples/quickstart/output.ts';

interface StandIn {
  file: string;
  /** Lets a step waiting on `$FINISH` end. */
  finish: () => Promise<void>;
}

async function script(t: ExecutionContext, body: string): Promise<StandIn> {
  const dir = await mkdtemp(join(tmpdir(), 'quickstart-build-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'build-binaries.sh');
  const finishFile = join(dir, 'finish');
  const waitForFinish = `until [ -e '${finishFile}' ]; do sleep 0.05; done`;
  await writeFile(file, `#!/usr/bin/env bash\nset -eu\n${body.replaceAll('$FINISH', waitForFinish)}\n`);
  await chmod(file, 0o755);
  return { file, finish: () => writeFile(finishFile, '') };
}

/** Resolves once a shown line matches (the build runs meanwhile). */
async function shown(lines: string[], pattern: RegExp): Promise<void> {
  while (!lines.some((l) => pattern.test(l))) await new Promise((r) => setTimeout(r, 20));
}

function plainOutput(): { out: Output; lines: string[] } {
  const lines: string[] = [];
  return { lines, out: { tty: false, say: (t) => lines.push(t), block: (t) => lines.push(t), region: () => {}, keepRegion: () => {} } };
}

test('a component that takes its time is announced with its usual first-build time, ticks while it builds, and reports when built', async (t) => {
  const { file, finish } = await script(
    t,
    `
echo "build-binaries: building etcd ..." >&2
echo "build-binaries: etcd built in 0s" >&2
echo "build-binaries: building kubernetes ..." >&2
$FINISH
echo "build-binaries: kubernetes built in 1s" >&2`,
  );
  const { out, lines } = plainOutput();
  const build = buildBinaries(out, new AbortController().signal, { script: file, cacheHitMs: 200, plainTickMs: 300 });
  await shown(lines, /^binaries: still building kubernetes/);
  await finish();
  await build;
  t.is(lines[0], 'binaries: building kubernetes (first run only; about 4 min on a 2-core machine) ...');
  t.true(
    lines.some((l) => /^binaries: still building kubernetes, [\d.]+s so far$/.test(l)),
    lines.join('\n'),
  );
  t.regex(lines.at(-2) ?? '', /^binaries: kubernetes built in [\d.]+s$/);
  t.regex(lines.at(-1) ?? '', /^binaries: cached in .*\/bin \(etcd\)$/, 'the instant ones are one line');
});

test('a short first build is announced in seconds, not "about 0 min"', async (t) => {
  const { file, finish } = await script(
    t,
    `
echo "build-binaries: building knative-serving-images ..." >&2
$FINISH
echo "build-binaries: knative-serving-images built in 0s" >&2`,
  );
  const { out, lines } = plainOutput();
  const build = buildBinaries(out, new AbortController().signal, { script: file, cacheHitMs: 100, plainTickMs: 60_000 });
  await shown(lines, /^binaries: building knative-serving-images/);
  await finish();
  await build;
  t.is(lines[0], 'binaries: building knative-serving-images (first run only; about 20 s on a 2-core machine) ...');
});

test('a failed build ends in one line naming the script and its last words', async (t) => {
  const { file } = await script(t, `echo "build-binaries: no Go toolchain on PATH: install Go >= 1.24 and retry" >&2; exit 1`);
  const { out, lines } = plainOutput();
  const err = await t.throwsAsync(buildBinaries(out, new AbortController().signal, { script: file }), { instanceOf: BuildError });
  t.is(
    err?.message,
    'building the binaries failed (devcluster/build-binaries.sh quickstart, exit 1): no Go toolchain on PATH: install Go >= 1.24 and retry',
  );
  t.deepEqual(lines, ['binaries: no Go toolchain on PATH: install Go >= 1.24 and retry'], 'its lines are shown as they come');
});

test('an interrupt stops the build, and whatever it started, at once', async (t) => {
  const { file } = await script(t, `echo "build-binaries: building kubernetes ..." >&2; sleep 60 & wait`);
  const { out } = plainOutput();
  const interrupt = new AbortController();
  const started = performance.now();
  const build = buildBinaries(out, interrupt.signal, { script: file, cacheHitMs: 50 });
  setTimeout(() => interrupt.abort(), 300);
  await t.throwsAsync(build, { instanceOf: BuildError, message: 'interrupted while building the binaries' });
  t.true(performance.now() - started < 10_000, 'not after the sleep');
});

test('a build estimate reads as seconds under a minute, minutes above (never "about 0 min")', (t) => {
  t.is(roughly(19), '20 s');
  t.is(roughly(2), '5 s');
  t.is(roughly(42), '40 s');
  t.is(roughly(57), '55 s');
  t.is(roughly(59), '1 min', 'never "60 s"');
  t.is(roughly(92), '2 min');
  t.is(roughly(230), '4 min');
});
