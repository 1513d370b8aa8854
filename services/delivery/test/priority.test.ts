import type { Knex } from 'knex';
import { createTestPostgres, type TestPostgres } from '@mail/local';
import type { RunPlan } from '../src/domain/plan';
import { openDatabase } from '../src/store/database';
import { insertRun } from '../src/store/runs';
import { SendingStore } from '../src/store/sending';

/**
 * Which run a sender serves next (SendingStore.readyRuns): the higher
 * send_priority first; runs of one priority take turns. On the delivery
 * schema of a private database.
 */

let postgres: TestPostgres;
let db: Knex;
let store: SendingStore;

beforeAll(async () => {
  postgres = await createTestPostgres('delivery_priority');
  db = await openDatabase(postgres.url);
  store = new SendingStore(db);
}, 60_000);

afterAll(async () => {
  await db?.destroy();
  await postgres?.drop();
});

const plan = (sendPriority: number): RunPlan => ({
  fromEmail: 'news@sender.example.com',
  fromName: null,
  replyTo: null,
  providerCategoryId: null,
  sendPriority,
  source: { kind: 'accounts', ids: ['acc-1'] },
  variants: null,
  templates: { single: { subject: 'S', html: null, text: 'T' } },
});

/** A sending run with `count` ready recipients. */
async function sendingRun(priority: number, count = 3): Promise<string> {
  const run = await insertRun(db, {
    workspaceId: crypto.randomUUID(),
    campaignId: crypto.randomUUID(),
    trigger: 'manual',
    scheduledFor: null,
    plan: plan(priority),
    sendPriority: priority,
  });
  await db.raw(`UPDATE delivery.runs SET status = 'sending' WHERE id = ?`, [run!.id]);
  await db.raw(
    `INSERT INTO delivery.run_recipients (run_id, email, status, fields)
     SELECT ?, 'user' || n || '@example.com', 'pending', '{}' FROM generate_series(1, ?) AS n`,
    [run!.id, count],
  );
  return run!.id;
}

test('the higher send_priority goes first; runs of one priority take turns', async () => {
  const low = await sendingRun(10);
  const first = await sendingRun(500);
  const second = await sendingRun(500);
  expect((await store.readyRuns()).map((run) => run.id)).toEqual([first, second, low]);

  // A claim of the first puts it behind the other run of its priority, never behind a lower one.
  expect(await store.claim(first, 'worker-1', 1)).toHaveLength(1);
  expect((await store.readyRuns()).map((run) => run.id)).toEqual([second, first, low]);
  expect(await store.claim(second, 'worker-1', 1)).toHaveLength(1);
  expect((await store.readyRuns()).map((run) => run.id)).toEqual([first, second, low]);

  // Without ready recipients a run is not offered.
  await store.claim(first, 'worker-1', 10);
  await store.claim(second, 'worker-1', 10);
  expect((await store.readyRuns()).map((run) => run.id)).toEqual([low]);
});
