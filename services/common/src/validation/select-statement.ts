import { Parser } from 'node-sql-parser/build/transactsql';
import { valueError, type Violation } from '../errors';
import { memoized } from './memo';

/**
 * A campaign's recipient query runs on the customer's SQL Server, so it must be
 * one read-only SELECT (CTEs, set operations, joins and subqueries included).
 *
 * Two independent checks:
 * 1. A T-SQL tokenizer that skips string literals, comments and quoted
 *    identifiers and refuses every keyword that writes, executes, changes the
 *    session or reads through a linked server. These are all reserved words in
 *    T-SQL, so a valid query cannot use them as bare names.
 * 2. node-sql-parser must parse the text as exactly one SELECT. Its T-SQL
 *    grammar lacks some clauses that only shape a result (EXCEPT, INTERSECT,
 *    TRY_CAST, WITH TIES, OPTION (...), AT TIME ZONE, COLLATE, ESCAPE,
 *    OFFSET/FETCH alone, TABLESAMPLE); they are rewritten or blanked out for
 *    the parse only, keeping offsets so error positions stay right. The
 *    keyword check has already seen the original text.
 */
const FORBIDDEN = new Set([
  'INSERT',
  'UPDATE',
  'DELETE',
  'MERGE',
  'TRUNCATE',
  'INTO',
  'BULK',
  'CREATE',
  'ALTER',
  'DROP',
  'GRANT',
  'REVOKE',
  'DENY',
  'EXEC',
  'EXECUTE',
  'DECLARE',
  'SET',
  'USE',
  'WAITFOR',
  'BEGIN',
  'COMMIT',
  'ROLLBACK',
  'SAVE',
  'TRAN',
  'TRANSACTION',
  'BACKUP',
  'RESTORE',
  'DBCC',
  'KILL',
  'SHUTDOWN',
  'RECONFIGURE',
  'CHECKPOINT',
  'OPENQUERY',
  'OPENROWSET',
  'OPENDATASOURCE',
]);

interface Token {
  kind: 'word' | 'literal' | 'symbol';
  /** Upper-case for words. */
  text: string;
  start: number;
  end: number;
}

// Comments and whitespace; strings ('' escapes a quote); [bracketed] and "double-quoted" names; words (incl. @var,
// #temp); numbers (incl. 0x.., 1.5e3); any other single character. An unterminated literal runs to the end.
const LEXEME =
  /(\s+|--[^\n]*|\/\*[\s\S]*?(?:\*\/|$))|('(?:[^']|'')*'?|\[(?:[^\]]|\]\])*\]?|"(?:[^"]|"")*"?|\d[\w.]*)|([\p{L}_@#][\p{L}\p{N}_@#$]*)|([\s\S])/uy;

function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  LEXEME.lastIndex = 0;
  let match: RegExpExecArray | null;
  while ((match = LEXEME.exec(sql)) !== null) {
    const [text, trivia, literal, word] = match;
    const start = match.index;
    const end = start + text.length;
    if (trivia !== undefined) continue;
    if (literal !== undefined) tokens.push({ kind: 'literal', text, start, end });
    else if (word !== undefined) tokens.push({ kind: 'word', text: word.toUpperCase(), start, end });
    else tokens.push({ kind: 'symbol', text, start, end });
  }
  return tokens;
}

/** The text the parser sees: same length and line breaks, with the unsupported clauses rewritten or blanked. */
function forParser(sql: string, tokens: Token[]): string {
  const chars = sql.split('');
  const put = (from: Token, to: Token, replacement = ''): void => {
    for (let i = from.start; i < to.end; i++) {
      const offset = i - from.start;
      chars[i] = offset < replacement.length ? replacement[offset] : sql[i] === '\n' ? '\n' : ' ';
    }
  };
  const word = (i: number, ...texts: string[]): boolean => tokens[i]?.kind === 'word' && texts.includes(tokens[i].text);
  const symbol = (i: number, text: string): boolean => tokens[i]?.kind === 'symbol' && tokens[i].text === text;
  /** Index of the last token of the operand starting at i: one token, or a parenthesized group. */
  const operandEnd = (i: number): number => {
    if (!symbol(i, '(')) return i;
    for (let depth = 0, j = i; j < tokens.length; j++) {
      if (symbol(j, '(')) depth++;
      if (symbol(j, ')') && --depth === 0) return j;
    }
    return tokens.length - 1;
  };

  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    if (word(i, 'EXCEPT', 'INTERSECT')) put(token, token, 'UNION');
    else if (word(i, 'TRY_CAST') && symbol(i + 1, '(')) put(token, token, 'CAST');
    else if (word(i, 'WITH') && word(i + 1, 'TIES')) put(token, tokens[i + 1]);
    else if (word(i, 'OPTION') && symbol(i + 1, '(')) put(token, tokens[operandEnd(i + 1)]);
    else if (word(i, 'AT') && word(i + 1, 'TIME') && word(i + 2, 'ZONE')) put(token, tokens[operandEnd(i + 3)]);
    else if (word(i, 'COLLATE', 'ESCAPE')) put(token, tokens[operandEnd(i + 1)]);
    else if (word(i, 'OFFSET')) {
      const rows = operandEnd(i + 1) + 1;
      if (word(rows, 'ROW', 'ROWS')) put(token, tokens[rows]);
    } else if (word(i, 'FETCH') && word(i + 1, 'FIRST', 'NEXT')) {
      const only = operandEnd(i + 2) + 2;
      if (word(only, 'ONLY')) put(token, tokens[only]);
    } else if (word(i, 'TABLESAMPLE')) {
      let last = operandEnd(word(i + 1, 'SYSTEM') ? i + 2 : i + 1);
      if (word(last + 1, 'REPEATABLE')) last = operandEnd(last + 2);
      put(token, tokens[last]);
    }
  }
  return chars.join('');
}

const parser = new Parser();

/** Why `sql` is not a single read-only SELECT, or undefined when it is. */
export const readOnlySelectProblem = memoized((sql: string): string | undefined => {
  const tokens = tokenize(sql);
  if (tokens.length === 0) return 'it is empty';
  const forbidden = tokens.find((token) => token.kind === 'word' && FORBIDDEN.has(token.text));
  if (forbidden) return `${forbidden.text} is not allowed`;

  let statements;
  try {
    const ast = parser.astify(forParser(sql, tokens), { database: 'TransactSQL' });
    statements = Array.isArray(ast) ? ast : [ast];
  } catch (error) {
    const at = (error as { location?: { start?: { line: number; column: number } } }).location?.start;
    return at ? `it is not valid T-SQL (line ${at.line}, column ${at.column})` : 'it is not valid T-SQL';
  }
  if (statements.length !== 1) return `it has ${statements.length} statements, only one is allowed`;
  if (statements[0].type !== 'select') return 'it is not a SELECT';
  return undefined;
});

/** Longer recipient queries are refused before parsing: parsing is linear but not cheap (bench/README.md, "Campaign and Postgres"). */
export const MSSQL_QUERY_MAX_LENGTH = 20_000;

/** The value_error for a recipient query that is not one read-only SELECT (its length is checked apart, first). */
export function selectStatementViolation(loc: (string | number)[], sql: string): Violation | undefined {
  const problem = readOnlySelectProblem(sql);
  return problem === undefined ? undefined : valueError(loc, sql, `mssql_query must be a single read-only SELECT statement; ${problem}`);
}
