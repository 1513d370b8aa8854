import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { StoreLayout, chsql, createClickHouse, ensureEventSchema, suppressionStateTable, suppressionStates } from '@mail/event-store';
import { createTestClickHouse } from '@mail/local';
import { SuppressionReason, failure, signal, startAnalytics, status, type Analytics, type SignalRow } from './harness';

const W = randomUUID();
const DAY = 86_400_000;
const T0 = Date.parse('2026-02-01T00:00:00Z');
const day = (n: number) => new Date(T0 + n * DAY).toISOString();

let analytics: Analytics;

beforeAll(async () => {
  analytics = await startAnalytics('analytics_suppressions');
});

afterAll(() => analytics.close());

const signals = (email: string, ...entries: [SignalRow['reason'], string][]) =>
  analytics.insertSignals(entries.map(([reason, occurred_at]) => signal({ workspace_id: W, email, reason, occurred_at })));

async function suppressionOf(email: string, workspaceId = W) {
  const response = await analytics.rpc('listSuppressions', { workspaceId, email });
  expect(response.page?.total).toBe(response.suppressions.length);
  return response.suppressions[0];
}

describe('suppression rules', () => {
  it.each([
    ['hard_bounce', SuppressionReason.SUPPRESSION_REASON_HARD_BOUNCE],
    ['unsubscribe', SuppressionReason.SUPPRESSION_REASON_UNSUBSCRIBE],
    ['spam_report', SuppressionReason.SUPPRESSION_REASON_SPAM_REPORT],
  ] as const)('a %s suppresses at once', async (reason, expected) => {
    const email = `${reason}@example.com`;
    await signals(email, [reason, day(3)]);
    expect(await suppressionOf(email)).toEqual({ email, reason: expected, suppressedAt: new Date(day(3)) });
  });

  it('the earliest signal decides when and why', async () => {
    await signals('early@example.com', ['hard_bounce', day(9)], ['unsubscribe', day(2)], ['soft_bounce', day(0)], ['soft_bounce', day(1)]);
    expect(await suppressionOf('early@example.com')).toMatchObject({
      reason: SuppressionReason.SUPPRESSION_REASON_UNSUBSCRIBE,
      suppressedAt: new Date(day(2)),
    });
    await signals(
      'soft-first@example.com',
      ['soft_bounce', day(0)],
      ['soft_bounce', day(1)],
      ['soft_bounce', day(2)],
      ['hard_bounce', day(5)],
    );
    expect(await suppressionOf('soft-first@example.com')).toMatchObject({
      reason: SuppressionReason.SUPPRESSION_REASON_SOFT_BOUNCES,
      suppressedAt: new Date(day(2)),
    });
  });

  it('two soft bounces do not suppress', async () => {
    await signals('two@example.com', ['soft_bounce', day(0)], ['soft_bounce', day(1)]);
    expect(await suppressionOf('two@example.com')).toBeUndefined();
  });

  it('three soft bounces within 30 days suppress at the third', async () => {
    await signals('three@example.com', ['soft_bounce', day(0)], ['soft_bounce', day(10)], ['soft_bounce', day(30)]);
    expect(await suppressionOf('three@example.com')).toEqual({
      email: 'three@example.com',
      reason: SuppressionReason.SUPPRESSION_REASON_SOFT_BOUNCES,
      suppressedAt: new Date(day(30)),
    });
  });

  it('three soft bounces spread over more than 30 days do not, until three fall within 30 days', async () => {
    await signals('spread@example.com', ['soft_bounce', day(0)], ['soft_bounce', day(20)], ['soft_bounce', day(40)]);
    expect(await suppressionOf('spread@example.com')).toBeUndefined();
    await signals('spread@example.com', ['soft_bounce', day(45)]);
    expect(await suppressionOf('spread@example.com')).toMatchObject({ suppressedAt: new Date(day(45)) });
  });

  it('one soft bounce stored twice counts once', async () => {
    const twice = signal({ workspace_id: W, email: 'dup@example.com', reason: 'soft_bounce', occurred_at: day(1) });
    await analytics.insertSignals([
      twice,
      signal({ workspace_id: W, email: 'dup@example.com', reason: 'soft_bounce', occurred_at: day(2) }),
    ]);
    await analytics.insertSignals([{ ...twice, ingested_at: new Date().toISOString() }]);
    expect(await suppressionOf('dup@example.com')).toBeUndefined();
  });

  it('is per workspace', async () => {
    expect(await suppressionOf('hard_bounce@example.com', randomUUID())).toBeUndefined();
  });
});

