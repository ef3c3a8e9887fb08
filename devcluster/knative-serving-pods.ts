// Knative Serving as a user installs it, on a cluster with a real node (node.ts): the module's own
// release manifests (config/core, copied by build-binaries.sh knative-serving) applied as they
// ship, with only their image fields resolved the way `ko resolve` resolves them: every
// `ko://knative.dev/serving/cmd/<name>` (the Deployments' images, the queue-proxy in
// config-deployment's queue-sidecar-image and in the caching Image) becomes
// dev.local/knative/serving/<name>:<version>, an image built here from scratch plus Knative's
// static binary (build-binaries.sh knative-serving-images) and imported into the node's
// containerd. config-deployment also says `registries-skipping-tag-resolving` with dev.local (the
// code's default already; set so nothing depends on it): no controller asks a registry anything.
//
// So the controller, webhook, activator and KPA autoscaler run as pods; the webhook registers
// itself by Service reference (the apiserver calls its ClusterIP, which kube-proxy sends to the
// pod) and writes its own CA into its configurations; every Revision gets queue-proxy as sidecar.
// Knative's pods reach the apiserver through Service default/kubernetes (apiserver-endpoint.ts).
//
// Not run: a networking layer (no Envoy here). Ingresses are marked Ready by the STAND-IN in
// knative-client.ts (startIngressStandIn), for status only; traffic goes to a Revision's private
// Service or to the activator's Service. The manifests' HPAs of the activator and webhook are
// applied but nothing acts on them (no HPA controller runs on this control plane).
//
// The pods run unchanged, so they must land on the real node: start the cluster without kwok
// nodes and the node untainted (startCluster({ nodes: 0 }), startNode(c, { taint: false })).
// The host-process Knative of knative-serving.ts stays for the kwok suites.
import { join } from 'node:path';
import { AppsV1Api } from '@kubernetes/client-node';
import { applyManifests } from './apply.ts';
import { cacheDir, pinnedVersions } from './binaries.ts';
import type { Cluster } from './control-plane.ts';
import { ClusterStartError } from './errors.ts';
import {
  installOrClean,
  type KoImage,
  koBuildOutput,
  koResolve as koResolveModule,
  releaseManifests,
  waitForKnativeReady,
} from './knative-pods.ts';
import { deleteWebhookConfigurations, webhookDefaults } from './knative-serving.ts';
import type { RealNode } from './node.ts';

export const KNATIVE_NAMESPACE = 'knative-serving';
export const SERVING_IMAGES = ['controller', 'webhook', 'activator', 'autoscaler', 'queue'] as const;
export type ServingImage = (typeof SERVING_IMAGES)[number];
/** The Deployments of config/core/deployments. */
export const SERVING_DEPLOYMENTS = ['controller', 'webhook', 'activator', 'autoscaler'] as const;

export interface KnativeServingPods {
  /** The image each `ko://knative.dev/serving/cmd/<name>` was resolved to. */
  images: Record<ServingImage, string>;
  /** Seconds from the start to every Deployment available and the webhook defaulting through its Service. */
  startSeconds: number;
  /**
   * Deletes Knative's webhook configurations, so that nothing calls a webhook that is gone; the
   * pods go with the node (its stop() deletes them with no grace period: the activator's own is
   * 600 s, which a Deployment deletion would wait out).
   */
  stop(): Promise<void>;
}

export interface StartKnativeServingPodsOptions {
  /** Deadline for the start; default 180 s. */
  timeoutMs?: number;
  progress?: (line: string) => void;
  /** Data merged into Knative's ConfigMaps by name (e.g. a short config-autoscaler stable-window for a test). */
  configOverrides?: Record<string, Record<string, string>>;
}

interface ServingRelease {
  version: string;
  config: string;
  images: KoImage[];
}

/** The manifests and the images built by build-binaries.sh (knative-serving, knative-serving-images). */
export function servingRelease(): ServingRelease {
  const version = pinnedVersions().KNATIVE_SERVING_VERSION;
  if (!version) throw new ClusterStartError('devcluster/versions.env has no KNATIVE_SERVING_VERSION');
  const dir = join(cacheDir(), 'bin', `knative-serving-${version}`);
  const images = koBuildOutput(dir, SERVING_IMAGES, [join(dir, 'config', 'core', 'deployments')], 'knative-serving');
  return { version, config: join(dir, 'config'), images };
}

