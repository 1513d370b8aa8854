import type { Knex } from 'knex';
import type { RunPlan } from '../src/domain/plan';
import { openDatabase } from '../src/store/database';
import { insertRun } from '../src/store/runs';
import { SendingStore } from '../src/store/sending';
import { openSendingDatabase } from './harness';

/**
 * Which run a sender serves next (SendingStore.readyRuns) and which run a
 * loader loads next (claimLoad): workspaces take turns, send_priority orders
 * runs within a workspace only. A source that cannot be reached waits with
 * backoff (deferLoad). And the shared rate limit (SendingStore.takeTokens). On
 * the delivery schema of a private database.
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

/** A run of `workspaceId` (queued, nothing loaded). */
async function queuedRun(workspaceId: string, priority: number): Promise<string> {
  const run = await insertRun(db, {
    workspaceId,
    campaignId: crypto.randomUUID(),
    trigger: 'manual',
    scheduledFor: null,
    plan: plan(priority),
    sendPriority: priority,
  });
  return run!.id;
}

/** A sending run of `workspaceId` with `count` ready recipients. */
async function sendingRun(workspaceId: string, priority: number, count = 3): Promise<string> {
  const id = await queuedRun(workspaceId, priority);
  await db.raw(`UPDATE delivery.runs SET status = 'sending', loaded = true WHERE id = ?`, [id]);
  await db.raw(
    `INSERT INTO delivery.run_recipients (run_id, email, status, fields)
     SELECT ?, 'user' || n || '@example.com', 'pending', '{}' FROM generate_series(1, ?) AS n`,
    [id, count],
  );
  return id;
}

async function settleAll(): Promise<void> {
  await db.raw(`UPDATE delivery.run_recipients SET status = 'sent' WHERE status IN ('pending', 'claimed')`);
  await db.raw(`UPDATE delivery.runs SET status = 'completed', loaded = true WHERE status IN ('queued', 'sending', 'paused')`);
}

afterEach(settleAll);

test('within a workspace the higher send_priority goes first, and runs of one priority take turns', async () => {
  const workspace = crypto.randomUUID();
  const low = await sendingRun(workspace, 10);
  const first = await sendingRun(workspace, 500);
  const second = await sendingRun(workspace, 500);
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

test("workspaces take turns: one workspace's send_priority does not hold back another's runs", async () => {
  const loud = crypto.randomUUID();
  const quiet = crypto.randomUUID();
  const urgent = await sendingRun(loud, 1000, 100);
  const ordinary = await sendingRun(quiet, 0);
  expect((await store.readyRuns())[0].id).toBe(urgent);
  expect(await store.claim(urgent, 'worker-1', 10)).toHaveLength(10);
  // The loud workspace just had its turn: the quiet one is next, whatever the priorities.
  expect((await store.readyRuns()).map((run) => run.id)).toEqual([ordinary, urgent]);
  expect(await store.claim(ordinary, 'worker-1', 1)).toHaveLength(1);
  expect((await store.readyRuns()).map((run) => run.id)).toEqual([urgent, ordinary]);
});

test('a workspace loads one run at a time, and workspaces take turns loading', async () => {
  await store.heartbeat('loader-1');
  await store.heartbeat('loader-2');
  const busy = crypto.randomUUID();
  const other = crypto.randomUUID();
  const busyFirst = await queuedRun(busy, 0);
  const busyUrgent = await queuedRun(busy, 900);
  const otherRun = await queuedRun(other, 0);

  // Within the workspace, priority; then the workspace loading already waits, and the other goes.
  expect((await store.claimLoad('loader-1', 60_000))?.id).toBe(busyUrgent);
  expect((await store.claimLoad('loader-2', 60_000))?.id).toBe(otherRun);
  expect(await store.claimLoad('loader-2', 60_000)).toBeUndefined();

  // Once its load is done, the workspace's next run may load.
  await store.finishLoad(busyUrgent, 'loader-1');
  expect((await store.claimLoad('loader-1', 60_000))?.id).toBe(busyFirst);
});

test('a source that cannot be reached waits with backoff, and the run gives up after the time limit', async () => {
  await store.heartbeat('loader-1');
  const run = await queuedRun(crypto.randomUUID(), 0);
  expect((await store.claimLoad('loader-1', 60_000))?.id).toBe(run);
  expect(await store.deferLoad(run, 'loader-1', 60_000)).toBe(false);
  expect(await store.runsWaitingForSource()).toBe(1);
  // Waiting out its backoff, no loader takes it.
  await db.raw(`UPDATE delivery.runs SET load_retry_at = now() + interval '1 hour' WHERE id = ?`, [run]);
  expect(await store.claimLoad('loader-1', 60_000)).toBeUndefined();
  await db.raw(`UPDATE delivery.runs SET load_retry_at = '-infinity', source_failing_since = now() - interval '2 minutes' WHERE id = ?`, [
    run,
  ]);
  expect((await store.claimLoad('loader-1', 60_000))?.id).toBe(run);
  expect(await store.deferLoad(run, 'loader-1', 60_000)).toBe(true);
  // A batch stored ends the wait.
  expect((await db.raw(`SELECT load_attempts FROM delivery.runs WHERE id = ?`, [run])).rows[0].load_attempts).toBe(2);
  await db.raw(`UPDATE delivery.runs SET load_retry_at = '-infinity' WHERE id = ?`, [run]);
  expect((await store.claimLoad('loader-1', 60_000))?.id).toBe(run);
  expect(await store.addRecipients(run, 'loader-1', [], 0)).toBe(true);
  expect(await store.runsWaitingForSource()).toBe(0);
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
