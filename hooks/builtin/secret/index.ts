// The `secret` built-in hook: holds a Revision until a Secret it needs exists (made by an
// operator, External Secrets, a person), with the keys it needs, then binds it to the
// Revision's pods as env, envFrom or a volume.
import { CoreV1Api, CustomObjectsApi, type V1Secret } from '@kubernetes/client-node';
import { isDns1123Label, isDns1123Subdomain } from '../../../api/names.ts';
import type { Contribution } from '../../../api/types.ts';
import { envContribution, envFromContribution, volumeContribution } from '../../sdk/contributions.ts';
import type { HookServer } from '../../sdk/http.ts';
import { fail, type HookHandler, succeed } from '../../sdk/types.ts';
import { giveUpAt, humanDuration } from '../common/deadline.ts';
import { errorLine, namespaceGrantHint, statusOf } from '../common/kube.ts';
import { paramsMessage } from '../common/params.ts';
import { pollUntil } from '../common/poll.ts';
import { type BuiltinHookOptions, DEFAULT_POLL_MAX_MS, type ServeBuiltinOptions, serveBuiltin } from '../common/serve.ts';
import { render } from '../common/template.ts';
import { verifyRequest } from '../common/verify.ts';
import { chooseKind, keysNeeded, readSecretParams, type SecretParams } from './params.ts';

export { chooseKind, keysNeeded, readSecretParams, type SecretParams } from './params.ts';

export function createSecretHandler(opts: BuiltinHookOptions): HookHandler {
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const core = opts.kubeConfig.makeApiClient(CoreV1Api);
  const pollMaxMs = opts.pollMaxMs ?? DEFAULT_POLL_MAX_MS;

  return async (req, ctx) => {
    const verified = await verifyRequest(custom, req, ctx.signal);
    if (typeof verified === 'string') return fail(verified);
    const params = readSecretParams(verified.params);
    if (Array.isArray(params)) return fail(paramsMessage(req.hook, params));
    const namespace = req.revision.namespace;
    const labels = verified.revision.metadata?.labels ?? {};
    const rendered = render(params.secretName, {
      revision: req.revision.name,
      namespace,
      service: labels['serving.knative.dev/service'],
      configuration: labels['serving.knative.dev/configuration'],
    });
    if ('error' in rendered) return fail(paramsMessage(req.hook, [`params.secretName: ${rendered.error}`]));
    const name = rendered.value;
    if (!isDns1123Subdomain(name)) return fail(paramsMessage(req.hook, [`params.secretName gives "${name}", which is not a Secret name`]));
    const kind = chooseKind(params.as, verified.hook.allowedContributions);
    if ('error' in kind) return fail(paramsMessage(req.hook, [kind.error]));
    if (kind.kind === 'env' && !params.env) {
      return fail(paramsMessage(req.hook, ['params.env ({VARIABLE: "key"}) is required: the Secret can only be bound as env']));
    }
    const bindingName = params.bindingName ?? (isDns1123Label(name) ? name : 'binding');
    if (!isDns1123Label(bindingName)) return fail(paramsMessage(req.hook, [`params.bindingName "${bindingName}" is not a DNS-1123 label`]));

    const where = `Secret ${namespace}/${name}`;
    const needed = keysNeeded(params);
    const started = Date.now();
    let state = '';
    const look = async (): Promise<V1Secret | undefined> => {
      let secret: V1Secret;
      try {
        secret = await core.readNamespacedSecret({ name, namespace });
      } catch (err) {
        if (statusOf(err) !== 404) throw err;
        await note(`${where} does not exist yet`);
        return undefined;
      }
      const missing = needed.filter((k) => secret.data?.[k] === undefined);
      if (missing.length === 0) return secret;
      await note(`${where} lacks the key${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);
      return undefined;
    };
    const note = async (now: string) => {
      if (now === state) return;
      state = now;
      await ctx.progress(0, `waiting: ${now}`);
    };

    let ready: V1Secret | undefined;
    try {
      ready = await pollUntil(look, { signal: ctx.signal, until: giveUpAt(req.deadline), maxMs: pollMaxMs, logger: ctx.logger });
    } catch (err) {
      ctx.signal.throwIfAborted();
      const hint = statusOf(err) === 403 ? namespaceGrantHint('secret', namespace) : "the hook's identity needs get on secrets there";
      return fail(`cannot read ${where}: ${errorLine(err)} (${hint})`);
    }
    if (!ready) {
      return fail(
        `${state || `${where} is not ready`} after ${humanDuration(Date.now() - started)}, and the hook's time is up. ` +
          `Once it is there, re-run the hook: kubectl annotate prestartrun ${req.revision.name} -n ${namespace} prestart.dev/retry=$(date +%s) --overwrite`,
      );
    }
    const contribution = contributionOf(kind.kind, bindingName, name, params);
    return succeed(`${where} is ready; bound as ${describe(contribution)}`, [contribution]);
  };
}

export function serveSecretHook(opts: ServeBuiltinOptions): Promise<HookServer> {
  return serveBuiltin('secret', createSecretHandler(opts), opts);
}

function contributionOf(kind: Contribution['as'], bindingName: string, secretName: string, params: SecretParams): Contribution {
  if (kind === 'env') return envContribution(bindingName, secretName, params.env ?? {});
  if (kind === 'envFrom') return envFromContribution(bindingName, secretName);
  return volumeContribution(bindingName, secretName);
}

function describe(c: Contribution): string {
  if (c.as === 'env') return `env ${Object.keys(c.env ?? {}).join(', ')}`;
  if (c.as === 'envFrom') return 'envFrom (every key)';
  return `volume "${c.name}"`;
}
