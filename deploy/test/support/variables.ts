import fs from 'node:fs';
import path from 'node:path';
import { PROVIDERS } from '../../../gateway/src/webhook/providers';
import { REPO_ROOT } from './tools';

export const SERVICES = ['identity', 'campaign', 'brand-guide', 'analytics', 'ingestion', 'delivery'] as const;
export const PROCESSES = [...SERVICES, 'gateway'] as const;
export type ServiceName = (typeof SERVICES)[number];
export type ProcessName = (typeof PROCESSES)[number];

/** One place where a process reads an environment variable. */
export interface VariableRead {
  variable: string;
  processes: readonly ProcessName[];
  /** Where it was found: a source file, or docs/CONVENTIONS.md. */
  source: string;
  /** The literal default in the code (`env.int('X', 250)` gives "250"), when there is one. */
  codeDefault?: string;
}

const READER =
  /\benv\.(?:string|int|positiveInt|bool|list|optionalString|optionalInt)\(\s*['"]([A-Z][A-Z0-9_]*)['"]\s*(?:,\s*([^)]*?))?\s*\)/g;
const GRPC_ADDRESS = /\bgrpcAddressVariable:\s*['"]([A-Z][A-Z0-9_]*)['"]/g;
const PROCESS_ENV = /\bprocess\.env(?:\.([A-Z][A-Z0-9_]*)|\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\])/g;

/**
 * Every variable the processes read, found in their sources: the EnvReader
 * calls (env.string('X'), env.int, env.positiveInt, env.bool, env.list,
 * env.optionalString, env.optionalInt),
 * each service's grpcAddressVariable, any direct process.env.X, and the
 * variables the webhook providers declare (gateway/src/webhook/providers).
 * services/common is read by every service (runService reads its config).
 */
export function variablesReadByCode(): VariableRead[] {
  const roots: { dir: string; processes: readonly ProcessName[] }[] = [
    { dir: 'services/common/src', processes: SERVICES },
    ...SERVICES.map((service) => ({ dir: `services/${service}/src`, processes: [service] as const })),
    { dir: 'gateway/src', processes: ['gateway'] as const },
  ];
  const reads: VariableRead[] = [];
  for (const root of roots) {
    for (const file of typeScriptFiles(path.join(REPO_ROOT, root.dir))) {
      const text = fs.readFileSync(file, 'utf8');
      const source = path.relative(REPO_ROOT, file);
      for (const match of text.matchAll(READER)) {
        reads.push({ variable: match[1], processes: root.processes, source, codeDefault: literalDefault(match[2]) });
      }
      for (const match of text.matchAll(GRPC_ADDRESS)) reads.push({ variable: match[1], processes: root.processes, source });
      for (const match of text.matchAll(PROCESS_ENV)) {
        reads.push({ variable: match[1] ?? match[2], processes: root.processes, source });
      }
    }
  }
  for (const provider of PROVIDERS) {
    for (const variable of provider.variables) {
      const codeDefault = /^`(.*)`$/.exec(variable.documentedDefault)?.[1];
      reads.push({ variable: variable.name, processes: ['gateway'], source: `the ${provider.name} provider's declaration`, codeDefault });
    }
  }
  return reads;
}

function typeScriptFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return typeScriptFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** '...' and "...", numbers (1_000), arrays of those; undefined for anything computed. */
function literalDefault(argument: string | undefined): string | undefined {
  if (argument === undefined) return undefined;
  const text = argument.trim();
  const single = (item: string): string | undefined => {
    const quoted = /^(['"])(.*)\1$/.exec(item.trim());
    if (quoted) return quoted[2];
    if (/^-?[\d_]+$/.test(item.trim())) return item.trim().replace(/_/g, '');
    return undefined;
  };
  if (text.startsWith('[') && text.endsWith(']')) {
    const items = text
      .slice(1, -1)
      .split(',')
      .filter((item) => item.trim() !== '')
      .map(single);
    return items.every((item) => item !== undefined) ? items.join(',') : undefined;
  }
  return single(text);
}

/**
 * The variables docs/CONVENTIONS.md declares per process ("Processes,
 * addresses and variables"), so a process whose code has not landed yet is
 * still checked. AUTH_* stands for the gateway's three AUTH_ variables.
 */
export function variablesDeclaredByConventions(): VariableRead[] {
  const file = path.join(REPO_ROOT, 'docs/CONVENTIONS.md');
  const source = 'docs/CONVENTIONS.md';
  const text = fs.readFileSync(file, 'utf8');
  const reads: VariableRead[] = [];
  const lines = text.split('\n');
  const header = lines.find((line) => /^\|\s*process\s*\|/.test(line));
  if (!header) throw new Error(`${source}: the table "| process | ..." of processes and variables is gone; update deploy/test`);
  const opsColumn = cells(header).findIndex((cell) => cell.includes('OPS_PORT'));
  for (const line of lines) {
    const row = cells(line);
    const process = PROCESSES.find((name) => name === row[0]);
    if (!process) continue;
    const names = new Set(row.flatMap(variableNames));
    if (process !== 'gateway' && opsColumn > 0 && /^\d+$/.test(row[opsColumn] ?? '')) names.add('OPS_PORT');
    for (const variable of names) reads.push({ variable, processes: [process], source });
  }
  const everyProcess = /Every process also reads ([^.]*)\./.exec(text);
  if (everyProcess) {
    for (const variable of variableNames(everyProcess[1])) reads.push({ variable, processes: PROCESSES, source });
  }
  if (reads.length === 0) throw new Error(`${source}: no process rows found in the variables table; update deploy/test`);
  return reads;
}

function cells(line: string): string[] {
  if (!line.trim().startsWith('|')) return [];
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split('|')
    .map((cell) => cell.trim());
}

function variableNames(text: string): string[] {
  const names: string[] = [];
  for (const match of text.matchAll(/(\*?)\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)(_?\*?)/g)) {
    const [, before, name, after] = match;
    if (name === 'AUTH' && after === '_*') names.push('AUTH_JWKS_URL', 'AUTH_ISSUER', 'AUTH_AUDIENCE');
    else if (!before && !after && (name.includes('_') || name === 'PORT')) names.push(name);
  }
  return names;
}

/** process -> variables it reads, from the code and the conventions together. */
export function variablesByProcess(reads: readonly VariableRead[]): Map<ProcessName, Set<string>> {
  const byProcess = new Map<ProcessName, Set<string>>(PROCESSES.map((name) => [name, new Set<string>()]));
  for (const read of reads) for (const process of read.processes) byProcess.get(process)!.add(read.variable);
  return byProcess;
}

export interface ConfigurationRow {
  variable: string;
  defaultCell: string;
  readByCell: string;
}

/**
 * The table of docs/configuration.md, "Variables": one row per variable,
 * `NAME` in the first column, the default in the second and the processes
 * that read it in the third.
 */
export function configurationTable(): { file: string; rows: Map<string, ConfigurationRow> } {
  const file = 'docs/configuration.md';
  const section =
    /^## Variables[ \t]*\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(fs.readFileSync(path.join(REPO_ROOT, file), 'utf8'))?.[1] ?? '';
  const rows = new Map<string, ConfigurationRow>();
  for (const line of section.split('\n')) {
    const row = cells(line);
    for (const match of (row[0] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g)) {
      rows.set(match[1], { variable: match[1], defaultCell: row[1] ?? '', readByCell: row[2] ?? '' });
    }
  }
  if (rows.size === 0) throw new Error(`no "## Variables" table with \`VARIABLE\` rows in ${file}`);
  return { file, rows };
}

/** Does a "read by" cell name this process (or say "every process" / "every service")? */
export function readByMentions(cell: string, process: ProcessName): boolean {
  const text = cell.toLowerCase();
  if (text.includes('every process')) return true;
  if (process !== 'gateway' && text.includes('every service')) return true;
  return new RegExp(`(^|[^a-z-])${process}($|[^a-z-])`).test(text);
}
