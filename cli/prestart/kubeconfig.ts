// The kubeconfig `kn prestart` talks with, and kubectl's impersonation flags on top of it
// (`--as USER`, `--as-group GROUP`): the apiserver then authorizes every request as that user,
// and the caller needs the verb `impersonate` on users (and groups) for it, exactly as kubectl.
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';
import { InvalidArgumentError } from 'commander';

export interface Impersonation {
  as?: string;
  asGroup?: string[];
}

/**
 * A KubeConfig that adds the impersonation headers to every request it authenticates. client-node
 * sends headers through fetch, which folds repeated ones into one comma-joined line, and the
 * apiserver reads each Impersonate-Group line as one group: so one group at most, refused above
 * that rather than sent as a group named "a, b".
 */
class ImpersonatingKubeConfig extends KubeConfig {
  constructor(private readonly impersonation: Required<Pick<Impersonation, 'as'>> & { group?: string }) {
    super();
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    context.setHeaderParam('Impersonate-User', this.impersonation.as);
    if (this.impersonation.group !== undefined) context.setHeaderParam('Impersonate-Group', this.impersonation.group);
  }
}

/** A kubeconfig file when given; otherwise $KUBECONFIG, ~/.kube/config, then in-cluster; impersonating when asked. */
export function cliKubeConfig(path: string | undefined, imp: Impersonation = {}): KubeConfig {
  const groups = imp.asGroup ?? [];
  if (groups.length > 0 && imp.as === undefined) {
    throw new InvalidArgumentError('--as-group needs --as USER: the apiserver impersonates groups only together with a user');
  }
  if (groups.length > 1) throw new InvalidArgumentError('give --as-group once: this client can send one impersonated group');
  const kc = imp.as === undefined ? new KubeConfig() : new ImpersonatingKubeConfig({ as: imp.as, group: groups[0] });
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return kc;
}
