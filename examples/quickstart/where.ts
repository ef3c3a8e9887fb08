// Where the demo's pods run. The real node shows what a user's cluster does (containers start,
// the app answers through Knative's activator) but needs root and containerd; kwok's fake nodes
// run anywhere. `auto` takes the real node where it can and says in one line why not otherwise.
// --broker stays on kwok: its Broker data plane runs as host processes in a network namespace
// of ours, which does not share the host with a real node's bridge and iptables.
import type { NodeChoice } from './args.ts';

export type Where = { real: boolean; note?: string } | { error: string };

/** `unavailable`: realNodeUnavailable()'s one line, or undefined when a real node can run here. */
export function chooseWhere(choice: NodeChoice, broker: boolean, unavailable: string | undefined): Where {
  if (choice === 'kwok') return { real: false };
  if (broker) {
    return choice === 'real'
      ? { error: '--node real and --broker together are not supported yet: the --broker demo runs on kwok nodes' }
      : { real: false, note: 'the --broker demo runs on kwok nodes (its Broker data plane runs as host processes)' };
  }
  if (unavailable === undefined) return { real: true };
  const why = unavailable.replace(/; use kwok nodes$/, '');
  return choice === 'real' ? { error: why } : { real: false, note: `no real pods here (${why}): the demo runs on kwok nodes` };
}

/** What the host offers for the real node: root, apt, and the packages it lacks (missingNodePackages()). */
export interface NodeHost {
  root: boolean;
  apt: boolean;
  missing: readonly string[];
}

/**
 * Whether the quickstart first installs the real node's Debian packages (scripts/system-deps.sh,
 * as `npm test` does), so that the first command shows real pods: only where the demo would use
 * the real node (not with `--node kwok`, nor `--broker`, which runs on kwok), only as root with
 * apt, and only when some are missing. Elsewhere chooseWhere() says why it falls back, as before.
 */
export function installsNodePackages(choice: NodeChoice, broker: boolean, host: NodeHost): boolean {
  if (choice === 'kwok' || broker) return false;
  return host.root && host.apt && host.missing.length > 0;
}

/**
 * What build-binaries.sh builds for the demo: on kwok nodes its `quickstart` target; on the real
 * node the same without kwok (no kwok node runs), plus the kubelet, kube-proxy, CoreDNS and
 * Knative's images.
 */
export function buildTargets(real: boolean, broker: boolean): string[] {
  if (broker) return ['quickstart-broker'];
  return real ? ['etcd', 'kubernetes', 'knative-serving', 'node', 'knative-serving-images'] : ['quickstart'];
}