describe('ListSuppressions', () => {
  const workspaceId = randomUUID();

  beforeAll(() =>
    analytics.insertSignals(
      ['a', 'b', 'c', 'd', 'e'].map((name, index) =>
        signal({ workspace_id: workspaceId, email: `${name}@example.com`, reason: 'hard_bounce', occurred_at: day(index % 3) }),
      ),
    ),
  );

  it('pages newest first, then by address', async () => {
    const page = (n: number) => analytics.rpc('listSuppressions', { workspaceId, page: { page: n, pageSize: 2 } });
    const pages = await Promise.all([1, 2, 3, 4].map(page));
    expect(pages.map((p) => p.suppressions.map((s) => s.email))).toEqual([
      ['c@example.com', 'b@example.com'],
      ['e@example.com', 'a@example.com'],
      ['d@example.com'],
      [],
    ]);
    expect(pages.map((p) => p.page)).toEqual([1, 2, 3, 4].map((n) => ({ total: 5, page: n, pageSize: 2 })));
  });

  it('filters by exact address, case-insensitively; injection attempts are data', async () => {
    const found = await analytics.rpc('listSuppressions', { workspaceId, email: ' B@Example.com' });
    expect(found.suppressions.map((s) => s.email)).toEqual(['b@example.com']);
    for (const email of ["' OR 1=1 --", "b@example.com' OR '1'='1", "\\'; DROP TABLE suppression_signals; --"]) {
      expect(await analytics.rpc('listSuppressions', { workspaceId, email })).toMatchObject({ suppressions: [], page: { total: 0 } });
    }
  });

  it('refuses a workspace id that is not a UUID', async () => {
    const result = await failure(analytics.rpc('listSuppressions', { workspaceId: "x' OR 1=1" }));
    expect(result.code).toBe(status.INVALID_ARGUMENT);
    expect(result.violations[0]).toMatchObject({ loc: ['workspace_id'], type: 'uuid_parsing' });
  });
});

describe('LiftSuppression', () => {
  // Two seconds ahead, whole seconds as stored: after the lift, which ignores signals up to its own second.
  const soon = () => new Date(Math.ceil(Date.now() / 1000) * 1000 + 2_000).toISOString();

  it('lifts a suppression; a later signal suppresses again', async () => {
    await signals('lifted@example.com', ['hard_bounce', day(1)]);
    await analytics.rpc('liftSuppression', { workspaceId: W, email: 'Lifted@Example.com' });
    expect(await suppressionOf('lifted@example.com')).toBeUndefined();
    expect((await failure(analytics.rpc('liftSuppression', { workspaceId: W, email: 'lifted@example.com' }))).code).toBe(status.NOT_FOUND);

    const again = soon();
    await signals('lifted@example.com', ['unsubscribe', again]);
    expect(await suppressionOf('lifted@example.com')).toMatchObject({
      reason: SuppressionReason.SUPPRESSION_REASON_UNSUBSCRIBE,
      suppressedAt: new Date(again),
    });
  });

  it('forgets soft bounces from before the lift', async () => {
    await signals('soft-lift@example.com', ['soft_bounce', day(0)], ['soft_bounce', day(1)], ['soft_bounce', day(2)]);
    await analytics.rpc('liftSuppression', { workspaceId: W, email: 'soft-lift@example.com' });
    await signals('soft-lift@example.com', ['soft_bounce', soon()]);
    expect(await suppressionOf('soft-lift@example.com')).toBeUndefined();
  });

  it('answers NOT_FOUND for an address that is not suppressed', async () => {
    await signals('almost@example.com', ['soft_bounce', day(0)], ['soft_bounce', day(1)]);
    for (const email of ['almost@example.com', 'never@example.com', "' OR 1=1 --", "hard_bounce@example.com' --"]) {
      expect((await failure(analytics.rpc('liftSuppression', { workspaceId: W, email }))).code).toBe(status.NOT_FOUND);
    }
    expect(await suppressionOf('hard_bounce@example.com')).toBeDefined();
  });
});

