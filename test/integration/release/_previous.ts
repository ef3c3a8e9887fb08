// The previous release, for the upgrade and outage tests: main before this release's work
// (PREVIOUS_RELEASE), its source tree extracted with `git archive` (no change to this checkout's
// git state) into a temp directory, with this tree's node_modules linked in (its dependencies are
// a subset of ours at the same versions). Its config/ is the release an admin has installed; its
// gate runs from its own source as a CLI process.
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, readdir, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { onExit } from '@knative-prestart/devcluster/exit-hooks.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));

/** main at the start of issue 11: the manifests and the gate a cluster runs before the upgrade. */
export const PREVIOUS_RELEASE = '54aeca9';

export interface PreviousRelease {
  commit: string;
  dir: string;
  /** Its config/*.yaml, in apply order. */
  configFiles: string[];
  /** Its CLI entry point (`node --import tsx <cli> gate …`). */
  cli: string;
}

let extracted: Promise<PreviousRelease> | undefined;

export function previousRelease(): Promise<PreviousRelease> {
  extracted ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), `knative-prestart-${PREVIOUS_RELEASE}-`));
    onExit(() => rmSync(dir, { recursive: true, force: true }));
    const { stdout } = await run('git', ['-C', root, 'rev-parse', '--verify', `${PREVIOUS_RELEASE}^{commit}`]).catch(() => {
      throw new Error(`commit ${PREVIOUS_RELEASE} is not in this clone (a shallow clone?): fetch it to run the upgrade tests`);
    });
    // git archive writes a tar of the commit's tree; tar unpacks it. Neither touches .git.
    await run('sh', ['-c', `git -C "${root}" archive --format=tar ${PREVIOUS_RELEASE} | tar -x -C "${dir}"`]);
    await symlink(join(root, 'node_modules'), join(dir, 'node_modules'));
    const configFiles = (await readdir(join(dir, 'config')))
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((f) => join(dir, 'config', f));
    return { commit: stdout.trim(), dir, configFiles, cli: join(dir, 'gate', 'cli.ts') };
  })();
  return extracted;
}
