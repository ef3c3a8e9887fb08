// The Python and Go example hooks as child processes: where their toolchains are (one clear line
// when one is missing, never a hang), building and starting them, and running their own tests.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir } from '@knative-prestart/devcluster/binaries.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const PYTHON_EXAMPLE = join(ROOT, 'examples/python-binding-hook');
export const GO_EXAMPLE = join(ROOT, 'examples/go-binding-hook');
export const HOOK_NAME = 'provision-db';

/** Where .ci/run makes the virtualenv; it writes the sha256 of requirements.txt next to it. */
export const VENV = join(cacheDir(), 'venv');
const VENV_STAMP = join(VENV, '.requirements.sha256');
const SETUP_PYTHON = `python3 -m venv ${VENV} && ${VENV}/bin/pip install -r examples/python-binding-hook/requirements.txt`;

export class MissingToolError extends Error {
  override readonly name = 'MissingToolError';
}

/** The virtualenv's python; throws one line when the virtualenv is missing or was made from another requirements.txt. */
export function venvPython(): string {
  const python = join(VENV, 'bin', 'python');
  if (!existsSync(python)) throw new MissingToolError(`no Python virtualenv at ${VENV}: run .ci/run, or: ${SETUP_PYTHON}`);
  const wanted = createHash('sha256')
    .update(readFileSync(join(PYTHON_EXAMPLE, 'requirements.txt')))
    .digest('hex');
  // Without a stamp the virtualenv was made by hand (the README's commands): trust it.
  if (existsSync(VENV_STAMP) && readFileSync(VENV_STAMP, 'utf8').trim() !== wanted) {
    throw new MissingToolError(
      `the virtualenv at ${VENV} was made from another requirements.txt: run .ci/run, or: rm -rf ${VENV} && ${SETUP_PYTHON}`,
    );
  }
  return python;
}

export interface Finished {
  code: number | null;
  output: string;
}

/** Runs a command to its end (killed after timeoutMs), with stdout and stderr together. */
export function runToEnd(
  command: string,
  args: string[],
  opts: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<Finished> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString('utf8');
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} did not finish within ${opts.timeoutMs / 1000} s:\n${output}`));
    }, opts.timeoutMs);
    child.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(err.code === 'ENOENT' ? new MissingToolError(`${command} is not on PATH`) : err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, output });
    });
  });
}

/** Go's environment for the tests: never the network (.ci/run fetched the modules), never a go.mod rewrite. */
export function goEnv(): NodeJS.ProcessEnv {
  return { ...process.env, GOPROXY: 'off', GOFLAGS: `${process.env.GOFLAGS ?? ''} -mod=readonly`.trim() };
}

/** Runs go in the Go example's folder; throws one line when the toolchain or the modules are missing. */
export async function runGo(args: string[], timeoutMs: number): Promise<Finished> {
  let run: Finished;
  try {
    run = await runToEnd('go', args, { cwd: GO_EXAMPLE, env: goEnv(), timeoutMs });
  } catch (err) {
    if (err instanceof MissingToolError) throw new MissingToolError('no Go toolchain on PATH: install Go >= 1.24 (.ci/run needs it too)');
    throw err;
  }
  if (run.output.includes('module lookup disabled by GOPROXY=off')) {
    throw new MissingToolError(
      "the Go example's modules are not downloaded: cd examples/go-binding-hook && go mod download (.ci/run does)",
    );
  }
  return run;
}

/** Builds the Go example into the cache, outside the repository; throws one line when it cannot. */
export async function buildGoExample(): Promise<string> {
  const binary = join(cacheDir(), 'examples', 'go-binding-hook');
  const built = await runGo(['build', '-o', binary, '.'], 100_000);
  if (built.code !== 0) {
    const lines = built.output.split('\n').map((l) => l.trim());
    const first = lines.find((l) => l !== '' && !l.startsWith('#') && !l.startsWith('go: downloading')) ?? `exit ${built.code}`;
    throw new Error(`go build of examples/go-binding-hook failed: ${first}\n${built.output}`);
  }
  return binary;
}

export interface RunningHook {
  url: string;
  /** Everything it printed so far, for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

const LISTENING = /listening on (http:\/\/\S+)/;

/**
 * Starts a hook on a free 127.0.0.1 port and resolves once it says it listens. It gets no
 * K_SINK, so replies go to each request's data.replyTo (the conformance checker's sink).
 */
export async function startHook(command: string, args: string[], cwd: string, waitMs = 30_000): Promise<RunningHook> {
  const [port] = await freePorts(1);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    HOOK_NAME,
    PROVISION_MS: '300',
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONUNBUFFERED: '1',
  };
  delete env.K_SINK;
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const url = await new Promise<string>((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} did not say it was listening within ${waitMs / 1000} s:\n${output}`));
    }, waitMs);
    const collect = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const m = LISTENING.exec(output);
      if (m?.[1]) {
        clearTimeout(timer);
        resolvePromise(m[1]);
      }
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${command} exited (${signal ?? `code ${code}`}) before listening:\n${output}`));
    });
  });
  return { url, output: () => output, stop: () => stop(child) };
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolvePromise) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolvePromise();
    });
    child.kill('SIGTERM');
  });
}

/**
 * The vector files the examples' own tests must each have passed: every one under
 * schemas/vectors/ except replies only the gate's sink can judge (bad-replyid, hook-mismatch and
 * wrong-type of a reply need its key, or are about the sink).
 */
export function hookVectorFiles(): string[] {
  const gateOnly = new Set(['bad-replyid', 'hook-mismatch', 'wrong-type']);
  const files: string[] = [];
  for (const dir of ['requested/valid', 'requested/invalid', 'completed/valid', 'completed/invalid']) {
    for (const name of readdirSync(join(ROOT, 'schemas/vectors', dir)).filter((f) => f.endsWith('.json'))) {
      const vector = JSON.parse(readFileSync(join(ROOT, 'schemas/vectors', dir, name), 'utf8')) as { expect: { code?: string } };
      if (dir === 'completed/invalid' && gateOnly.has(vector.expect.code ?? '')) continue;
      files.push(`${dir}/${name}`);
    }
  }
  return files;
}