describe('stored suppression state', () => {
  const { identifier, sql, str, uuid } = chsql;
  const query = async <T>(statement: chsql.SqlFragment): Promise<T[]> =>
    (await analytics.clickhouse.query({ query: statement.text, format: 'JSONEachRow' })).json<T>();
  const command = (statement: chsql.SqlFragment) => analytics.clickhouse.command({ query: statement.text });
  const stateOf = async (email: string) =>
    (
      await query<{ reason: string; version: string }>(
        sql`SELECT reason, version FROM suppression_state FINAL WHERE workspace_id = ${uuid(W)} AND email = ${str(email)}`,
      )
    )[0];
  /** What a writer computed for the address now, kept aside to be written late (a slow concurrent writer). */
  async function computeNow(email: string): Promise<() => Promise<void>> {
    const table = identifier(`stale_${randomUUID().replace(/-/g, '')}`);
    await command(sql`CREATE TABLE ${table} ENGINE = Memory AS ${suppressionStates([{ workspaceId: W, email }])}`);
    return async () => {
      await command(sql`INSERT INTO suppression_state SELECT * FROM ${table}`);
      await command(sql`DROP TABLE ${table}`);
    };
  }
  const liftedAt = async (email: string) =>
    Number(
      (
        await query<{ at: number }>(
          sql`SELECT toUInt32(max(lifted_at)) AS at FROM suppression_lifts WHERE workspace_id = ${uuid(W)} AND email = ${str(email)}`,
        )
      )[0].at,
    );
  const second = (unixSeconds: number) => new Date(unixSeconds * 1000).toISOString();

  it('a replayed batch writes the same row again', async () => {
    const batch = [
      signal({ workspace_id: W, email: 'replay@example.com', reason: 'soft_bounce', occurred_at: day(1) }),
      signal({ workspace_id: W, email: 'replay@example.com', reason: 'hard_bounce', occurred_at: day(2) }),
    ];
    await analytics.insertSignals(batch);
    const first = await stateOf('replay@example.com');
    await analytics.insertSignals(batch.map((row) => ({ ...row, ingested_at: new Date().toISOString() })));
    expect(await stateOf('replay@example.com')).toEqual(first);
    expect(first).toEqual({ reason: 'hard_bounce', version: '2' });
    expect(await suppressionOf('replay@example.com')).toMatchObject({ suppressedAt: new Date(day(2)) });
  });

  it('a lift racing a new bounce: a late write of the state before the bounce does not undo it', async () => {
    await signals('race@example.com', ['hard_bounce', day(1)]);
    await analytics.rpc('liftSuppression', { workspaceId: W, email: 'race@example.com' });
    // The lift's writer computed before the bounce below was visible, and writes after ingestion did.
    const liftWriterLate = await computeNow('race@example.com');
    const bounceAt = second((await liftedAt('race@example.com')) + 1);
    await signals('race@example.com', ['spam_report', bounceAt]);
    await liftWriterLate();
    expect(await suppressionOf('race@example.com')).toMatchObject({
      reason: SuppressionReason.SUPPRESSION_REASON_SPAM_REPORT,
      suppressedAt: new Date(bounceAt),
    });
    expect(await stateOf('race@example.com')).toEqual({ reason: 'spam_report', version: '3' });
  });

  it('a lift racing ingestion: a late write of the state before the lift does not undo it', async () => {
    await signals('race-lift@example.com', ['hard_bounce', day(1)]);
    // Ingestion (say a replayed batch) computed before the lift was visible, and writes after the lift's writer did.
    const ingestionLate = await computeNow('race-lift@example.com');
    await analytics.rpc('liftSuppression', { workspaceId: W, email: 'race-lift@example.com' });
    await ingestionLate();
    expect(await suppressionOf('race-lift@example.com')).toBeUndefined();
    expect(await stateOf('race-lift@example.com')).toEqual({ reason: 'none', version: '2' });
  });

  it('soft bounces arriving out of order, in separate batches, suppress once three fall within 30 days', async () => {
    await signals('late-soft@example.com', ['soft_bounce', day(45)], ['soft_bounce', day(0)]);
    await signals('late-soft@example.com', ['soft_bounce', day(20)]);
    expect(await suppressionOf('late-soft@example.com')).toBeUndefined();
    await signals('late-soft@example.com', ['soft_bounce', day(30)]);
    expect(await suppressionOf('late-soft@example.com')).toMatchObject({
      reason: SuppressionReason.SUPPRESSION_REASON_SOFT_BOUNCES,
      suppressedAt: new Date(day(30)),
    });
  });

  it('after a lift, a bounce in the lift second does not count and a later one suppresses', async () => {
    await signals('relapse@example.com', ['unsubscribe', day(1)]);
    await analytics.rpc('liftSuppression', { workspaceId: W, email: 'relapse@example.com' });
    const lifted = await liftedAt('relapse@example.com');
    await signals('relapse@example.com', ['hard_bounce', second(lifted)]);
    expect(await suppressionOf('relapse@example.com')).toBeUndefined();
    await signals('relapse@example.com', ['hard_bounce', second(lifted + 1)]);
    expect(await suppressionOf('relapse@example.com')).toMatchObject({
      reason: SuppressionReason.SUPPRESSION_REASON_HARD_BOUNCE,
      suppressedAt: new Date(second(lifted + 1)),
    });
  });
});

