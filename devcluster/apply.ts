import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ApiException, CustomObjectsApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
// js-yaml comes with @kubernetes/client-node (its own YAML loader drops fields it has no model
// for and fails on empty documents, so it cannot read CRDs and mixed manifests faithfully).
import yaml from 'js-yaml';
import { kubeRequest, statusMessage } from './kube-request.ts';
import { waitFor } from './wait.ts';

export interface ApplyOptions {
  /** Namespace for namespaced objects that name none; default "default". */
  namespace?: string;
  /** Server-side apply field manager; default "knative-prestart-tests". */
  fieldManager?: string;
  /** How long to wait for a CRD to be Established and its kinds to be served; default 30 s. */
  timeoutMs?: number;
}

interface Resource {
  plural: string;
  namespaced: boolean;
}

type Manifest = KubernetesObject & { apiVersion: string; kind: string; items?: unknown[] };

/** Reads YAML from text, a .yaml/.yml file, or every such file under a directory (sorted). */
function readSource(source: string): string {
  if (source.includes('\n') || !existsSync(source)) return source;
  if (!statSync(source).isDirectory()) return readFileSync(source, 'utf8');
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.ya?ml$/.test(entry.name)) files.push(path);
    }
  };
  walk(source);
  return files.map((f) => readFileSync(f, 'utf8')).join('\n---\n');
}

/** The documents of a multi-document YAML, empty ones dropped and List kinds expanded. */
export function parseManifests(text: string): Manifest[] {
  const out: Manifest[] = [];
  const add = (doc: unknown) => {
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return;
    const m = doc as Manifest;
    if (typeof m.kind === 'string' && m.kind.endsWith('List') && Array.isArray(m.items)) {
      for (const item of m.items) add(item);
      return;
    }
    if (typeof m.apiVersion !== 'string' || typeof m.kind !== 'string') {
      throw new Error(`manifest without apiVersion/kind: ${JSON.stringify(doc).slice(0, 200)}`);
    }
    out.push(m);
  };
  for (const doc of yaml.loadAll(text)) add(doc);
  return out;
}

function groupVersionPath(apiVersion: string): string {
  return apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
}

/**
 * Server-side applies every object of `source` (YAML text, a file, or a directory of them), in
 * order. After a CustomResourceDefinition it waits until the CRD is Established, so objects of
 * that kind may follow in the same source. Returns the objects as the apiserver stored them.
 */
export async function applyManifests(kc: KubeConfig, source: string, opts: ApplyOptions = {}): Promise<KubernetesObject[]> {
  const manifests = parseManifests(readSource(source));
  const fieldManager = opts.fieldManager ?? 'knative-prestart-tests';
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const discovery = new Map<string, Map<string, Resource>>();

  const lookup = async (apiVersion: string, kind: string): Promise<Resource | undefined> => {
    const cached = discovery.get(apiVersion)?.get(kind);
    if (cached) return cached;
    const res = await kubeRequest(kc, 'GET', groupVersionPath(apiVersion));
    if (res.status !== 200) return undefined;
    const list = res.body as { resources?: { name: string; kind: string; namespaced: boolean }[] };
    const byKind = new Map<string, Resource>();
    for (const r of list.resources ?? []) {
      if (!r.name.includes('/')) byKind.set(r.kind, { plural: r.name, namespaced: r.namespaced });
    }
    discovery.set(apiVersion, byKind);
    return byKind.get(kind);
  };

  const applied: KubernetesObject[] = [];
  for (const m of manifests) {
    // A kind from a CRD applied just before may take a moment to appear in discovery.
    const resource = await waitFor(() => lookup(m.apiVersion, m.kind), {
      what: `the apiserver to serve kind ${m.kind} in ${m.apiVersion}`,
      timeoutMs,
    });
    const body: Manifest = { ...m, metadata: { ...m.metadata } };
    let base = groupVersionPath(m.apiVersion);
    if (resource.namespaced) {
      const ns = m.metadata?.namespace ?? opts.namespace ?? 'default';
      (body.metadata as { namespace?: string }).namespace = ns;
      base += `/namespaces/${encodeURIComponent(ns)}`;
    }
    const name = m.metadata?.name;
    const res = name
      ? await kubeRequest(
          kc,
          'PATCH',
          `${base}/${resource.plural}/${encodeURIComponent(name)}?fieldManager=${encodeURIComponent(fieldManager)}&force=true`,
          body,
          'application/apply-patch+yaml',
        )
      : // generateName objects cannot be applied (no name to apply to): create them.
        await kubeRequest(kc, 'POST', `${base}/${resource.plural}?fieldManager=${encodeURIComponent(fieldManager)}`, body);
    if (res.status < 200 || res.status >= 300) {
      const what = `${m.kind} ${body.metadata?.namespace ? `${body.metadata.namespace}/` : ''}${name ?? m.metadata?.generateName ?? '?'}`;
      throw new Error(`applying ${what} failed: HTTP ${res.status}: ${statusMessage(res)}`);
    }
    applied.push(res.body as KubernetesObject);
    if (m.kind === 'CustomResourceDefinition' && m.apiVersion.startsWith('apiextensions.k8s.io/') && name) {
      await waitFor(
        async () => {
          const crd = await kubeRequest(kc, 'GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
          const conditions = (crd.body as { status?: { conditions?: { type: string; status: string }[] } }).status?.conditions ?? [];
          return conditions.some((c) => c.type === 'Established' && c.status === 'True');
        },
        { what: `CRD ${name} Established`, timeoutMs },
      );
    }
  }
  return applied;
}

/** Kubernetes >= 1.36: the apiserver serves MutatingAdmissionPolicy v1 (older ones answer 404). */
export async function servesMutatingPolicies(kc: KubeConfig): Promise<boolean> {
  return kc
    .makeApiClient(CustomObjectsApi)
    .listClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural: 'mutatingadmissionpolicies', limit: 1 })
    .then(
      () => true,
      (err: unknown) => (err instanceof ApiException && err.code === 404 ? false : Promise.reject(err)),
    );
}
