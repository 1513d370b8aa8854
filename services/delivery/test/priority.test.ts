import type { Knex } from 'knex';
import type { RunPlan } from '../src/domain/plan';
import { openDatabase } from '../src/store/database';
import { insertRun } from '../src/store/runs';
import { SendingStore } from '../src/store/sending';
import { openSendingDatabase } from './harness';

/**
 * Which run a sender serves next (SendingStore.readyRuns): the higher
 * send_priority first; runs of one priority take turns. And the shared rate
 * limit (SendingStore.takeTokens). On the delivery schema of a private database.
 */

let url: string;
let db: Knex;
let store: SendingStore;
let close: (() => Promise<void>) | undefined;

beforeAll(async () => {
  ({ url, db, store, close } = await openSendingDatabase('delivery_priority'));
}, 60_000);

afterAll(() => close?.());

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

test('the rate limit holds across replicas: all takers together never get more than the rate allows', async () => {
  // Two stores on two pools stand for two replicas taking from one transport's bucket.
  const other = await openDatabase(url);
  try {
    const replicas = [store, new SendingStore(other)];
    const rate = 5;
    const started = Date.now();
    let granted = 0;
    for (let turn = 0; Date.now() - started < 1_500; turn += 1) {
      granted += await replicas[turn % 2].takeTokens('smtp:test', rate, 3);
    }
    const seconds = (Date.now() - started) / 1000;
    // A full bucket (one second's worth) at the start, then the rate.
    expect(granted).toBeLessThanOrEqual(rate + Math.ceil(rate * seconds));
    expect(granted).toBeGreaterThanOrEqual(rate);
  } finally {
    await other.destroy();
  }
});
