import { randomUUID } from 'node:crypto';
import { chsql } from '@mail/event-store';
import { event, startAnalytics, type Analytics } from './harness';

const { dateTime, identifier, int, oneOf, sql, str, stringSet, uuid, uuidSet, UnsafeSqlValueError } = chsql;

const HOSTILE = [
  "'",
  "''",
  '\\',
  "\\'",
  "\\\\'",
  "'; DROP TABLE events; --",
  "' OR '1'='1",
  "a@example.com' OR email != '",
  '\0',
  'a\0b\0',
  '\n\r\t\b\f\v',
  '\x01\x1f\x7f',
  '😀 ünïcødé 中文 \u2028\u2029',
  '\\x00 \\0 \\N \\n',
  '`backtick` "double" $1 {x:String} ? :name',
  '/* comment */ -- line',
  "a'\\''b",
  '',
];

let analytics: Analytics;

beforeAll(async () => {
  analytics = await startAnalytics('analytics_sql');
});

afterAll(() => analytics.close());

async function scalar<T>(query: chsql.SqlFragment): Promise<T> {
  const result = await analytics.clickhouse.query({ query: query.text, format: 'JSONEachRow' });
  const [row] = await result.json<{ value: T }>();
  return row.value;
}

describe('str() against the real server', () => {
  it.each(HOSTILE.map((value) => [JSON.stringify(value), value]))('round-trips %s as data', async (_name, value) => {
    expect(await scalar(sql`SELECT ${str(value)} AS value`)).toBe(value);
    expect(Number(await scalar(sql`SELECT length(${str(value)}) AS value`))).toBe(Buffer.byteLength(value));
  });

  it('matches each stored value exactly, and only it', async () => {
    const workspaceId = randomUUID();
    await analytics.insertEvents(HOSTILE.map((email) => event({ workspace_id: workspaceId, campaign_id: randomUUID(), email })));
    for (const value of HOSTILE) {
      const matches = await scalar<string>(
        sql`SELECT count() AS value FROM events WHERE workspace_id = ${uuid(workspaceId)} AND email = ${str(value)}`,
      );
      expect([value, Number(matches)]).toEqual([value, 1]);
    }
    expect(Number(await scalar(sql`SELECT count() AS value FROM events`))).toBe(HOSTILE.length);
  });
});

describe('stringSet() and uuidSet() against the real server', () => {
  it('holds each hostile string exactly, and nothing else', async () => {
    for (const value of HOSTILE)
      expect([value, Number(await scalar(sql`SELECT ${str(value)} IN ${stringSet(HOSTILE)} AS value`))]).toEqual([value, 1]);
    expect(Number(await scalar(sql`SELECT 'not there' IN ${stringSet(HOSTILE)} AS value`))).toBe(0);
    expect(Number(await scalar(sql`SELECT count() AS value FROM ${stringSet(HOSTILE)}`))).toBe(HOSTILE.length);
  });

  it('holds UUIDs in any case', async () => {
    const ids = [randomUUID(), randomUUID().toUpperCase()];
    for (const id of ids) expect(Number(await scalar(sql`SELECT ${uuid(id)} IN ${uuidSet(ids)} AS value`))).toBe(1);
    expect(Number(await scalar(sql`SELECT ${uuid(randomUUID())} IN ${uuidSet(ids)} AS value`))).toBe(0);
  });
});

describe('the other value functions refuse what they cannot render safely', () => {
  it.each([
    ['uuid', () => uuid("00000000-0000-4000-8000-000000000000' OR 1=1")],
    ['uuid', () => uuid('not-a-uuid')],
    ['int', () => int(Number.NaN)],
    ['int', () => int(1.5)],
    ['int', () => int('1; DROP TABLE x' as unknown as number)],
    ['dateTime', () => dateTime(new Date('yesterday'))],
    ['oneOf', () => oneOf("open' OR '1'='1" as 'open', ['open', 'click'])],
    ['identifier', () => identifier('mail; DROP DATABASE mail')],
    ['str', () => str(42 as unknown as string)],
    ['uuidSet', () => uuidSet([randomUUID(), "00000000-0000-4000-8000-000000000000','x"])],
    ['uuidSet', () => uuidSet([])],
    ['stringSet', () => stringSet([])],
    ['stringSet', () => stringSet([42 as unknown as string])],
    ['sql', () => sql`SELECT ${'1; DROP TABLE x' as unknown as chsql.SqlFragment}`],
  ])('%s', (_name, render) => {
    expect(render).toThrow(UnsafeSqlValueError);
  });

  it('renders valid values as literals the server reads back', async () => {
    const id = randomUUID().toUpperCase();
    expect(await scalar(sql`SELECT toString(${uuid(id)}) AS value`)).toBe(id.toLowerCase());
    expect(await scalar(sql`SELECT toUInt32(${dateTime(new Date('2026-03-10T12:00:00.999Z'))}) AS value`)).toBe(
      Date.parse('2026-03-10T12:00:00Z') / 1000,
    );
    expect(await scalar(sql`SELECT ${oneOf('click', ['open', 'click'])} AS value`)).toBe('click');
  });
});
