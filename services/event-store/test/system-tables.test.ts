import { chsql, clickHouseErrorCode, createClickHouse, readSystemTables } from '@mail/event-store';
import { createTestClickHouse } from '@mail/local';

// ClickHouse 18.16 fails a read of system.tables with UNKNOWN_TABLE when a table it lists is dropped while it reads;
// processes that set up one store at once (replicas starting together) meet that.
const { sql, str } = chsql;

test('readSystemTables reads system.tables while other requests create and drop tables in the database', async () => {
  const database = await createTestClickHouse('event_store_system_tables');
  const client = createClickHouse(database.url, database.database);
  let churning = true;
  // The churn's own statements meet the same race now and then; only the reads are under test.
  const churn = async (table: string) => {
    while (churning) {
      await client.command({ query: `CREATE TABLE IF NOT EXISTS ${table} (x UInt8) ENGINE = MergeTree ORDER BY x` }).catch(() => undefined);
      await client.command({ query: `DROP TABLE IF EXISTS ${table}` }).catch(() => undefined);
    }
  };
  const churners = ['t0', 't1', 't2', 't3'].map(churn);
  try {
    let reads = 0;
    for (; reads < 1_000; reads += 1) {
      await readSystemTables(client, sql`SELECT name FROM system.tables WHERE database = ${str(database.database)}`);
    }
    expect(reads).toBe(1_000);
  } finally {
    churning = false;
    await Promise.all(churners);
    await client.close();
    await database.drop();
  }
}, 240_000);

test("clickHouseErrorCode reads the code of ClickHouse 18.16's messages, and of the client's parsed errors", () => {
  const old = new Error("Code: 60, e.displayText() = DB::Exception: Table mail.t doesn't exist., e.what() = DB::Exception");
  expect(clickHouseErrorCode(old)).toBe('60');
  expect(clickHouseErrorCode(Object.assign(new Error('Table mail.t does not exist'), { code: '60' }))).toBe('60');
  expect(clickHouseErrorCode(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }))).toBeUndefined();
  expect(clickHouseErrorCode(new Error('socket hang up'))).toBeUndefined();
});
