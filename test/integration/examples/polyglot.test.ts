// The Python and Go example hooks, each a real child process on 127.0.0.1: the conformance
// checker finds every rule kept, and each language's own tests pass every shared vector a hook
// can check (schemas/vectors/). The TypeScript example's check is in test/integration/hooks/.
// Serial: each child and build takes a core, and R7 times the answers.
import test, { type ExecutionContext } from 'ava';
import { failuresOf, formatReport, runConformance } from '../../../hooks/conformance/index.ts';
import { RULES_WITHOUT_IDENTITY } from '../../../hooks/conformance/rules.ts';
import {
  buildGoExample,
  type Finished,
  GO_EXAMPLE,
  HOOK_NAME,
  hookVectorFiles,
  MissingToolError,
  PYTHON_EXAMPLE,
  type RunningHook,
  runGo,
  runToEnd,
  startHook,
  venvPython,
} from './_examples.ts';

/** A missing virtualenv or toolchain fails the test with its one-line reason, not a stack. */
async function needs<T>(t: ExecutionContext, get: () => T | Promise<T>): Promise<T | undefined> {
  try {
    return await get();
  } catch (err) {
    if (!(err instanceof MissingToolError)) throw err;
    t.fail(err.message);
    return undefined;
  }
}

async function passesConformance(t: ExecutionContext, hook: RunningHook): Promise<void> {
  t.teardown(() => hook.stop());
  // busyAttempts: attempt 1 finds the database quota busy and asks to be asked again in 1 s (R11).
  const retryParams = { busyAttempts: 1, busySeconds: 1 };
  const report = await runConformance(hook.url, { hook: HOOK_NAME, timeoutMs: 10_000, quietMs: 300, retryParams });
  const explain = `${formatReport(report, { verbose: true })}\n--- the hook's output:\n${hook.output()}`;
  t.deepEqual(failuresOf(report), [], explain);
  t.true(report.passed, explain);
  t.deepEqual(
    [...new Set(report.checks.map((c) => c.rule))].sort(),
    [...RULES_WITHOUT_IDENTITY, 'R11-retry-well-formed-and-honoured'].sort(),
    'every rule was checked (R10 only with --identity)',
  );
  t.regex(
    report.checks.find((c) => c.rule === 'R11-retry-well-formed-and-honoured')?.detail ?? '',
    /^attempt 1: retry "retry: database quota busy \(attempt 1\)" after 1 s, asked again 1\.0 s later; attempt 2: succeeded "database retry ready/,
    explain,
  );
}

/** Each vector file must show up as a passed case of the test that reads that folder. */
function everyVectorPassed(t: ExecutionContext, output: string, passed: (folder: string, file: string) => RegExp): void {
  const missing = hookVectorFiles().filter((path) => {
    const [kind, verdict, file] = path.split('/') as [string, string, string];
    return !passed(`${kind}/${verdict}`, file).test(output);
  });
  t.deepEqual(missing, [], `vectors without a passed case:\n${output}`);
}

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

test.serial('the Python example passes every conformance rule', async (t) => {
  const python = await needs(t, venvPython);
  if (!python) return;
  await passesConformance(t, await startHook(python, ['app.py'], PYTHON_EXAMPLE));
});

test.serial("the Python example's own tests pass every shared vector", async (t) => {
  const python = await needs(t, venvPython);
  if (!python) return;
  const run = await runToEnd(python, ['-m', 'pytest', '-v'], {
    cwd: PYTHON_EXAMPLE,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    timeoutMs: 90_000,
  });
  t.is(run.code, 0, run.output);
  t.regex(run.output, /\d+ passed/);
  t.notRegex(run.output, /\d+ (failed|skipped|error)/);
  const functions: Record<string, string> = {
    'requested/valid': 'test_takes_valid_request',
    'requested/invalid': 'test_refuses_invalid_request',
    'completed/valid': 'test_builds_replies_the_gate_accepts',
    'completed/invalid': 'test_refuses_what_the_gate_refuses',
  };
  everyVectorPassed(t, run.output, (folder, file) => new RegExp(`::${functions[folder]}\\[${literal(file)}\\] PASSED`));
});

test.serial('the Go example passes every conformance rule', async (t) => {
  const binary = await needs(t, buildGoExample);
  if (!binary) return;
  await passesConformance(t, await startHook(binary, [], GO_EXAMPLE));
});

test.serial("the Go example's own tests pass every shared vector", async (t) => {
  const run: Finished | undefined = await needs(t, () => runGo(['test', '-count=1', '-v', './...'], 100_000));
  if (!run) return;
  t.is(run.code, 0, run.output);
  t.regex(run.output, /^ok\s+prestart\.dev\/examples\/go-binding-hook/m);
  const functions: Record<string, string> = {
    'requested/valid': 'TestTakesValidRequests',
    'requested/invalid': 'TestRefusesInvalidRequests',
    'completed/valid': 'TestBuildsRepliesTheGateAccepts',
    'completed/invalid': 'TestRefusesWhatTheGateRefuses',
  };
  everyVectorPassed(t, run.output, (folder, file) => new RegExp(`--- PASS: ${functions[folder]}/${literal(file)} `));
});
