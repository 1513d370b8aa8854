import type { Knex } from 'knex';
import { eventually } from '@mail/local';
import { SINGLE_TEMPLATE } from '../src/domain/plan';
import { insertRun } from '../src/store/runs';
import type { SendingStore, SentRecipient } from '../src/store/sending';
import { openSendingDatabase } from './harness';

/**
 * The outbox of the sent events (SendingStore.publishSent): a cursor over the
 * transactions that recorded recipients `sent`, on a private database of a
 * real Postgres. Each recipient is published once, none is passed over.
 */

let db: Knex;
let store: SendingStore;
let close: (() => Promise<void>) | undefined;

beforeAll(async () => {
  ({ db, store, close } = await openSendingDatabase('delivery_sent_outbox'));
}, 60_000);

afterAll(() => close?.());

async function sendingRun(): Promise<string> {
  const run = await insertRun(db, {
    workspaceId: crypto.randomUUID(),
    campaignId: crypto.randomUUID(),
    trigger: 'manual',
    scheduledFor: null,
    plan: {
      fromEmail: 'news@example.com',
      fromName: null,
      replyTo: null,
      providerCategoryId: null,
      sendPriority: 1,
      source: { kind: 'accounts', ids: [] },
      variants: null,
      templates: { [SINGLE_TEMPLATE]: { subject: 'S', html: null, text: 'T' } },
    },
    sendPriority: 1,
  });
  await db.raw(`UPDATE delivery.runs SET status = 'sending' WHERE id = ?`, [run!.id]);
  return run!.id;
}

/** Records `emails` sent in one transaction of `on` (the database, or an open transaction of it), as the ledger does. */
async function recordSent(on: Knex | Knex.Transaction, runId: string, emails: string[]): Promise<void> {
  await on.raw(
    `INSERT INTO delivery.run_recipients (run_id, email, status, fields, message_id, sent_at, sent_xid)
     SELECT ?, email, 'sent', '{}', 'message-' || email, now(), pg_current_xact_id() FROM unnest(?::text[]) AS email`,
    [runId, emails],
  );
}

/** Runs outbox passes until one publishes nothing; resolves to the addresses of `runId` published, in order. */
async function drain(runId: string): Promise<string[]> {
  const published: SentRecipient[] = [];
  while ((await store.publishSent(2, (sent) => Promise.resolve(void published.push(...sent)))) > 0);
  return published.filter((sent) => sent.runId === runId).map((sent) => sent.email);
}

test('a pass takes whole transactions, in the order they recorded, and each recipient once', async () => {
  const runId = await sendingRun();
  await recordSent(db, runId, ['a1@example.com', 'a2@example.com', 'a3@example.com']);
  await recordSent(db, runId, ['b1@example.com']);
  const passes: string[][] = [];
  const publish = (sent: SentRecipient[]) => Promise.resolve(void passes.push(sent.map((item) => item.email).sort()));
  // Another test's transaction on the same server may hold the horizon back a moment.
  await eventually(async () => {
    while ((await store.publishSent(2, publish)) > 0);
    expect(passes).toEqual([['a1@example.com', 'a2@example.com', 'a3@example.com'], ['b1@example.com']]);
  }, 10_000);
});

test('a transaction still running holds back those that ended after it began; none is passed over once it ends', async () => {
  const runId = await sendingRun();
  const older = await db.transaction();
  try {
    await recordSent(older, runId, ['older@example.com']);
    await recordSent(db, runId, ['newer@example.com']);
    expect(await drain(runId)).toEqual([]);
    await older.commit();
  } finally {
    if (!older.isCompleted()) await older.rollback();
  }
  // Another test's transaction on the same server may hold the horizon back a moment.
  const published: string[] = [];
  await eventually(async () => {
    published.push(...(await drain(runId)));
    expect(published.sort()).toEqual(['newer@example.com', 'older@example.com']);
  }, 10_000);
});

test('a pass whose publish fails moves nothing: the next pass publishes the same recipients', async () => {
  const runId = await sendingRun();
  await recordSent(db, runId, ['kafka-down@example.com']);
  await eventually(
    () => expect(store.publishSent(10, () => Promise.reject(new Error('Kafka is down')))).rejects.toThrow('Kafka is down'),
    10_000,
  );
  expect(await drain(runId)).toEqual(['kafka-down@example.com']);
});

test('one replica passes at a time: a second pass meanwhile publishes nothing', async () => {
  const runId = await sendingRun();
  await recordSent(db, runId, ['once@example.com']);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const taken: string[] = [];
  // Passes until one takes the recipient: a pass may find it behind another test's transaction still running.
  const passes: Promise<number>[] = [];
  await eventually(async () => {
    passes.push(
      store.publishSent(10, async (sent) => {
        taken.push(...sent.map((item) => item.email));
        await held;
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(taken).toEqual(['once@example.com']);
  }, 10_000);
  expect(await store.publishSent(10, () => Promise.reject(new Error('a second pass published')))).toBe(0);
  release();
  expect((await Promise.all(passes)).reduce((sum, n) => sum + n, 0)).toBe(1);
  expect(await drain(runId)).toEqual([]);
});
