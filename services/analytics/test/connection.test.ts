import { chsql, createClickHouse } from '@mail/event-store';
import { infraEnv, uniqueSuffix } from '@mail/local';
import { openEventStore } from '../src/store/connection';
import { READ_LIMITS } from './harness';

const { sql, str } = chsql;

it('creates the database and the shared tables when ingestion never ran', async () => {
  const database = `test_analytics_fresh_${uniqueSuffix()}`;
  const events = await openEventStore({ urls: [infraEnv().clickhouseUrl], database }, READ_LIMITS);
  try {
    await events.ping();
    const tables = await events.call(database, (store) =>
      store.rows<{ name: string }>(sql`SELECT name FROM system.tables WHERE database = ${str(database)} ORDER BY name`),
    );
    expect(tables.map((table) => table.name)).toEqual([
      'closed_workspaces',
      'event_rollup_daily',
      'event_rollup_daily_feed',
      'event_store_migrations',
      'events',
      'events_by_address',
      'events_by_address_feed',
      'link_rollup_daily',
      'link_rollup_daily_feed',
      'rematched_events',
      'suppression_lift_audit',
      'suppression_lifts',
      'suppression_manual',
      'suppression_signals',
      'suppression_state',
      'unmatched_events',
      'unsettled_days',
    ]);
  } finally {
    await events.close();
    const admin = createClickHouse(infraEnv().clickhouseUrl, 'default');
    await admin.command({ query: sql`DROP DATABASE IF EXISTS ${chsql.identifier(database)}`.text });
    await admin.close();
  }
});

it('fails to open with a connection error when ClickHouse does not answer', async () => {
  // The text isDependencyFailure() recognizes, so the process exits and calls answer UNAVAILABLE. (Its
  // instanceof check cannot be asserted here: Node's socket errors come from outside jest's sandbox.)
  await expect(openEventStore({ urls: ['http://127.0.0.1:1'], database: 'mail' }, READ_LIMITS)).rejects.toMatchObject({
    message: expect.stringMatching(/connect ECONNREFUSED/),
  });
});
