// `npm run quickstart`, run the way a user or CI runs it, with stdout going to a pipe (not a
// terminal): the README's main command must really work. It starts a control plane and Knative
// of its own (in its own directory, on free ports), so it never touches the suite's cluster;
// the variables that would point it at that cluster, or pin its ports, are left out.
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { cacheDir } from '@knative-prestart/devcluster/binaries.ts';
import { realNodeUnavailable } from '@knative-prestart/devcluster/node-check.ts';
import { nodeRoot } from '@knative-prestart/devcluster/node-host.ts';
import { CLUSTER_DIR_ENV, KUBECONFIG_ENV } from '@knative-prestart/devcluster/shared.ts';
import test, { type ExecutionContext } from 'ava';

const root = fileURLToPath(new URL('../../', import.meta.url));
const TIMESTAMP = /^\d\d:\d\d:\d\d\.\d{3} /;

function quickstartEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of [
    KUBECONFIG_ENV,
    CLUSTER_DIR_ENV,
    'KNATIVE_PRESTART_APISERVER_PORT',
    'KNATIVE_PRESTART_ETCD_PORT',
    'KNATIVE_PRESTART_KEEP_CLUSTER',
    'QUICKSTART_EXIT_WHEN_DONE',
  ]) {
    delete env[name];
  }
  return env;
}

interface Run {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first stdout line `re` matches. */
  line(re: RegExp): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; seconds: number }>;
}

/** npm in a process group of its own, as a shell runs a command: a signal to the group reaches it all, like Ctrl-C. */
function startQuickstart(t: ExecutionContext, args: string[]): Run {
  const started = performance.now();
  const child = spawn('npm', ['run', 'quickstart', '--', ...args], {
    cwd: root,
    env: quickstartEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  let err = '';
  const waiters: { re: RegExp; resolve(line: string): void }[] = [];
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
    for (const w of [...waiters]) {
      const hit = out.split('\n').find((l) => w.re.test(l));
      if (hit !== undefined) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(hit);
      }
    }
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; seconds: number }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, seconds: (performance.now() - started) / 1000 })),
  );
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
    process.kill(-child.pid, 'SIGINT');
    const gone = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 20_000))]);
    if (!gone) process.kill(-child.pid, 'SIGKILL');
  });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    line: (re) =>
      new Promise((resolve, reject) => {
        const hit = out.split('\n').find((l) => re.test(l));
        if (hit !== undefined) return resolve(hit);
        waiters.push({ re, resolve });
        void exited.then(({ code }) =>
          reject(new Error(`the quickstart exited (${code}) before printing a line like ${re}\n${tail(out, err)}`)),
        );
      }),
  };
}

