/**
 * No import circles: every module of every workspace (src and test, type-only
 * imports and re-exports included) is read with the TypeScript compiler's own
 * import scanner, its relative imports resolved to files, and the graph must
 * have no strongly connected component of more than one file (nor a file
 * importing itself). A circle means a piece shared by both sides lives in the
 * wrong one; it moves to where it belongs. Imports of other packages are not
 * edges here: project references (`tsc -b`) already refuse circles between
 * packages.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { REPO_ROOT } from './support/tools';

const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'gen', '.state']);

function workspaceDirs(): string[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { workspaces: string[] };
  return [...manifest.workspaces, 'deploy/test', 'deploy/cluster-test', 'bench'].map((dir) => path.join(REPO_ROOT, dir));
}

function sourceFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return SKIPPED_DIRS.has(entry.name) ? [] : sourceFiles(full);
    return /\.(ts|tsx|mts)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The file a relative specifier names, as Node16/bundler resolution would find it among the sources. */
function resolveRelative(from: string, specifier: string, known: Set<string>): string | undefined {
  const base = path.resolve(path.dirname(from), specifier.replace(/\.(js|mjs)$/, ''));
  return [`${base}.ts`, `${base}.tsx`, `${base}.mts`, path.join(base, 'index.ts')].find((candidate) => known.has(candidate));
}

function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const scanned = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    const targets = scanned.importedFiles
      .map((ref) => ref.fileName)
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => resolveRelative(file, specifier, known))
      .filter((target): target is string => target !== undefined);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Tarjan's strongly connected components; those of more than one file, or a file importing itself, are circles. */
function circles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

describe('the import graph', () => {
  it('has no circles in any workspace, type-only imports included', () => {
    const files = workspaceDirs().flatMap(sourceFiles);
    expect(files.length).toBeGreaterThan(100);
    const named = circles(importGraph(files)).map((component) => component.map((file) => path.relative(REPO_ROOT, file)).join(' <-> '));
    expect(named).toEqual([]);
  });

  it('finds a circle through a type-only import', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(circles(graph)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'import-graph-'));
    try {
      fs.writeFileSync(path.join(dir, 'one.ts'), "import type { Two } from './two';\nexport type One = Two[];\n");
      fs.writeFileSync(path.join(dir, 'two.ts'), "export type { One as Two } from './one.js';\n");
      const files = sourceFiles(dir);
      expect(circles(importGraph(files))).toEqual([files.sort()]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
