// The compatibility matrix's cells: which Knative release runs on which Kubernetes, and the exact
// versions each is built from. `npm run test:matrix` runs them; docs/compatibility.md shows them.

/** One Knative release as the build script takes it (versions.env keys). */
export interface KnativeRelease {
  /** The release's own number, as its manifests label their objects. */
  release: string;
  servingVersion: string;
  /** Replaces for Serving's build (build-binaries.sh's KNATIVE_SERVING_REPLACES), when its dependencies do not resolve. */
  servingReplaces: string;
  eventingVersion: string;
  knVersion: string;
  knCommit: string;
}

export interface Cell {
  /** knative-<release>-k8s-<minor>: what `npm run test:matrix -- <id>` selects. */
  id: string;
  knative: KnativeRelease;
  kubernetesVersion: string;
  /** What differs from the upstream release, said beside the cell's result. */
  notes: string[];
}

const KN_1_23 = { knVersion: 'v0.50.0', knCommit: 'e411e88475005c36abaa42530521065210c8588d' };

export const KNATIVE_1_23: KnativeRelease = {
  release: '1.23',
  servingVersion: 'v0.50.0',
  servingReplaces: '',
  eventingVersion: 'v0.50.0',
  ...KN_1_23,
};

export const KNATIVE_1_24: KnativeRelease = {
  release: '1.24',
  servingVersion: 'v0.51.0',
  servingReplaces: [
    'knative.dev/pkg=knative.dev/pkg@v0.0.0-20260727151759-521cb33b33dd',
    'knative.dev/networking=knative.dev/networking@v0.0.0-20260727162500-c7a7b772cac9',
    'knative.dev/caching=knative.dev/caching@v0.0.0-20260727161800-0edbf88bc267',
    'knative.dev/hack=knative.dev/hack@v0.0.0-20260428014158-b2a37f1b6e7b',
  ].join(' '),
  eventingVersion: 'v0.50.0',
  ...KN_1_23,
};

/** Notes every Knative 1.24 cell carries: the parts of 1.24 this machine cannot get. */
const KNATIVE_1_24_NOTES = [
  "Serving v0.51.0's own code, built against knative.dev/pkg, networking, caching and hack at Knative 1.23's commits: 1.24's (October 2026) are refused by the Go module proxy and are in no fetchable snapshot. So built, Serving's webhook panics at start (`conflicting Schema URL: https://opentelemetry.io/schemas/1.43.0 and https://opentelemetry.io/schemas/1.41.0`, in knative.dev/pkg's observability/resource.Default): 1.24's OpenTelemetry modules beside 1.23's pkg. The cell cannot pass here until Knative 1.24's own pkg can be had",
  'Eventing 1.23 (v0.50.0) and kn 1.23 (v0.50.0): Eventing v0.51.0 is refused by the module proxy, and neither repository snapshot holds the 1.24 tag',
];

export const KUBERNETES = { '1.34': 'v1.34.4', '1.35': 'v1.35.4', '1.36': 'v1.36.3', '1.37': 'v1.37.2' } as const;

function cell(knative: KnativeRelease, minor: keyof typeof KUBERNETES, notes: string[] = []): Cell {
  return { id: `knative-${knative.release}-k8s-${minor}`, knative, kubernetesVersion: KUBERNETES[minor], notes };
}

/** Knative 1.23 on the three Kubernetes it supports; 1.24 on its three (it needs Kubernetes >= 1.35). */
export const CELLS: readonly Cell[] = [
  cell(KNATIVE_1_23, '1.34'),
  cell(KNATIVE_1_23, '1.35'),
  cell(KNATIVE_1_23, '1.36'),
  cell(KNATIVE_1_24, '1.35', KNATIVE_1_24_NOTES),
  cell(KNATIVE_1_24, '1.36', KNATIVE_1_24_NOTES),
  cell(KNATIVE_1_24, '1.37', KNATIVE_1_24_NOTES),
];

/** The cells the arguments name (ids, or a prefix such as `knative-1.24`); all of them for none. */
export function selectCells(args: readonly string[]): Cell[] {
  if (args.length === 0) return [...CELLS];
  const chosen = CELLS.filter((c) => args.some((a) => c.id === a || c.id.startsWith(`${a}-`)));
  const unknown = args.filter((a) => !CELLS.some((c) => c.id === a || c.id.startsWith(`${a}-`)));
  if (unknown.length > 0) throw new Error(`unknown cell ${unknown.join(', ')}; the cells: ${CELLS.map((c) => c.id).join(', ')}`);
  return chosen;
}

/** The cell's versions file: the base file's lines with the cell's versions in place of the pinned ones. */
export function cellVersionsFile(base: string, c: Cell): string {
  const values: Record<string, string> = {
    KUBERNETES_VERSION: c.kubernetesVersion,
    KNATIVE_SERVING_VERSION: c.knative.servingVersion,
    KNATIVE_SERVING_REPLACES: `"${c.knative.servingReplaces}"`,
    KNATIVE_EVENTING_VERSION: c.knative.eventingVersion,
    KN_VERSION: c.knative.knVersion,
    KN_COMMIT: c.knative.knCommit,
  };
  const seen = new Set<string>();
  const lines = base.split('\n').map((line) => {
    const key = /^([A-Z0-9_]+)=/.exec(line)?.[1];
    if (!key || !(key in values)) return line;
    seen.add(key);
    return `${key}=${values[key]}`;
  });
  for (const [key, value] of Object.entries(values)) if (!seen.has(key)) lines.push(`${key}=${value}`);
  return `${lines.join('\n').replace(/\n*$/, '')}\n`;
}
