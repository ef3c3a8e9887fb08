import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { CLUSTER_INFO_FILE, type Cluster, type ClusterInfo, startCluster } from './control-plane.ts';
import { mintUserKubeconfig } from './users.ts';

/** Set by test/run.ts for the test processes: the admin kubeconfig of the one shared cluster. */
export const KUBECONFIG_ENV = 'KNATIVE_PRESTART_KUBECONFIG';
/** Set by test/run.ts: the shared cluster's directory (holds cluster.json, the CA, the logs). */
export const CLUSTER_DIR_ENV = 'KNATIVE_PRESTART_CLUSTER_DIR';

let shared: Promise<Cluster> | undefined;

/** Handle on a cluster another process started and owns: stop() leaves it running. */
function attach(dir: string): Cluster {
  const infoFile = join(dir, CLUSTER_INFO_FILE);
  if (!existsSync(infoFile)) {
    throw new Error(`${CLUSTER_DIR_ENV}=${dir} holds no ${CLUSTER_INFO_FILE}: is the cluster of test/run.ts still running?`);
  }
  const info = JSON.parse(readFileSync(infoFile, 'utf8')) as ClusterInfo;
  const kubeconfigPath = process.env[KUBECONFIG_ENV] || info.kubeconfigPath;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  const ca = { certFile: info.caCertFile, keyFile: info.caKeyFile };
  return {
    kubeConfig,
    kubeconfigPath,
    dir,
    apiserverUrl: info.apiserverUrl,
    versions: info.versions,
    caCertPem: readFileSync(ca.certFile, 'utf8'),
    mintUserKubeconfig: (user, groups = []) => mintUserKubeconfig({ dir, apiserverUrl: info.apiserverUrl, ca }, user, groups),
    stop: async () => {},
  };
}

/**
 * The cluster for this test process. Under `npm test` it is the one test/run.ts started (found
 * through the environment) and stays up for every file. A file run alone (`npx ava <file>`)
 * starts a cluster of its own instead, once per process, killed when the process (or the worker
 * thread that started it) ends.
 */
export function sharedCluster(): Promise<Cluster> {
  shared ??= (async () => {
    const kubeconfig = process.env[KUBECONFIG_ENV];
    const dir = process.env[CLUSTER_DIR_ENV] || (kubeconfig ? dirname(kubeconfig) : undefined);
    if (dir) return attach(dir);
    return startCluster({ progress: (line) => process.stderr.write(`cluster: ${line}\n`) });
  })();
  return shared;
}
