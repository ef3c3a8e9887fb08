// A Linux network namespace of the test's own, joined to the host by a veth pair, for a process
// that binds fixed ports (Knative's InMemoryChannel dispatcher takes :8080 and :8443, constants
// in its code): inside, those ports are its alone, whatever else this host or a parallel test
// run holds. The pair's two addresses are the only ones used besides loopback; they come from
// 10.203.0.0/16, a /30 per namespace, chosen by the owner's pid and skipping any in use.
import { execFileSync } from 'node:child_process';
import { processStartTime } from './leftovers.ts';

const PREFIX = 'kpns';
/** Namespaces made by this process so far: each gets its own name and interfaces. */
let made = 0;

export interface NetworkNamespace {
  name: string;
  /** The host's end of the veth pair: what the namespace dials to reach the host. */
  hostIp: string;
  /** The namespace's end: what the host dials to reach a server inside. */
  innerIp: string;
  /** Prefix for a command to run inside (`ip netns exec <name>`). */
  execPrefix: string[];
  remove(): void;
}

function ip(...args: string[]): string {
  try {
    return execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? '').trim();
    throw new Error(`ip ${args.join(' ')}: ${stderr || (err as Error).message}`);
  }
}

/** Namespaces named <prefix>-<pid>-<starttime> whose owner is gone (killed before it removed them). */
function reapLeftovers(): void {
  let names: string[];
  try {
    names = ip('netns', 'list')
      .split('\n')
      .map((l) => l.split(' ')[0] ?? '');
  } catch {
    return;
  }
  for (const name of names) {
    const m = new RegExp(`^${PREFIX}-(\\d+)-(\\d+)-\\d+$`).exec(name);
    if (!m || processStartTime(Number(m[1])) === m[2]) continue;
    try {
      ip('netns', 'del', name);
    } catch {
      // Another run reaped it first.
    }
  }
}

function addressesInUse(): Set<string> {
  return new Set(
    ip('-o', '-4', 'addr', 'show')
      .split('\n')
      .map((l) => /inet (\d+\.\d+\.\d+\.\d+)/.exec(l)?.[1])
      .filter((a): a is string => a !== undefined),
  );
}

export function createNetworkNamespace(): NetworkNamespace {
  reapLeftovers();
  const n = made++;
  const name = `${PREFIX}-${process.pid}-${processStartTime(process.pid)}-${n}`;
  // Interface names are limited to 15 characters: kp + pid in base 36 (at most 4) + h/n + n.
  const tag = (process.pid % 1_000_000).toString(36);
  const hostIf = `kp${tag}h${n % 10_000}`;
  const innerIf = `kp${tag}n${n % 10_000}`;
  const used = addressesInUse();
  let base: number | undefined;
  for (let i = 0; i < 16_384; i++) {
    const candidate = ((process.pid + n + i) % 16_384) * 4;
    if (!used.has(dotted(candidate + 1)) && !used.has(dotted(candidate + 2))) {
      base = candidate;
      break;
    }
  }
  if (base === undefined) throw new Error('no free /30 in 10.203.0.0/16 for a network namespace');
  const hostIp = dotted(base + 1);
  const innerIp = dotted(base + 2);
  const remove = () => {
    // Deleting the namespace destroys its end of the pair, and with it the host's end.
    for (const args of [
      ['netns', 'del', name],
      ['link', 'del', hostIf],
    ]) {
      try {
        ip(...args);
      } catch {
        // Already gone.
      }
    }
  };
  try {
    ip('netns', 'add', name);
    ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', innerIf);
    ip('link', 'set', innerIf, 'netns', name);
    ip('addr', 'add', `${hostIp}/30`, 'dev', hostIf);
    ip('link', 'set', hostIf, 'up');
    ip('netns', 'exec', name, 'ip', 'addr', 'add', `${innerIp}/30`, 'dev', innerIf);
    ip('netns', 'exec', name, 'ip', 'link', 'set', innerIf, 'up');
    ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up');
  } catch (err) {
    remove();
    throw new Error(
      `cannot make a network namespace for the channel dispatcher (needs root or CAP_NET_ADMIN, and iproute2): ${(err as Error).message}`,
    );
  }
  return { name, hostIp, innerIp, execPrefix: ['ip', 'netns', 'exec', name], remove };
}

function dotted(offset: number): string {
  return `10.203.${Math.floor(offset / 256)}.${offset % 256}`;
}
