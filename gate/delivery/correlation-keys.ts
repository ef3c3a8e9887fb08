// The correlation key ring lives in a Secret so every replica (and a restarted gate) verifies
// the replyids minted before. The first replica to start creates it. Every replica watches it
// and swaps the keys of its one KeyRing in place (watchKeyRing), so a rotation needs no restart.
// Rotation, without refusing a single good reply (docs/protocol.md):
//   1. append the new key to `keys` (comma-separated hex): every replica verifies with it;
//   2. once every replica logged "correlation keys loaded" with the new count, move it first: it signs;
//   3. drop the old key once the requests signed with it are over (their deadlines passed).
import { CoreV1Api, type KubeConfig, type V1Secret, Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { errorLine, isConflict, isNotFound } from '../../api/kube-errors.ts';
import { KeyRing, keysFromHex } from '../../schemas/index.ts';

export const CORRELATION_SECRET = 'knative-prestart-correlation-keys';

/** The keys a Secret holds (`keys`: comma-separated hex); the KeyRing checks their number and length. */
export function keysOf(secret: V1Secret): Buffer[] {
  const hex = Buffer.from(secret.data?.keys ?? '', 'base64').toString('utf8');
  return keysFromHex(
    hex
      .split(',')
      .map((k) => k.trim())
      .filter(Boolean),
  );
}

export async function loadOrCreateKeyRing(kc: KubeConfig, namespace: string): Promise<KeyRing> {
  const core = kc.makeApiClient(CoreV1Api);
  for (let i = 0; i < 3; i++) {
    try {
      return new KeyRing(keysOf(await core.readNamespacedSecret({ name: CORRELATION_SECRET, namespace })));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    try {
      const key = Buffer.from(KeyRing.generateKey()).toString('hex');
      await core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: CORRELATION_SECRET, namespace, labels: { 'app.kubernetes.io/part-of': 'knative-prestart' } },
          type: 'Opaque',
          data: { keys: Buffer.from(key).toString('base64') },
        },
      });
      return KeyRing.fromHex(key);
    } catch (err) {
      // Another replica created it first: read theirs.
      if (!isConflict(err)) throw err;
    }
  }
  throw new Error(`could not read or create Secret ${namespace}/${CORRELATION_SECRET}`);
}

export interface KeyRingWatch {
  stop(): Promise<void>;
}

const RESTART_DELAY_MS = 2_000;
const MAX_RESTART_DELAY_MS = 60_000;
/** The apiserver ends each watch after this long; the client gives up a little later, should that end never arrive. */
const WATCH_SECONDS = 300;

/**
 * Keeps `ring` equal to the keys in the Secret: a read, then a watch of that one Secret from the
 * read's resourceVersion; when the watch ends or fails, the same again after a pause (a change
 * missed in between is in the next read). A Secret that disappears or holds keys the ring would
 * refuse leaves the ring as it is: replies keep verifying with the last good keys.
 */
export function watchKeyRing(kc: KubeConfig, namespace: string, ring: KeyRing, log: Logger): KeyRingWatch {
  const core = kc.makeApiClient(CoreV1Api);
  const watch = new Watch(kc);
  let stopped = false;
  let current: AbortController | undefined;
  let wake: (() => void) | undefined;
  let loaded = '';

  const load = (secret: V1Secret) => {
    const text = secret.data?.keys ?? '';
    if (text === loaded) return;
    try {
      ring.replace(keysOf(secret));
      loaded = text;
      log.info({ keys: ring.size, resourceVersion: secret.metadata?.resourceVersion }, 'correlation keys loaded');
    } catch (err) {
      log.error({ err: errorLine(err) }, `Secret ${namespace}/${CORRELATION_SECRET} holds unusable keys; keeping the current ones`);
    }
  };

  const watchFrom = (resourceVersion: string | undefined) =>
    new Promise<unknown>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (err: unknown) => {
        clearTimeout(timer);
        resolve(err);
      };
      watch
        .watch(
          `/api/v1/namespaces/${namespace}/secrets`,
          { fieldSelector: `metadata.name=${CORRELATION_SECRET}`, resourceVersion, timeoutSeconds: WATCH_SECONDS },
          (phase, obj: V1Secret) => {
            if (phase === 'ADDED' || phase === 'MODIFIED') load(obj);
            else if (phase === 'DELETED') log.warn(`Secret ${namespace}/${CORRELATION_SECRET} deleted; keeping the current keys`);
          },
          done,
        )
        .then((controller) => {
          current = controller;
          if (stopped) controller.abort();
          timer = setTimeout(() => controller.abort(), (WATCH_SECONDS + 30) * 1000).unref();
        }, done);
    });

  const loop = (async () => {
    let delay = RESTART_DELAY_MS;
    while (!stopped) {
      let err: unknown;
      try {
        const secret = await core.readNamespacedSecret({ name: CORRELATION_SECRET, namespace });
        load(secret);
        err = await watchFrom(secret.metadata?.resourceVersion);
      } catch (e) {
        err = e;
      }
      if (stopped) return;
      // A failing read or watch (apiserver down, RBAC) is tried again less and less often.
      delay = err ? Math.min(delay * 2, MAX_RESTART_DELAY_MS) : RESTART_DELAY_MS;
      if (err) log.warn({ err: errorLine(err), retryInMs: delay }, `watch of Secret ${namespace}/${CORRELATION_SECRET} failed`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, delay).unref();
      });
    }
  })();

  return {
    async stop() {
      stopped = true;
      current?.abort();
      wake?.();
      await loop;
    },
  };
}