/** What `ko resolve` does to Serving's manifests: each ko://knative.dev/serving/cmd/<name> becomes the image built from it. */
export function koResolve(text: string, images: Record<string, string>): string {
  return koResolveModule(text, 'knative.dev/serving', images);
}

function source(paths: string[], images: Record<string, string>, overrides: Record<string, Record<string, string>>): string {
  return releaseManifests(paths, (text) => koResolve(text, images), overrides);
}

export async function startKnativeServingPods(
  cluster: Cluster,
  node: RealNode,
  opts: StartKnativeServingPodsOptions = {},
): Promise<KnativeServingPods> {
  const started = performance.now();
  const progress = opts.progress ?? (() => {});
  const deadline = Date.now() + (opts.timeoutMs ?? 180_000);
  const left = () => Math.max(deadline - Date.now(), 1);
  const release = servingRelease();
  const images = Object.fromEntries(release.images.map((i) => [i.name, i.ref])) as Record<ServingImage, string>;
  const admin = cluster.kubeConfig;
  const apps = admin.makeApiClient(AppsV1Api);
  const core = join(release.config, 'core');

  await node.importImages(release.images);
  progress(`Knative's images imported into the node after ${((performance.now() - started) / 1000).toFixed(1)}s`);

  const overrides: Record<string, Record<string, string>> = {
    ...opts.configOverrides,
    'config-deployment': {
      ...opts.configOverrides?.['config-deployment'],
      'registries-skipping-tag-resolving': 'kind.local,ko.local,dev.local',
    },
  };
  // In the order of a `kubectl apply -f serving-core.yaml`, except that the webhook
  // configurations come once the webhook's Deployment exists (they fail closed: a ConfigMap
  // applied while no webhook pod answers would be refused). config-network and the CRDs of
  // knative.dev/networking and knative.dev/caching are in the release's serving-core.yaml
  // (symlinks in the repository, dropped from the module zip: build-binaries.sh copies them).
  const steps: string[][] = [
    [join(core, '100-namespace.yaml')],
    [join(core, '200-roles'), join(core, '200-serviceaccount.yaml')],
    [
      join(core, '300-resources'),
      ...['certificate', 'domain-claim', 'ingress', 'serverlessservice'].map((n) => join(release.config, 'networking', `${n}.yaml`)),
      join(release.config, 'caching', 'image.yaml'),
    ],
    [join(core, '300-knativecertificate.yaml'), join(core, 'configmaps'), join(release.config, 'networking', 'config-network.yaml')],
    [join(core, 'webhooks', 'secret.yaml'), join(core, 'deployments'), join(core, '999-cache.yaml')],
  ];
  await installOrClean(
    'knative-serving',
    node,
    () => deleteWebhookConfigurations(admin),
    async () => {
      for (const paths of steps) await applyManifests(admin, source(paths, images, overrides), { timeoutMs: left() });
      await applyManifests(
        admin,
        source(
          ['defaulting.yaml', 'resource-validation.yaml', 'configmap-validation.yaml'].map((f) => join(core, 'webhooks', f)),
          images,
          overrides,
        ),
        { timeoutMs: left() },
      );
      progress(`Knative's release manifests applied after ${((performance.now() - started) / 1000).toFixed(1)}s`);

      // The webhook answers through its Service: a dry-run Service comes back defaulted by it.
      const check = () => webhookDefaults(admin);
      await waitForKnativeReady(
        admin,
        KNATIVE_NAMESPACE,
        SERVING_DEPLOYMENTS,
        { what: "Knative's webhook (through its Service) to default a dry-run Service", check },
        left,
      );
    },
  );
  const startSeconds = (performance.now() - started) / 1000;
  progress(`Knative Serving (pods) ready after ${startSeconds.toFixed(1)}s`);
  let stopped: Promise<void> | undefined;
  return {
    images,
    startSeconds,
    stop: () => {
      stopped ??= (async () => {
        await deleteWebhookConfigurations(admin);
        await Promise.allSettled(
          SERVING_DEPLOYMENTS.map((name) => apps.deleteNamespacedDeployment({ name, namespace: KNATIVE_NAMESPACE })),
        );
      })();
      return stopped;
    },
  };
}
