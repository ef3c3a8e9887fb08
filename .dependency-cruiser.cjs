// The layering rule of the house, checked by `npm run lint` (README, "Layout"): imports point down.
//   api < schemas < transport < emitter | sinks < triggers < gate < hooks < cli
// api/ and schemas/ are the contract and pure: types, schemas, codecs and names, no network client
// (contract-no-network). transport/ holds the clients (HTTP POST, NATS JetStream) and the retry
// loop every sender shares, and imports only the contract. emitter and sinks are siblings and never
// import each other. Inside gate/, gate/core is the pure core (api/ and itself, nothing else: no
// node: builtins, no npm packages); hooks/sdk is what hook authors run, so it reaches only the
// contract and transport/. Product code never imports the local cluster (the workspace package
// @knative-prestart/devcluster, in devcluster/), tests, benches or examples; of devcluster/, only
// devcluster/gate/ runs the product, and the rest of the repository reaches devcluster/ by its
// package name only (devcluster/README.md).
// The gate's shell around its core is in rooms, one job each (README, "Layout"); ROOMS says which
// rooms each may import, so the rooms stack up with no cycle between them and only gate/gate.ts,
// the wiring, sees them all.

/** Bottom to top; a layer may import the layers before it in this list, and itself. */
const LAYERS = ['api', 'schemas', 'transport', 'emitter|sinks', 'triggers', 'gate', 'hooks', 'cli'];
const PRODUCT = LAYERS.join('|');

const upward = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `${layer.replace('|', '-or-')}-imports-up`,
  comment: `${layer}/ may import only the layers below it (${LAYERS.slice(0, i).join(', ') || 'nothing of ours'})`,
  severity: 'error',
  from: { path: `^(${layer})/` },
  to: { path: `^(${LAYERS.slice(i + 1).join('|')})/` },
}));

/**
 * The rooms of gate/ and what each may import of gate/ besides itself; the layers above say what
 * they may import outside gate/. gate/core is the pure core (gate-core-pure).
 */
const ROOMS = {
  runtime: { job: 'what every room shares in one process: the clock, crash points, per-object locks', may: [] },
  kube: { job: 'the apiserver client: writes, the agent pool, informers, caches and what they keep', may: ['core', 'runtime'] },
  telemetry: {
    job: 'metrics, the observer and tracing; of controller/ and checks/ it knows only the types of what they report',
    may: ['core', 'runtime', 'kube', 'controller', 'checks'],
  },
  delivery: {
    job: 'sending requests to hooks and recording what comes back',
    may: ['core', 'runtime', 'kube', 'telemetry', 'config.ts'],
  },
  controller: {
    job: 'the reconcile loop: work queue, leader election, applying the core’s actions',
    may: ['core', 'runtime', 'kube', 'telemetry', 'delivery'],
  },
  checks: {
    job: 'what a leader runs beside the controller: the reply Triggers, and checks that report and block nothing',
    may: ['core', 'runtime', 'kube'],
  },
  server: { job: 'the HTTP servers’ plumbing and probes; the probes read the informers’ health', may: ['kube', 'config.ts'] },
  webhooks: {
    job: 'the admission webhooks, what they read, and their TLS',
    may: ['core', 'kube', 'telemetry', 'server', 'config.ts'],
  },
};

