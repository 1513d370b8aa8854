import fs from 'node:fs';
import YAML from 'yaml';

export interface ComposeService {
  image?: string;
  build?: unknown;
  environment?: Record<string, string | number | boolean | null> | string[];
  healthcheck?: { test?: string | string[]; disable?: boolean };
  depends_on?: string[] | Record<string, { condition?: string }>;
  [key: string]: unknown;
}

export interface ComposeFile {
  services: Record<string, ComposeService>;
  [key: string]: unknown;
}

/**
 * Reads a compose file the way Docker Compose does before it validates it:
 * YAML with merge keys (<<), then interpolation of ${VAR}, ${VAR:-default}
 * and the other forms of the Compose Specification, with `env` as the shell.
 */
export function loadCompose(file: string, env: Readonly<Record<string, string>> = {}): ComposeFile {
  const raw = YAML.parse(fs.readFileSync(file, 'utf8'), { merge: true }) as unknown;
  return interpolateValues(raw, env) as ComposeFile;
}

function interpolateValues(value: unknown, env: Readonly<Record<string, string>>): unknown {
  if (typeof value === 'string') return interpolate(value, env);
  if (Array.isArray(value)) return value.map((item) => interpolateValues(item, env));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, interpolateValues(item, env)]));
  }
  return value;
}

export function interpolate(text: string, env: Readonly<Record<string, string>>): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    if (text[i] !== '$') {
      out += text[i++];
      continue;
    }
    if (text[i + 1] === '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (text[i + 1] === '{') {
      let depth = 1;
      let j = i + 2;
      for (; j < text.length && depth > 0; j++) {
        if (text[j] === '{') depth++;
        if (text[j] === '}') depth--;
      }
      if (depth !== 0) throw new Error(`invalid interpolation format for "${text}": unclosed \${`);
      out += substitute(text.slice(i + 2, j - 1), env, text);
      i = j;
      continue;
    }
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i + 1))?.[0];
    if (!name) throw new Error(`invalid interpolation format for "${text}": a lone $ (write $$)`);
    out += env[name] ?? '';
    i += 1 + name.length;
  }
  return out;
}

function substitute(body: string, env: Readonly<Record<string, string>>, whole: string): string {
  const match = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:-|-|:\?|\?|:\+|\+)([\s\S]*))?$/.exec(body);
  if (!match) throw new Error(`invalid interpolation format for "${whole}": \${${body}}`);
  const [, name, operator, argument = ''] = match;
  const value = env[name];
  const isSet = value !== undefined;
  const nonEmpty = isSet && value !== '';
  switch (operator) {
    case undefined:
      return value ?? '';
    case ':-':
      return nonEmpty ? value : interpolate(argument, env);
    case '-':
      return isSet ? value : interpolate(argument, env);
    case ':+':
      return nonEmpty ? interpolate(argument, env) : '';
    case '+':
      return isSet ? interpolate(argument, env) : '';
    default:
      if (operator === ':?' ? !nonEmpty : !isSet) throw new Error(`required variable ${name} is missing: ${argument}`);
      return value ?? '';
  }
}

/** The variables a compose service sets, whichever form its environment takes. */
export function composeEnvironment(service: ComposeService): Record<string, string> {
  const environment = service.environment ?? {};
  if (Array.isArray(environment)) {
    return Object.fromEntries(
      environment.map((entry) => {
        const at = entry.indexOf('=');
        return at < 0 ? [entry, ''] : [entry.slice(0, at), entry.slice(at + 1)];
      }),
    );
  }
  return Object.fromEntries(Object.entries(environment).map(([key, value]) => [key, value === null ? '' : String(value)]));
}