function execFileSyncLines(cmd: string, args: string[]): string[] {
  return execFileSync(cmd, args, { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l !== '');
}

function tail(out: string, err: string): string {
  return `--- last stdout lines:\n${out.split('\n').slice(-25).join('\n')}\n--- stderr:\n${err.split('\n').slice(-15).join('\n')}`;
}

/** Processes whose command line names the quickstart's cluster directory: every component it started does. */
function processesMentioning(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmd.includes(dir)) found.push(`${pid}: ${cmd.slice(0, 120)}`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

function clusterDir(stdout: string): string {
  const dir = /cluster directory: (\S+)/.exec(stdout)?.[1];
  if (!dir) throw new Error('the quickstart printed no cluster directory');
  return dir;
}

test.serial(
  'npm run quickstart -- --exit-when-done: the Revision is held, the hook runs, the release brings pods with the binding and a Ready Service; exit 0, nothing left behind',
  async (t) => {
    t.timeout(8 * 60_000, 'the quickstart gives up by itself 5 min after the binaries are ready');
    const run = startQuickstart(t, ['--exit-when-done']);
    const { code, seconds } = await run.exited;
    const stdout = run.stdout();
    t.log(`exit ${code} after ${seconds.toFixed(1)} s`);
    t.is(code, 0, tail(stdout, run.stderr()));

    const lines = stdout.split('\n');
    const index = (re: RegExp, what: string) => {
      const i = lines.findIndex((l) => TIMESTAMP.test(l) && re.test(l));
      t.not(i, -1, `a log line saying ${what} (${re})`);
      return i;
    };
    const held = index(/Revision demo-00001: held by the gate before Knative may create its Deployment/, 'the Revision is held');
    index(
      /Revision demo-00001: Knative's event Warning InternalError.*: knative-prestart: Revision demo-00001 is held until its pre-start hooks finish/,
      'Knative’s event carries the hold message',
    );
    index(/PrestartRun demo-00001: hook demo-db: Requested \d+%: demo: /, 'the hook’s progress');
    index(/PrestartRun demo-00001: hook demo-db: Succeeded 100%/, 'the hook succeeded');
    const released = index(/Revision demo-00001: released by the gate/, 'the release');
    index(/Deployment demo-00001-deployment: created by Knative, 1\/1 pods ready/, 'the Deployment ready');
    const podReady = index(
      /Pod demo-00001-deployment-\S+: Running, Ready; binding: env DATABASE_PASSWORD, DATABASE_URL from Secret demo-db; files at \/bindings\/db from Secret demo-db/,
      'a pod Ready with the binding',
    );
    const serviceReady = index(/Service demo: Ready, traffic 100% to demo-00001/, 'the Service Ready');
    t.true(held < released && released < podReady && podReady < serviceReady, 'in the order they happen');
    t.regex(stdout, /phase times: binaries \S+, control plane \S+, Knative \S+, gate \S+, demo \S+; total \S+/);
    t.regex(stdout, /stand-in/, 'the Ingress stand-in is named as one');

    // Not a terminal: plain lines, each timestamped, one per change.
    t.false(stdout.includes('\x1b['), 'no terminal escape sequences');
    const fromFirstLog = lines.slice(lines.findIndex((l) => TIMESTAMP.test(l))).filter((l) => l !== '');
    t.deepEqual(
      fromFirstLog.filter((l) => !TIMESTAMP.test(l)),
      [],
      'every line is timestamped',
    );
    const deploying = fromFirstLog.filter((l) => /Revision demo-00001: held .*Knative: Ready=Unknown \(Deploying\)$/.test(l));
    t.is(deploying.length, 1, 'a state is logged once, when it changes');

    // Where real pods can run (root, containerd), the demo runs on the real node and ends with the
    // app's answer; elsewhere it says in one line why it falls back to kwok.
    const unavailable = realNodeUnavailable();
    if (unavailable === undefined) {
      index(
        /control plane ready in .*a real node \(real-node: kubelet, containerd and runc, CNI bridge, kube-proxy, CoreDNS/,
        'the real node',
      );
      const answer = index(
        /the app answers through Knative's activator .*HTTP 200 from pod demo-00001-deployment-\S+, with its binding in the environment: DATABASE_PASSWORD, DATABASE_URL \(DATABASE_URL=postgres:\/\/app:\*\*\*@/,
        'the app’s HTTP answer with its binding',
      );
      t.true(serviceReady < answer, 'the answer once the Service is Ready');
      t.false(existsSync(join(nodeRoot(), 'state.json')), 'the real node is stopped and the host released');
      t.log(lines[answer]);
    } else {
      index(/no real pods here \(.*\): the demo runs on kwok nodes/, 'why the demo falls back to kwok');
    }

    const dir = clusterDir(stdout);
    t.false(existsSync(dir), `its cluster directory ${dir} is removed`);
    t.deepEqual(processesMentioning(dir), [], 'no process of its cluster is left');
    t.log(lines.find((l) => l.includes('demo complete')));
    t.log(lines.find((l) => l.includes('phase times')));
  },
);

test.serial(
  'npm run quickstart -- --broker --exit-when-done: the same demo through Knative Eventing’s Broker and the gate’s Triggers; nothing left behind',
  async (t) => {
    t.timeout(8 * 60_000, 'the quickstart gives up by itself 5 min after the binaries are ready');
    const namespacesBefore = new Set(execFileSyncLines('ip', ['netns', 'list']));
    const run = startQuickstart(t, ['--broker', '--exit-when-done']);
    const { code, seconds } = await run.exited;
    const stdout = run.stdout();
    t.log(`exit ${code} after ${seconds.toFixed(1)} s`);
    t.is(code, 0, tail(stdout, run.stderr()));
    t.regex(stdout, /Knative Eventing v\S+ ready in \S+: .*Broker demo\/default Ready/);
    t.regex(stdout, /stand-in.*no cluster DNS here/, 'the cluster DNS stand-in is named as one');
    t.regex(stdout, /requests go through Broker demo\/default, the Trigger the gate created delivers them to the hook/);
    t.regex(stdout, /PrestartRun demo-00001: hook demo-db: Requested \d+%: demo: /, 'progress came back through the Broker');
    t.regex(stdout, /Pod demo-00001-deployment-\S+: Running, Ready; binding: env DATABASE_PASSWORD, DATABASE_URL from Secret demo-db/);
    const done = /demo complete: held \+\S+, released \+(\S+)s \(held for (\S+)s\)/.exec(stdout);
    t.truthy(done, 'the demo completed');
    // The hook's four steps take 8 s: held much longer would mean a lost request waited for a resend.
    t.true(Number(done?.[2]) < 20, `held for ${done?.[2]} s: the first request reached the hook`);
    const dir = clusterDir(stdout);
    t.false(existsSync(dir), `its cluster directory ${dir} is removed`);
    t.deepEqual(processesMentioning(dir), [], 'no process of its cluster is left');
    t.deepEqual(
      execFileSyncLines('ip', ['netns', 'list']).filter((l) => !namespacesBefore.has(l)),
      [],
      'no network namespace is left',
    );
    t.log(stdout.split('\n').find((l) => l.includes('demo complete')));
  },
);

test.serial('npm run quickstart: says how to look around, the printed kubectl commands work, and Ctrl-C stops everything', async (t) => {
  t.timeout(8 * 60_000, 'the quickstart gives up by itself 5 min after the binaries are ready');
  const run = startQuickstart(t, ['--provision-ms', '2000']);
  await run.line(/Changes in namespace demo from now on are logged below/);
  const stdout = run.stdout();
  const kubeconfig = /^ {2}export KUBECONFIG=(\S+)$/m.exec(stdout)?.[1];
  const kubectl = /# the cached kubectl: (\S+)$/m.exec(stdout)?.[1];
  t.truthy(kubeconfig, 'the admin kubeconfig, ready to export');
  // Where build-binaries.sh put it: ~/.cache/knative-prestart, or KNATIVE_PRESTART_CACHE (a cold CI uses an empty one).
  t.true((kubectl ?? '').startsWith(join(cacheDir(), 'bin', 'kubernetes-v')), `the cached kubectl (${kubectl})`);
  t.regex(kubectl ?? '', /\/bin\/kubernetes-v[\d.]+\/kubectl$/, 'the cached kubectl');
  for (const command of ['kubectl get prestartrun -n demo', 'kubectl describe revision demo-00001 -n demo', 'kubectl get ksvc -n demo']) {
    t.true(stdout.includes(`\n  ${command}`), `the look-around lists "${command}", not timestamped`);
  }
  const { stdout: runs } = await promisify(execFile)(kubectl as string, ['get', 'prestartrun', '-n', 'demo'], {
    env: { ...process.env, KUBECONFIG: kubeconfig },
  });
  t.regex(runs, /demo-00001\s+Released\s+1\/1/, 'kubectl get prestartrun -n demo, as printed');

  const dir = clusterDir(stdout);
  t.not(processesMentioning(dir).length, 0, 'the cluster runs until Ctrl-C');
  process.kill(-(run.child.pid as number), 'SIGINT');
  const { code, signal, seconds } = await run.exited;
  t.log(`Ctrl-C: npm ended (${signal ?? `exit ${code}`}) after ${seconds.toFixed(1)} s in all`);
  // The quickstart exits 130; npm, which got the SIGINT too, then ends by that signal.
  t.true(code === 130 || signal === 'SIGINT', `ended by the interrupt (code ${code}, signal ${signal})`);
  t.regex(run.stdout(), /SIGINT: stopping the hook, the gate, Knative(, the real node)? and the control plane/);
  t.false(existsSync(dir), `its cluster directory ${dir} is removed`);
  t.deepEqual(processesMentioning(dir), [], 'no process of its cluster is left');
  t.false(existsSync(join(nodeRoot(), 'state.json')), 'no real node is left holding the host');
});
