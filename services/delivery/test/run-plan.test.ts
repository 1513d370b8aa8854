import type { Knex } from 'knex';
import { eventually } from '@mail/local';
import type { RunPlan } from '../src/domain/plan';
import { getRun, insertRun } from '../src/store/runs';
import { SendingStore, type SentRecipient } from '../src/store/sending';
import { openSendingDatabase } from './harness';

/**
 * What is read of a run's plan, and where: the recipient source (a
 * csv_account_ids list can be a megabyte) by the loader alone, never by the
 * senders, which read their runs' plans again for every batch, nor by the run
 * record. On the delivery schema of a private database.
 */

let db: Knex;
let store: SendingStore;
let close: (() => Promise<void>) | undefined;

beforeAll(async () => {
  ({ db, store, close } = await openSendingDatabase('delivery_run_plan'));
}, 60_000);

afterAll(() => close?.());

const LIST_SIZE = 50_000;

const plan: RunPlan = {
  fromEmail: 'news@sender.example.com',
  fromName: 'News',
  replyTo: null,
  providerCategoryId: 'category-7',
  sendPriority: 100,
  source: { kind: 'accounts', ids: Array.from({ length: LIST_SIZE }, (_, n) => `acc-${String(n).padStart(7, '0')}`) },
  variants: [{ id: crypto.randomUUID(), label: 'A', weight: 1 }],
  templates: { single: { subject: 'S', html: null, text: 'T' } },
};

async function sendingRun(): Promise<{ id: string; workspaceId: string; campaignId: string }> {
  const workspaceId = crypto.randomUUID();
  const campaignId = crypto.randomUUID();
  const run = await insertRun(db, { workspaceId, campaignId, trigger: 'manual', scheduledFor: null, plan, sendPriority: 100 });
  await db.raw(`UPDATE delivery.runs SET status = 'sending' WHERE id = ?`, [run!.id]);
  return { id: run!.id, workspaceId, campaignId };
}

test('the loader gets the whole source; a sender gets the plan without it, whatever the list size', async () => {
  const run = await sendingRun();
  const loading = await store.claimLoad('worker-1', 60_000);
  expect(loading?.id).toBe(run.id);
  expect(loading?.plan).toEqual(plan);

  await db.raw(`INSERT INTO delivery.run_recipients (run_id, email, status, fields) VALUES (?, 'a@example.com', 'pending', '{}')`, [
    run.id,
  ]);
  const [ready] = await store.readyRuns();
  const { source, ...sending } = plan;
  expect(source.kind === 'accounts' && source.ids).toHaveLength(LIST_SIZE);
  expect(ready.plan).toEqual(sending);
  expect(JSON.stringify(ready.plan).length).toBeLessThan(1_000);

  const record = await getRun(db, run.workspaceId, run.id);
  expect(record.variants).toEqual([{ ...plan.variants![0], recipients: 0, sent: 0 }]);
});

test('sent events carry the run and its provider category, and each is published once', async () => {
  const run = await sendingRun();
  const sentAt = new Date('2026-11-27T10:00:00.000Z');
  // Each in a transaction of its own, as the ledger records them.
  for (const n of [1, 2, 3]) {
    await db.raw(
      `INSERT INTO delivery.run_recipients (run_id, email, status, fields, message_id, sent_at, sent_xid)
       VALUES (?, ?, 'sent', '{}', ?, ?::timestamptz + make_interval(secs => ?), pg_current_xact_id())`,
      [run.id, `user${n}@example.com`, `message-${n}`, sentAt, n],
    );
  }
  const published: SentRecipient[] = [];
  const publish = (sent: SentRecipient[]): Promise<void> => {
    published.push(...sent);
    return Promise.resolve();
  };
  // Another test's transaction on the same server may hold the outbox's horizon back a moment.
  await eventually(async () => {
    while ((await store.publishSent(2, publish)) > 0);
    expect(published).toHaveLength(3);
  }, 10_000);
  expect(await store.publishSent(2, publish)).toBe(0);
  expect(published).toEqual(
    [1, 2, 3].map((n) => ({
      runId: run.id,
      workspaceId: run.workspaceId,
      campaignId: run.campaignId,
      email: `user${n}@example.com`,
      variantId: null,
      messageId: `message-${n}`,
      sentAt: new Date(sentAt.getTime() + n * 1000),
      providerCategoryId: 'category-7',
    })),
  );
});
