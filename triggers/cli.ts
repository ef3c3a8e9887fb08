// `knative-prestart triggers`: prints the Triggers the gate would create for Broker-transport
// hooks, for manifests kept in Git. Hooks come from YAML files or from the cluster.
import { readFileSync } from 'node:fs';
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { type Command, InvalidArgumentError } from 'commander';
import { type Destination, desiredTriggers, inClusterGateSubscriber, type OwnedHook } from './desired.ts';
import { listOwnedHooks } from './list-hooks.ts';
import { hooksFromYaml, printTriggers } from './print.ts';

interface TriggersOptions {
  file?: string[];
  fromCluster?: boolean;
  kubeconfig?: string;
  gateUri?: string;
  gateNamespace: string;
  replyAudience?: string;
  ownerReferences?: boolean;
}

function absoluteHttpUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError(`"${value}" is not an absolute URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`"${value}" is not an http(s) URL`);
  return value;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

async function loadHooks(opts: TriggersOptions): Promise<OwnedHook[]> {
  if (opts.file && opts.file.length > 0) {
    return opts.file.flatMap((f) => hooksFromYaml(readFileSync(f === '-' ? 0 : f, 'utf8'), f === '-' ? 'stdin' : f));
  }
  const kc = new KubeConfig();
  if (opts.kubeconfig) kc.loadFromFile(opts.kubeconfig);
  else kc.loadFromDefault();
  return listOwnedHooks(kc.makeApiClient(CustomObjectsApi));
}

export function registerTriggersCommand(program: Command): void {
  program
    .command('triggers')
    .description('print the Knative Triggers the gate creates for hooks with transport broker, as YAML')
    .option('-f, --file <path>', 'read PrestartHooks from this YAML file ("-" for stdin); repeatable', collect)
    .option('--from-cluster', 'read the PrestartHooks from the cluster')
    .option('--kubeconfig <path>', 'kubeconfig for --from-cluster (default: in-cluster, then $KUBECONFIG)')
    .option('--gate-uri <url>', "where reply Triggers deliver: the gate's sink (default: its in-cluster Service)", absoluteHttpUrl)
    .option('--gate-namespace <ns>', "the gate's namespace, for the default --gate-uri", 'knative-prestart')
    .option(
      '--reply-audience <audience>',
      "the gate's sink audience when it runs with --reply-identity: reply Triggers ask Knative Eventing (authentication-oidc) for a token for it",
    )
    .option('--owner-references', 'keep the ownerReferences to the hooks (only hooks read from a cluster have uids)')
    .action(async (opts: TriggersOptions, cmd: Command) => {
      const fromFile = (opts.file?.length ?? 0) > 0;
      if (fromFile === Boolean(opts.fromCluster)) cmd.error('error: give either --file or --from-cluster');
      const sink: Destination = opts.gateUri ? { uri: opts.gateUri } : inClusterGateSubscriber(opts.gateNamespace);
      const gate: Destination = opts.replyAudience ? { ...sink, audience: opts.replyAudience } : sink;
      const triggers = desiredTriggers(await loadHooks(opts), gate);
      if (triggers.length === 0) process.stderr.write('knative-prestart: no PrestartHook with transport broker, so no Triggers\n');
      process.stdout.write(printTriggers(triggers, { ownerReferences: opts.ownerReferences === true }));
    });
}
