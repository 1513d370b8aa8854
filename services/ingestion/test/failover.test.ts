import crypto from 'node:crypto';
import net from 'node:net';
import { createClickHouse, chsql } from '@mail/event-store';
import { createTestEventDatabase, type TestEventDatabase } from '@mail/local';
import { storeEvents } from '../src/pipeline/runner';
import { EventWriter } from '../src/store/events';
import { SuppressionStateStore } from '../src/store/suppressions';
import { engagementEvent, sourced } from './harness';

// CLICKHOUSE_URL lists two servers and the first dies while it answers an events insert it has stored: the failover
// client moves to the second server but lets the insert fail, so the batch's retry owes its days a mark (the views'
// rows may be missing), and finds the events stored rather than storing them twice.
jest.setTimeout(60_000);
const { sql, uuid } = chsql;

let database: TestEventDatabase;
/** Forwards to the real server; the first events insert is forwarded whole, then its connection reset before the answer. */
let dying: net.Server;
let dyingUrl: string;
let resets = 0;

beforeAll(async () => {
  database = await createTestEventDatabase('ingestion_failover');
  const target = new URL(database.url);
  dying = net.createServer((client) => {
    const server = net.connect(Number(target.port), target.hostname);
    let resetOnAnswer = false;
    client.on('data', (chunk) => {
      if (resets === 0 && /^POST \S*query=INSERT(%20|\+)INTO(%20|\+)events(%20|\+|&)/.test(chunk.toString('latin1', 0, 512))) {
        resetOnAnswer = true;
      }
      server.write(chunk);
    });
    server.on('data', (chunk) => {
      if (resetOnAnswer) {
        resets += 1;
        client.resetAndDestroy();
        server.destroy();
      } else {
        client.write(chunk);
      }
    });
    client.on('error', () => server.destroy());
    server.on('error', () => client.destroy());
    client.on('close', () => server.destroy());
    server.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => dying.listen(0, '127.0.0.1', resolve));
  dyingUrl = `http://127.0.0.1:${(dying.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => dying?.close(resolve));
  await database?.close();
});

it('owes the days of an insert a dying server stored a mark, and stores its events once on the next server', async () => {
  const clickhouse = createClickHouse([dyingUrl, database.url], database.database);
  const workspaceId = crypto.randomUUID();
  const campaignId = crypto.randomUUID();
  const deps = {
    resolve: (ids: Iterable<string>) =>
      Promise.resolve(new Map([...ids].map((id) => [id, { providerCategoryId: id, campaignId, workspaceId, variantIds: [] }]))),
    writer: new EventWriter(clickhouse),
    suppressions: new SuppressionStateStore(clickhouse),
  };
  const events = ['2026-10-01T10:00:00Z', '2026-10-02T10:00:00Z'].map((time, i) =>
    engagementEvent({ providerEventId: `failover-${workspaceId}-${i}`, categories: ['cat'], occurredAt: new Date(time) }),
  );
  try {
    const failed = await storeEvents(sourced(events), deps);
    expect(resets).toBe(1);
    expect(failed).toMatchObject({
      kind: 'retry',
      unsettledDays: [
        { workspaceId, day: '2026-10-01' },
        { workspaceId, day: '2026-10-02' },
      ],
    });
    const retried = await storeEvents(sourced(events), deps);
    expect(retried).toMatchObject({ kind: 'ok', value: { inserted: 0, duplicates: 2 } });
    const [stored] = await database.rows<{ n: string }>(
      sql`SELECT count() AS n FROM events WHERE workspace_id = ${uuid(workspaceId)}`.text,
    );
    expect(Number(stored.n)).toBe(2);
  } finally {
    await clickhouse.close();
  }
});
