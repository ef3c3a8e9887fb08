// docs/compatibility.md's table of cells: rendered from results, and read back so that a run of
// some cells keeps the rows of the others.
import { CELLS, type Cell } from './cells.ts';

export const CELLS_MARKER = '<!-- cells: written by npm run test:matrix -->';

export interface CellResult {
  id: string;
  /** Exact versions: Kubernetes, Serving, Eventing, kn. */
  versions: string;
  /** YYYY-MM-DD of the run. */
  date: string;
  result: 'pass' | 'fail' | 'not run';
  /** "N passed, N failed" per suite, or why the cell did not run. */
  detail: string;
  /** Cold build of what the cell alone needs, and the tests' time. */
  time: string;
}

export function versionsOf(c: Cell): string {
  const k = c.knative;
  return `Kubernetes ${c.kubernetesVersion}, Serving ${k.servingVersion}, Eventing ${k.eventingVersion}, kn ${k.knVersion}`;
}

const HEADER = ['| cell | versions | date | result | tests | time |', '|---|---|---|---|---|---|'];
const cellText = (s: string) => s.replaceAll('|', '\\|').replaceAll('\n', ' ');

export function renderRows(results: readonly CellResult[]): string[] {
  return [...HEADER, ...results.map((r) => `| ${[r.id, r.versions, r.date, r.result, r.detail, r.time].map(cellText).join(' | ')} |`)];
}

/** The rows of a compatibility.md as written by renderRows (unknown rows are dropped). */
export function parseRows(doc: string): CellResult[] {
  const at = doc.indexOf(CELLS_MARKER);
  if (at < 0) return [];
  const out: CellResult[] = [];
  for (const line of doc.slice(at).split('\n')) {
    if (!line.startsWith('| knative-')) continue;
    const parts = line
      .slice(2, -2)
      .split(/(?<!\\) \| /)
      .map((p) => p.replaceAll('\\|', '|'));
    const [id, versions, date, result, detail, time] = parts;
    if (!id || !CELLS.some((c) => c.id === id) || parts.length !== 6) continue;
    if (result !== 'pass' && result !== 'fail' && result !== 'not run') continue;
    out.push({ id, versions: versions ?? '', date: date ?? '', result, detail: detail ?? '', time: time ?? '' });
  }
  return out;
}

/** Every cell in CELLS' order: the new result where there is one, else the old row, else "not run". */
export function mergeResults(old: readonly CellResult[], fresh: readonly CellResult[]): CellResult[] {
  return CELLS.map(
    (c) =>
      fresh.find((r) => r.id === c.id) ??
      old.find((r) => r.id === c.id) ?? {
        id: c.id,
        versions: versionsOf(c),
        date: '',
        result: 'not run',
        detail: 'never run',
        time: '',
      },
  );
}

/** The notes of the cells, one list under the table (each note once). */
export function renderNotes(): string[] {
  const notes = new Map<string, string[]>();
  for (const c of CELLS) for (const n of c.notes) notes.set(n, [...(notes.get(n) ?? []), c.id]);
  return [...notes].map(([note, ids]) => `- ${ids.join(', ')}: ${note}.`);
}

/** The document with everything after the marker replaced by the table and the notes. */
export function writeCells(doc: string, results: readonly CellResult[]): string {
  const at = doc.indexOf(CELLS_MARKER);
  if (at < 0) throw new Error(`docs/compatibility.md has no line ${CELLS_MARKER}`);
  const notes = renderNotes();
  return `${doc.slice(0, at + CELLS_MARKER.length)}\n\n${renderRows(results).join('\n')}\n${notes.length ? `\n${notes.join('\n')}\n` : ''}`;
}
