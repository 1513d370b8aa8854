import Handlebars from 'handlebars';
import { valueError, type Violation } from '../errors';

/**
 * Why `source` is not a Handlebars template (the dialect of SendGrid's dynamic templates), or undefined
 * when it compiles. Handlebars compiles lazily; precompiling parses the whole source, so every syntax error
 * shows now rather than at the first send. Its message spans lines (a caret under the source); the first
 * and the last say what and where. Not memoized, unlike the other checks: a source may be a megabyte.
 */
export function templateProblem(source: string): string | undefined {
  try {
    Handlebars.precompile(source);
    return undefined;
  } catch (error) {
    const lines = (error instanceof Error ? error.message : String(error)).split('\n').filter((line) => line.trim() !== '');
    return lines.length > 1 ? `${lines[0]} ${lines[lines.length - 1]}` : (lines[0] ?? 'invalid template');
  }
}

/** The value_error for a template text that does not compile. */
export function templateViolation(loc: (string | number)[], source: string): Violation | undefined {
  const problem = templateProblem(source);
  return problem === undefined ? undefined : valueError(loc, source, `template does not compile: ${problem}`);
}