describe('suppression_state over signals stored before it existed', () => {
  it('is filled from them when created, reusing a staging table left by a crash', async () => {
    const database = await createTestClickHouse('analytics_suppression_backfill');
    const client = createClickHouse(database.url, database.database);
    const run = (text: string) => client.command({ query: text });
    try {
      await ensureEventSchema(database.url, database.database);
      const workspace = randomUUID();
      await client.insert({
        table: 'suppression_signals',
        format: 'JSONEachRow',
        values: [
          signal({ workspace_id: workspace, email: 'hard@example.com', reason: 'hard_bounce', occurred_at: day(1) }),
          signal({ workspace_id: workspace, email: 'hard@example.com', reason: 'hard_bounce', occurred_at: day(2) }),
          signal({ workspace_id: workspace, email: 'soft@example.com', reason: 'soft_bounce', occurred_at: day(1) }),
        ],
      });
      await run('DROP TABLE suppression_state');
      // A crashed build left a staging table with an older computation in it: one that saw only the later hard bounce.
      await run(new StoreLayout(database.database).createTable(suppressionStateTable('suppression_state_backfill'))[0].text);
      await run(
        `INSERT INTO suppression_state_backfill VALUES ('${workspace}', 'hard@example.com', 'hard_bounce', '${day(2).slice(0, 19).replace('T', ' ')}', 1)`,
      );

      await ensureEventSchema(database.url, database.database);
      const result = await client.query({
        query: 'SELECT email, reason, toUInt32(suppressed_at) AS suppressed_ts, version FROM suppression_state FINAL ORDER BY email',
        format: 'JSONEachRow',
      });
      // soft@ (one soft bounce, never lifted) is not suppressed and has no row.
      expect(await result.json()).toEqual([
        { email: 'hard@example.com', reason: 'hard_bounce', suppressed_ts: Date.parse(day(1)) / 1000, version: '2' },
      ]);
      const tables = await client.query({
        query: "SELECT name FROM system.tables WHERE database = currentDatabase() AND name LIKE 'suppression_state%'",
        format: 'JSONEachRow',
      });
      expect(await tables.json()).toEqual([{ name: 'suppression_state' }]);
    } finally {
      await client.close();
      await database.drop();
    }
  });

  it('is built once when every replica starts at the same moment on a fresh database', async () => {
    // As ingestion and analytics do under `npm run up`: a build whose staging table the winner renamed away must end quietly.
    for (let round = 0; round < 5; round++) {
      const database = await createTestClickHouse('analytics_suppression_race');
      const client = createClickHouse(database.url, database.database);
      try {
        // Staggered a few milliseconds apart, so that some builds are under way when the first renames its table.
        await Promise.all(Array.from({ length: 6 }, (_, i) => sleep(i * 7).then(() => ensureEventSchema(database.url, database.database))));
        const tables = await client.query({
          query: "SELECT name FROM system.tables WHERE database = currentDatabase() AND name LIKE 'suppression_state%'",
          format: 'JSONEachRow',
        });
        expect(await tables.json()).toEqual([{ name: 'suppression_state' }]);
      } finally {
        await client.close();
        await database.drop();
      }
    }
  });
});