/** A room is a folder; a file of gate/ (config.ts) is named with its extension. */
const roomPath = (r) => (r.endsWith('.ts') ? `${r.replace('.', '\\.')}$` : `${r}/`);
const rooms = Object.entries(ROOMS).map(([room, { job, may }]) => ({
  name: `gate-${room}-room`,
  comment: `gate/${room} is ${job}; of gate/ it imports ${may.length ? `${may.join(', ')} and itself` : 'only itself'}`,
  severity: 'error',
  from: { path: `^gate/${room}/` },
  to: { path: '^gate/', pathNot: `^gate/(${[room, ...may].map(roomPath).join('|')})` },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'emitter-sinks-siblings',
      comment: 'emitter/ (sending) and sinks/ (receiving) share what they need through schemas/, never each other',
      severity: 'error',
      from: { path: '^(emitter|sinks)/' },
      to: { path: '^(emitter|sinks)/', pathNot: '^$1/' },
    },
    {
      name: 'contract-no-network',
      comment:
        'api/ and schemas/ are the contract: no network client (the clients are in transport/). The NATS binding ' +
        "(schemas/nats-binding.ts) may build the nats header map it lays a message out in; elsewhere only nats' types",
      severity: 'error',
      from: { path: '^(api|schemas)/' },
      to: {
        path: '^(node:)?(http|https|http2|net|tls|dgram|dns)$|(^|/)node_modules/(undici|node-fetch|http-proxy-agent|https-proxy-agent)/',
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'contract-no-network-nats',
      comment: 'of the nats package, the contract takes only types, and the header map of its own binding',
      severity: 'error',
      from: { path: '^(api|schemas)/', pathNot: '^schemas/nats-binding\\.ts$' },
      to: { path: '(^|/)node_modules/nats/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'gate-core-pure',
      comment: 'gate/core is the functional core: it imports api/ and gate/core only (no I/O, no npm packages)',
      severity: 'error',
      from: { path: '^gate/core/' },
      to: { pathNot: '^(api|gate/core)/' },
    },
    ...rooms,
    {
      name: 'gate-telemetry-reads-types',
      comment: 'telemetry reports for the controller and the checks: it imports their types, never their code',
      severity: 'error',
      from: { path: '^gate/telemetry/' },
      to: { path: '^gate/(controller|checks)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'hook-sdk-closure',
      comment: "hooks/sdk is the hook author's kit: it imports only api/, schemas/, transport/ and itself, directly or not",
      severity: 'error',
      from: { path: '^hooks/sdk/' },
      to: { path: `^(${PRODUCT})/`, pathNot: '^(api|schemas|transport|hooks/sdk)/', reachable: true },
    },
    {
      name: 'product-imports-non-product',
      comment: 'the product (what `npm run build` ships) never imports tests, benches or examples',
      severity: 'error',
      from: { path: `^(${PRODUCT}|release)/` },
      to: { path: '^(test|bench|examples)/' },
    },
    {
      name: 'product-imports-devcluster',
      comment:
        'the product (and release/, which writes what an admin installs) never imports the local cluster, by path or by ' +
        'its package name @knative-prestart/devcluster (a workspace link, resolved to devcluster/ or kept as node_modules/)',
      severity: 'error',
      from: { path: `^(${PRODUCT}|release)/` },
      to: { path: '^(devcluster|node_modules/@knative-prestart/devcluster)/' },
    },
    {
      name: 'devcluster-by-package-name',
      comment: 'devcluster/ is a workspace package: the rest of the repository imports it as @knative-prestart/devcluster/<file>.ts',
      severity: 'error',
      from: { pathNot: '^devcluster/' },
      to: { path: '^devcluster/', dependencyTypesNot: ['aliased-workspace'] },
    },
    {
      name: 'devcluster-imports-product',
      comment: 'devcluster/ is a control plane of its own; only devcluster/gate/ runs the gate on it',
      severity: 'error',
      from: { path: '^devcluster/', pathNot: '^devcluster/gate/' },
      to: { path: `^(${PRODUCT}|release)/` },
    },
    {
      name: 'devcluster-imports-its-users',
      comment: 'devcluster/ serves the tests, benches and examples, and imports none of them',
      severity: 'error',
      from: { path: '^devcluster/' },
      to: { path: '^(test|bench|examples|scripts)/' },
    },
    {
      name: 'imports-test',
      comment: 'test/ helpers are for tests only',
      severity: 'error',
      from: { pathNot: '^test/' },
      to: { path: '^test/' },
    },
    {
      name: 'product-imports-dev-dependency',
      comment: 'a devDependency is not installed where the product runs',
      severity: 'error',
      from: { path: `^(${PRODUCT})/` },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'no-circular',
      comment: 'a cycle ties modules into one: break it by moving the shared part down a layer',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'an import the cruiser cannot resolve would escape every rule above',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // dist/ and .cache/ hold build output (the benches compile the gate into .cache/).
    exclude: { path: '^(dist|\\.cache)/' },
    doNotFollow: { path: 'node_modules' },
    // Type-only imports bind layers as much as value imports do.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
