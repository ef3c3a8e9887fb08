import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signalGroup } from './processes.ts';

/** Every cluster lives in a directory under here, with a pids.json naming what it started. */
export function clustersRoot(): string {
  return join(tmpdir(), 'knative-prestart-clusters');
}

export const PID_STATE_FILE = 'pids.json';

export interface PidState {
  ownerPid: number;
  /** Start time of the owner (from /proc), so a recycled pid is not taken for the owner. */
  ownerStartTime: string;
  components: { name: string; pid: number; command: string }[];
  /** Set when every process was stopped and the directory kept on purpose (its logs): not to reap. */
  stoppedAt?: string;
}

/** Field 22 of /proc/<pid>/stat: start time in clock ticks since boot; '' when not there. */
export function processStartTime(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from its closing one.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    return '';
  }
}

function runs(pid: number, command: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === command;
  } catch {
    return false;
  }
}

export function writePidState(dir: string, state: PidState): void {
  const file = join(dir, PID_STATE_FILE);
  writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 2));
  renameSync(`${file}.tmp`, file);
}

/**
 * Kills the processes of clusters whose owner is gone (a test run killed with SIGKILL, a
 * crashed machine session) and removes their directories. Clusters of live owners (another
 * test run in parallel) are left alone. Returns one line per cluster reaped.
 */
export function reapLeftovers(): string[] {
  const root = clustersRoot();
  if (!existsSync(root)) return [];
  const reaped: string[] = [];
  for (const entry of readdirSync(root)) {
    const dir = join(root, entry);
    const stateFile = join(dir, PID_STATE_FILE);
    if (!existsSync(stateFile)) continue;
    let state: PidState;
    try {
      state = JSON.parse(readFileSync(stateFile, 'utf8')) as PidState;
    } catch {
      continue;
    }
    const ownerAlive = state.ownerStartTime !== '' && processStartTime(state.ownerPid) === state.ownerStartTime;
    if (ownerAlive || state.stoppedAt) continue;
    const killed = state.components.filter((c) => runs(c.pid, c.command));
    for (const c of killed) signalGroup(c.pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    reaped.push(
      `reaped cluster ${dir} of dead process ${state.ownerPid}` +
        (killed.length > 0 ? ` (killed ${killed.map((c) => `${c.name}[${c.pid}]`).join(', ')})` : ''),
    );
  }
  return reaped;
}
