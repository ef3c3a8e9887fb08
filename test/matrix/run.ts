// `npm run test:matrix [-- <cell>...]`: the compatibility matrix. Each cell builds its versions
// (cached side by side in the binary cache, so a cell's second run builds nothing) and runs, on a
// real control plane and the real node of that Kubernetes with Knative from that release as pods:
// the seed's flow with the real kn, the tenant attack suites, the upgrade from our previous release
// with Revisions held, and the Broker road. It writes each cell's row into docs/compatibility.md as
// soon as the cell ends. Not part of CI, which runs the default cell (devcluster/versions.env).
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILD_SCRIPT_PATH, cacheDir, VERSIONS_FILE, VERSIONS_FILE_ENV } from '@knative-prestart/devcluster/binaries.ts';
import { type Cell, cellVersionsFile, selectCells } from './cells.ts';
import { type CellResult, mergeResults, parseRows, versionsOf, writeCells } from './report.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DOC = join(root, 'docs', 'compatibility.md');

/** What each cell runs: [label, test/run.ts arguments]. */
export const SUITES: readonly (readonly [string, readonly string[]])[] = [
  // The seed's flow with the real kn and curl through the activator, on the real node.
  ['seed flow', ['--e2e', 'test/e2e/gate-pods.test.ts']],
  // Adoption, status writes and relinking against Knative's own controllers (R1–R3 and controls).
  ['attacks on Knative', ['--e2e', 'test/e2e/adoption.test.ts']],
  // The same families and the rest of the policies, in the apiserver alone.
  ['attacks in the apiserver', ['test/integration/security/']],
  // Upgrade from our previous release with Revisions held, then disruptions and uninstall.
  ['upgrade and disruption', ['--e2e', 'test/e2e/gate-pods-disruption.test.ts']],
  // The Broker road as pods: Eventing's data plane, a hook behind a Trigger, the release.
  ['broker road', ['--e2e', 'test/e2e/broker-pods.test.ts']],
];

const say = (line: string) => process.stdout.write(`test:matrix: ${line}\n`);
const minutes = (ms: number) => {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
};

/** Runs a command with the cell's versions, echoing its output; resolves with its code and the last "N passed, N failed". */
function run(cmd: string, args: readonly string[], versionsFile: string): Promise<{ code: number; tally?: string }> {
  return new Promise((done) => {
    const child = spawn(cmd, args, {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, [VERSIONS_FILE_ENV]: versionsFile },
    });
    let tally: string | undefined;
    let pending = '';
    child.stdout.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      const lines = (pending + chunk.toString('utf8')).split('\n');
      pending = lines.pop() ?? '';
      for (const l of lines) {
        const m = /^tests: (\d+ passed, \d+ failed)/.exec(l);
        if (m) tally = m[1];
      }
    });
    child.on('error', () => done({ code: 127 }));
    child.on('close', (code, signal) => done({ code: code ?? (signal ? 128 : 1), tally }));
  });
}

async function runCell(c: Cell): Promise<CellResult> {
  const dir = join(cacheDir(), 'matrix');
  mkdirSync(dir, { recursive: true });
  const versionsFile = join(dir, `${c.id}.env`);
  writeFileSync(versionsFile, cellVersionsFile(readFileSync(VERSIONS_FILE, 'utf8'), c));
  const base = { id: c.id, versions: versionsOf(c), date: new Date().toISOString().slice(0, 10) };

  say(`${c.id}: building (${base.versions})`);
  const t0 = performance.now();
  const built = await run('bash', [BUILD_SCRIPT_PATH, 'all'], versionsFile);
  const buildTime = minutes(performance.now() - t0);
  if (built.code !== 0) {
    return {
      ...base,
      result: 'fail',
      detail: `the build failed (exit ${built.code}): ${BUILD_SCRIPT_PATH} all`,
      time: `build ${buildTime}`,
    };
  }
  say(`${c.id}: built in ${buildTime}`);

  const t1 = performance.now();
  const details: string[] = [];
  let failed = false;
  for (const [label, args] of SUITES) {
    say(`${c.id}: ${label}`);
    const r = await run(process.execPath, ['--import', 'tsx', 'test/run.ts', ...args], versionsFile);
    failed ||= r.code !== 0;
    details.push(`${label}: ${r.tally ?? 'no tally'}${r.code !== 0 ? ` (exit ${r.code})` : ''}`);
  }
  return {
    ...base,
    result: failed ? 'fail' : 'pass',
    detail: details.join('; '),
    time: `build ${buildTime}, tests ${minutes(performance.now() - t1)}`,
  };
}

async function main(): Promise<void> {
  let cells: Cell[];
  try {
    cells = selectCells(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`test:matrix: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const fresh: CellResult[] = [];
  for (const c of cells) {
    const r = await runCell(c);
    fresh.push(r);
    // Written after each cell, so an interrupted matrix keeps the cells it finished.
    const doc = readFileSync(DOC, 'utf8');
    writeFileSync(DOC, writeCells(doc, mergeResults(parseRows(doc), fresh)));
    say(`${c.id}: ${r.result} (${r.detail}; ${r.time})`);
  }
  const passed = fresh.filter((r) => r.result === 'pass').length;
  process.stdout.write(`cells: ${passed} passed, ${fresh.length - passed} failed\n`);
  process.exit(passed === fresh.length ? 0 : 1);
}

await main();
