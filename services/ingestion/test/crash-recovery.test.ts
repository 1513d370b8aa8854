import fs from 'node:fs';
import { uniqueSuffix } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import { engagementEvent, sleep, startIngestion, type Ingestion } from './harness';

/** Stopped in the middle of a stream, killed or politely: the restarted process stores every event exactly once. */
jest.setTimeout(180_000);

let ingestion: Ingestion;

beforeAll(async () => {
  ingestion = await startIngestion({ label: 'crash' });
});

afterAll(async () => {
  await ingestion?.close();
});

it('loses nothing and duplicates nothing when the consumer is killed mid-stream', async () => {
  const p = `crash-${uniqueSuffix()}`;
  const category = `cat-${p}`;
  const campaign = await ingestion.createCampaign(category);
  const total = 20_000;
  const perBatch = 500;
  const count = `SELECT count() AS n FROM events WHERE campaign_id = toUUID('${campaign.id}')`;

  const producing = (async () => {
    for (let start = 0; start < total; start += perBatch) {
      await ingestion.produce(
        Array.from({ length: perBatch }, (_, i) =>
          engagementEvent({
            providerEventId: `${p}-${start + i}`,
            email: `r${(start + i) % 997}@example.com`,
            eventType: (start + i) % 4 === 0 ? eventsV1.EventType.EVENT_TYPE_CLICK : eventsV1.EventType.EVENT_TYPE_OPEN,
            categories: [category],
          }),
        ),
      );
      await sleep(20);
    }
  })();

  // Kill once some, but not all, events are stored: batches are in flight.
  for (let stored = 0; stored < 2_000; stored = await ingestion.count(count)) await sleep(20);
  await ingestion.stack.kill('ingestion', 'SIGKILL');
  const storedAtKill = await ingestion.count(count);
  expect(storedAtKill).toBeLessThan(total);
  await sleep(500);
  await ingestion.stack.restart('ingestion');
  await producing;

  await ingestion.waitForCount(count, total, 90_000);
  await ingestion.waitUntilCaughtUp();
  expect(await ingestion.count(count)).toBe(total);
  expect(await ingestion.count(`SELECT count() AS n FROM events FINAL WHERE campaign_id = toUUID('${campaign.id}')`)).toBe(total);
  const perId = await ingestion.rows<{ copies: string; ids: string }>(
    `SELECT copies, count() AS ids FROM (SELECT provider_event_id, count() AS copies FROM events
       WHERE campaign_id = toUUID('${campaign.id}') GROUP BY provider_event_id) GROUP BY copies`,
  );
  expect(perId).toEqual([{ copies: '1', ids: String(total) }]);
});

it('finishes and commits the batch in progress on SIGTERM, then exits', async () => {
  const p = `term-${uniqueSuffix()}`;
  const category = `cat-${p}`;
  const campaign = await ingestion.createCampaign(category);
  const count = `SELECT count() AS n FROM events WHERE campaign_id = toUUID('${campaign.id}')`;
  const total = 5_000;
  for (let start = 0; start < total; start += 1_000) {
    await ingestion.produce(
      Array.from({ length: 1_000 }, (_, i) =>
        engagementEvent({ providerEventId: `${p}-${start + i}`, email: `r${i % 101}@example.com`, categories: [category] }),
      ),
    );
  }
  for (let stored = 0; stored === 0; stored = await ingestion.count(count)) await sleep(10);

  const pid = ingestion.stack.pid('ingestion')!;
  const stopping = Date.now();
  await ingestion.stack.stop('ingestion');
  expect(Date.now() - stopping).toBeLessThan(10_000);
  expect(() => process.kill(pid, 0)).toThrow();
  const log = fs.readFileSync(ingestion.stack.logFile('ingestion'), 'utf8');
  expect(log).toContain('"msg":"stopped"');
  expect(log).not.toContain('shutdown step failed');

  await ingestion.stack.restart('ingestion');
  await ingestion.waitForCount(count, total, 60_000);
  await ingestion.waitUntilCaughtUp();
  expect(await ingestion.count(`SELECT uniqExact(provider_event_id) AS n FROM events WHERE campaign_id = toUUID('${campaign.id}')`)).toBe(
    total,
  );
  expect(await ingestion.count(count)).toBe(total);
});
