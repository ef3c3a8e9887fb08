// `npm run quickstart`: the whole story on one machine, live. Builds (or reuses) the binaries,
// starts a control plane of its own, Knative Serving, the gate and the example binding hook,
// creates a PrestartHook and a Knative Service that matches it, and shows the Revision held,
// the hook's progress, the release, the pods with their binding and the Service Ready. Then it
// says how to look around and runs until Ctrl-C; with --exit-when-done it exits instead.
//
// This file loads little: the Kubernetes client and the gate take seconds to load, so they
// load (run.ts) while the binaries are checked or built, and the first lines print at once.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pinnedVersions } from '@knative-prestart/devcluster/binaries.ts';
import { ClusterStartError } from '@knative-prestart/devcluster/errors.ts';
import { aptAvailable, missingNodePackages, realNodeUnavailable } from '@knative-prestart/devcluster/node-check.ts';
import { parseArgs, USAGE } from './args.ts';
import { BuildError, buildBinaries } from './build.ts';
import { keepAlive, QuickstartFailure, Session } from './session.ts';
import { seconds } from './summary.ts';
import { buildTargets, chooseWhere, installsNodePackages } from './where.ts';

const parsed = parseArgs(process.argv.slice(2), process.env);
if (!parsed.ok) {
  if (parsed.error) process.stderr.write(`quickstart: ${parsed.error}\n`);
  process.stderr.write(`${USAGE}\n`);
  process.exit(parsed.help ? 0 : 2);
}
const session = new Session(parsed.options);
const { out, c, opts } = session;

for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
  ['SIGHUP', 129],
] as const) {
  process.on(signal, () => {
    // A second Ctrl-C does not wait; the cluster's exit hooks still kill its processes.
    if (session.isFinishing) process.exit(code);
    out.keepRegion();
    out.say(`${signal}: stopping the hook, the gate, Knative${session.realNode ? ', the real node' : ''} and the control plane ...`);
    session.interrupted.abort();
    void session.finish(code);
  });
}

const rest = import('./run.ts');
// Surfaced when awaited; not an unhandled rejection while the build runs.
rest.catch(() => {});

/**
 * Where the demo would run on the real node and only its Debian packages are missing, installs
 * them as `npm test` does (scripts/system-deps.sh), announced in one line, so that the first
 * command shows real pods. Not root, or no apt: nothing here; chooseWhere() then says why it
 * falls back to kwok. A failed install leaves its reason on stderr, and the fallback line says
 * what is still missing.
 */
async function installNodePackages(): Promise<void> {
  const host = { root: process.getuid?.() === 0, apt: aptAvailable(), missing: missingNodePackages() };
  if (!installsNodePackages(opts.node, opts.broker, host)) return;
  out.say(
    "quickstart: installing the real node's Debian packages (containerd, runc, CNI plugins, buildah) with scripts/system-deps.sh (--node kwok skips this) ...",
  );
  const script = fileURLToPath(new URL('../../scripts/system-deps.sh', import.meta.url));
  const child = spawn('bash', [script, 'real-node'], { stdio: ['ignore', 'ignore', 'inherit'] });
  await new Promise<void>((resolve) => {
    child.on('error', () => resolve());
    child.on('close', () => resolve());
  });
}

async function main(): Promise<void> {
  await installNodePackages();
  const where = chooseWhere(opts.node, opts.broker, opts.node === 'kwok' ? undefined : realNodeUnavailable());
  if ('error' in where) throw new QuickstartFailure(where.error);
  session.realNode = where.real;
  out.say(
    `${c.bold('knative-prestart quickstart')}: a local control plane, Knative Serving ${pinnedVersions().KNATIVE_SERVING_VERSION}` +
      (opts.broker ? ` and Eventing ${pinnedVersions().KNATIVE_EVENTING_VERSION} (requests and replies through its Broker)` : '') +
      `, the gate and an example hook${where.real ? ', on a real node (real pods)' : ''}, then a Knative Service whose first Revision waits for the hook. ` +
      (opts.exitWhenDone ? 'Exits when done (--exit-when-done).' : 'Ctrl-C stops everything.'),
  );
  if (where.note) out.say(c.yellow(where.note));
  await session.phase('binaries', () => buildBinaries(out, session.interrupted.signal, { targets: buildTargets(where.real, opts.broker) }));
  out.say(`${c.green('✔')} binaries ready in ${seconds(session.phases.end('binaries'))}`);
  session.startDeadline();
  // The control plane's phase starts now: the rest of the code may still be loading, which counts.
  session.phases.start('control plane');
  const loading = performance.now();
  const { runDemo } = await session.step(() => 'the quickstart’s code to load', rest);
  session.codeLoadMs = performance.now() - loading;
  await runDemo(session);
}

main().catch(async (err: unknown) => {
  if (session.isFinishing) return;
  const explained = err instanceof ClusterStartError || err instanceof QuickstartFailure || err instanceof BuildError;
  const reason = explained ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err);
  const lines = reason.split('\n');
  const last = lines.pop() ?? '';
  if (lines.length > 0) process.stderr.write(`${lines.join('\n')}\n`);
  out.say(`phase times: ${session.phases.summary()}`);
  const cluster = session.cluster;
  if (opts.exitWhenDone || !cluster) {
    const logs = cluster ? ` (logs kept in ${cluster.dir})` : '';
    return session.finish(1, { keepLogs: cluster !== undefined, lastWords: `quickstart: failed: ${last}${logs}` });
  }
  // Left running on purpose: what failed can be looked at in the cluster.
  out.say(`${c.red('✘')} ${last}`);
  const { showLookAround } = await rest;
  out.block(showLookAround(cluster).join('\n'));
  process.stderr.write(`quickstart: failed: ${last} (everything keeps running for a look; Ctrl-C stops it)\n`);
  keepAlive();
});
