// `knative-prestart uninstall`: the command around gate/uninstall.ts. The admin must say what
// happens to the Revisions still held, because both answers are irreversible in their way:
// releasing starts them without the hooks that had not finished; keeping them leaves the hold
// policies behind until an admin lifts each hold.
import { KubeConfig } from '@kubernetes/client-node';
import { type Command, InvalidArgumentError } from 'commander';
import { DEFAULTS } from '../gate/config.ts';
import { uninstall } from '../gate/uninstall.ts';

interface UninstallFlags {
  kubeconfig?: string;
  namespace: string;
  releaseHeld?: boolean;
  keepHeld?: boolean;
  yes?: boolean;
  timeout: number;
}

function seconds(value: string): number {
  const n = Number.parseInt(value, 10);
  if (!Number.isInteger(n) || n <= 0 || String(n) !== value.trim()) throw new InvalidArgumentError(`"${value}" is not a number of seconds`);
  return n;
}

export function registerUninstallCommand(program: Command, out: (line: string) => void = (line) => console.log(line)): void {
  program
    .command('uninstall')
    .description(
      'remove knative-prestart from the cluster: stop the gate, then stamping, then release or keep held Revisions, then the rest',
    )
    .option('--release-held', 'release every held Revision (Knative starts them without the hooks that had not finished)')
    .option('--keep-held', 'keep held Revisions held (the hold policies stay; an admin lifts each hold by hand)')
    .option('--yes', 'do it (without: print what would be done, change nothing)')
    .option('--kubeconfig <path>', 'kubeconfig to use (default: in-cluster, then $KUBECONFIG)')
    .option('--namespace <ns>', "the gate's namespace", DEFAULTS.namespace)
    .option('--timeout <seconds>', "how long to wait for the gate's pods to stop and its Leases to be free", seconds, 120)
    .action(async (flags: UninstallFlags) => {
      if (Boolean(flags.releaseHeld) === Boolean(flags.keepHeld)) {
        throw new InvalidArgumentError('say what happens to held Revisions: --release-held or --keep-held');
      }
      const kc = new KubeConfig();
      if (flags.kubeconfig) kc.loadFromFile(flags.kubeconfig);
      else kc.loadFromDefault();
      await uninstall({
        kubeConfig: kc,
        namespace: flags.namespace,
        held: flags.releaseHeld ? 'release' : 'keep',
        yes: Boolean(flags.yes),
        timeoutSeconds: flags.timeout,
        out,
      });
    });
}
