import { readFileSync } from 'node:fs';
import { pinnedVersions, VERSIONS_FILE } from '@knative-prestart/devcluster/binaries.ts';
import test from 'ava';
import { CELLS, cellVersionsFile, KNATIVE_1_23, selectCells } from '../../matrix/cells.ts';
import { CELLS_MARKER, mergeResults, parseRows, renderRows, writeCells } from '../../matrix/report.ts';

const versionsEnv = readFileSync(VERSIONS_FILE, 'utf8');

test('the six cells: Knative 1.23 on Kubernetes 1.34–1.36, 1.24 on 1.35–1.37', (t) => {
  t.deepEqual(
    CELLS.map((c) => c.id),
    [
      'knative-1.23-k8s-1.34',
      'knative-1.23-k8s-1.35',
      'knative-1.23-k8s-1.36',
      'knative-1.24-k8s-1.35',
      'knative-1.24-k8s-1.36',
      'knative-1.24-k8s-1.37',
    ],
  );
});

test('the default versions file is the Knative 1.23 on Kubernetes 1.36 cell', (t) => {
  const pinned = pinnedVersions();
  const cell = CELLS.find((c) => c.id === 'knative-1.23-k8s-1.36');
  t.is(pinned.KUBERNETES_VERSION, cell?.kubernetesVersion);
  t.is(pinned.KNATIVE_SERVING_VERSION, KNATIVE_1_23.servingVersion);
  t.is(pinned.KNATIVE_SERVING_REPLACES, undefined, 'empty: v0.50.0 resolves as released');
  t.is(pinned.KNATIVE_EVENTING_VERSION, KNATIVE_1_23.eventingVersion);
  t.is(pinned.KN_VERSION, KNATIVE_1_23.knVersion);
  t.is(pinned.KN_COMMIT, KNATIVE_1_23.knCommit);
});

test("a cell's versions file keeps every other pin and replaces the cell's", (t) => {
  const cell = CELLS[0];
  if (!cell) return t.fail();
  const file = cellVersionsFile(versionsEnv, cell);
  t.regex(file, /^KUBERNETES_VERSION=v1\.34\.4$/m);
  t.regex(file, /^KNATIVE_SERVING_VERSION=v0\.50\.0$/m);
  t.regex(file, /^KNATIVE_SERVING_REPLACES=""$/m);
  t.regex(file, /^NATS_SERVER_VERSION=v2\.15\.2$/m);
  t.is(file.match(/^KUBERNETES_VERSION=/gm)?.length, 1);
});

test('cells are chosen by id or by prefix; an unknown name is refused with the list', (t) => {
  t.is(selectCells([]).length, 6);
  t.deepEqual(
    selectCells(['knative-1.24']).map((c) => c.kubernetesVersion),
    ['v1.35.4', 'v1.36.3', 'v1.37.2'],
  );
  t.deepEqual(
    selectCells(['knative-1.23-k8s-1.35']).map((c) => c.id),
    ['knative-1.23-k8s-1.35'],
  );
  t.throws(() => selectCells(['knative-1.22-k8s-1.33']), {
    message: /unknown cell knative-1\.22-k8s-1\.33; the cells: knative-1\.23-k8s-1\.34/,
  });
});

test('a run of some cells keeps the rows of the others, and cells never run say so', (t) => {
  const doc = `# Compatibility\n\n${CELLS_MARKER}\n`;
  const first = writeCells(
    doc,
    mergeResults(
      [],
      [
        {
          id: 'knative-1.23-k8s-1.34',
          versions: 'v',
          date: '2026-12-05',
          result: 'pass',
          detail: 'a: 1 passed, 0 failed',
          time: 'build 1 s',
        },
      ],
    ),
  );
  const second = writeCells(
    first,
    mergeResults(parseRows(first), [
      { id: 'knative-1.24-k8s-1.37', versions: 'w', date: '2026-12-05', result: 'fail', detail: 'x | y', time: '' },
    ]),
  );
  const rows = parseRows(second);
  t.is(rows.length, 6);
  t.is(rows.find((r) => r.id === 'knative-1.23-k8s-1.34')?.result, 'pass');
  t.is(rows.find((r) => r.id === 'knative-1.24-k8s-1.37')?.detail, 'x | y');
  t.is(rows.find((r) => r.id === 'knative-1.23-k8s-1.35')?.result, 'not run');
  t.true(second.startsWith('# Compatibility\n'));
  t.regex(second, /knative-1\.24-k8s-1\.35, knative-1\.24-k8s-1\.36, knative-1\.24-k8s-1\.37: Serving v0\.51\.0's own code/);
  t.is(renderRows([]).length, 2);
});
