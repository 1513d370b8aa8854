import Handlebars from 'handlebars';

/**
 * The Handlebars rules of templates (docs/api.md, "Templates"), in one place: the campaign service checks
 * them when a template is written, delivery renders with the same helpers.
 */

/** The only block helpers a template may use: Handlebars' built-ins, less `log` (it writes to the server's log). */
export const TEMPLATE_BLOCK_HELPERS: ReadonlySet<string> = new Set(['if', 'unless', 'each', 'with', 'lookup']);

/** Blocks may nest this deep; Handlebars' parser and compiler slow down sharply with depth. */
export const TEMPLATE_MAX_NESTING = 64;

/**
 * Why the blocks of `source` nest deeper than TEMPLATE_MAX_NESTING, or undefined. One linear scan of the
 * tags, never a parse, so it is safe on any text: it counts `{{#`, `{{^` (not the `{{^}}` of an else) and
 * `{{/` outside comments; raw blocks and escaped tags count too, which can only overestimate.
 */
export function templateNestingProblem(source: string): string | undefined {
  let depth = 0;
  for (let at = source.indexOf('{{'); at >= 0; at = source.indexOf('{{', at)) {
    let next = at + 2;
    while (source[next] === '{' || source[next] === '~') next += 1;
    if (source[next] === '!') {
      const close = source.startsWith('!--', next) ? commentEnd(source, next + 3) : source.indexOf('}}', next);
      if (close < 0) return undefined;
      at = close;
      continue;
    }
    while (source[next] === ' ' || source[next] === '\t' || source[next] === '\n' || source[next] === '\r') next += 1;
    const sigil = source[next];
    if (sigil === '#' || (sigil === '^' && !/^\^\s*~?\}\}/.test(source.slice(next, next + 64)))) {
      depth += 1;
      if (depth > TEMPLATE_MAX_NESTING) return `template nests blocks deeper than ${TEMPLATE_MAX_NESTING} levels`;
    } else if (sigil === '/') {
      depth = Math.max(0, depth - 1);
    }
    at = next;
  }
  return undefined;
}

/** Where a `{{!-- ... --}}` comment started before `from` ends (`--}}` or `--~}}`), or -1. */
function commentEnd(source: string, from: number): number {
  for (let dashes = source.indexOf('--', from); dashes >= 0; dashes = source.indexOf('--', dashes + 1)) {
    if (source.startsWith('}}', dashes + 2) || source.startsWith('~}}', dashes + 2)) return dashes;
  }
  return -1;
}

type Node = hbs.AST.Node;

/** What a template uses that rendering does not offer: partials, decorators, `log`, other block helpers. */
function unavailableFeature(node: Node): string | undefined {
  switch (node.type) {
    case 'PartialStatement':
    case 'PartialBlockStatement':
      return 'template uses a partial: partials are not available';
    case 'Decorator':
    case 'DecoratorBlock':
      return 'template uses a decorator: decorators are not available';
    case 'BlockStatement': {
      const name = (node as hbs.AST.BlockStatement).path.original;
      if (!TEMPLATE_BLOCK_HELPERS.has(name)) {
        return `template uses block '${name}': only the block helpers if, unless, each, with and lookup are available`;
      }
      return undefined;
    }
    case 'MustacheStatement':
    case 'SubExpression': {
      const path = (node as hbs.AST.MustacheStatement).path;
      return path.type === 'PathExpression' && (path as hbs.AST.PathExpression).original === 'log'
        ? 'template uses the log helper, which is not available'
        : undefined;
    }
    default:
      return undefined;
  }
}

/** The nodes of a parsed template, walked with a stack: a parse that succeeded may still be deep in subexpressions. */
function firstUnavailableFeature(program: hbs.AST.Program): string | undefined {
  const pending: unknown[] = [program];
  while (pending.length > 0) {
    const node = pending.pop();
    if (Array.isArray(node)) {
      pending.push(...(node as unknown[]));
      continue;
    }
    if (typeof node !== 'object' || node === null || typeof (node as Node).type !== 'string') continue;
    const problem = unavailableFeature(node as Node);
    if (problem) return problem;
    const { body, path, params, hash, pairs, value, program: inner, inverse } = node as Record<string, unknown>;
    pending.push(body, path, params, hash, pairs, value, inner, inverse);
  }
  return undefined;
}

/**
 * Why `source` is not a template this platform sends, or undefined when it is. Parsing and precompiling
 * take time and memory that grow with the source: the campaign service calls this in a worker thread with
 * limits, never on a thread that serves requests. Handlebars' messages span lines (a caret under the
 * source); the first and the last say what and where.
 */
export function templateProblem(source: string): string | undefined {
  const nesting = templateNestingProblem(source);
  if (nesting) return nesting;
  try {
    const program = Handlebars.parse(source);
    const unavailable = firstUnavailableFeature(program);
    if (unavailable) return unavailable;
    Handlebars.precompile(program);
    return undefined;
  } catch (error) {
    const lines = (error instanceof Error ? error.message : String(error)).split('\n').filter((line) => line.trim() !== '');
    const problem = lines.length > 1 ? `${lines[0]} ${lines[lines.length - 1]}` : (lines[0] ?? 'invalid template');
    return `template does not compile: ${problem}`;
  }
}

/**
 * A Handlebars environment to render templates in: its own helpers (the built-ins without `log`) and no
 * partials, so nothing registered elsewhere in the process reaches a template.
 */
export function templateEnvironment(): typeof Handlebars {
  const environment = Handlebars.create();
  environment.unregisterHelper('log');
  return environment;
}
