import type { Knex } from 'knex';
import { createLogger } from '@mail/common';
import type { RunPlan } from '../src/domain/plan';
import { HandOverLedger } from '../src/sending/hand-over-ledger';
import { insertRun } from '../src/store/runs';
import { SendingStore, type HandOverAnswer, type HandOverStart } from '../src/store/sending';
import { openSendingDatabase } from './harness';

/**
 * The hand-over ledger's commits (sending/hand-over-ledger.ts), on the
 * delivery schema of a private database: what is asked in one turn of the
 * event loop goes in one commit, so that a message costs its connection one
 * commit, not one for its start and another for its answer, and a commit
 * waits for the answers of the messages on their connections, so that the
 * connections share one commit a wave.
 */

/** The real store, telling what each of its ledger commits carried; a commit goes to Postgres once `gate` opens. */
class RecordingStore extends SendingStore {
  readonly commits: { answers: number; starts: number }[] = [];
  gate: Promise<void> = Promise.resolve();

  override async recordHandOvers(workerId: string, settled: HandOverAnswer[], starting: HandOverStart[]): Promise<Set<string>> {
    this.commits.push({ answers: settled.length, starts: starting.length });
    await this.gate;
    return super.recordHandOvers(workerId, settled, starting);
  }
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const WORKER = 'worker-1';
const logger = createLogger('hand-over-ledger-test', 'silent');

let db: Knex;
let close: (() => Promise<void>) | undefined;

beforeAll(async () => {
  ({ db, close } = await openSendingDatabase('delivery_hand_over_ledger'));
}, 60_000);

afterAll(() => close?.());

const plan: RunPlan = {
  fromEmail: 'news@sender.example.com',
  fromName: 'News',
  replyTo: null,
  providerCategoryId: null,
  sendPriority: 100,
  source: { kind: 'accounts', ids: [] },
  variants: null,
  templates: { single: { subject: 'S', html: null, text: 'T' } },
};

/** A sending run whose `count` recipients this worker claimed. */
async function claimedRun(count: number): Promise<{ runId: string; emails: string[] }> {
  const run = await insertRun(db, {
    workspaceId: crypto.randomUUID(),
    campaignId: crypto.randomUUID(),
    trigger: 'manual',
    scheduledFor: null,
    plan,
    sendPriority: 100,
  });
  await db.raw(`UPDATE delivery.runs SET status = 'sending' WHERE id = ?`, [run!.id]);
  const emails = Array.from({ length: count }, (_, n) => `user${n}@example.com`);
  await db.raw(
    `INSERT INTO delivery.run_recipients (run_id, email, status, worker_id, fields) SELECT ?, email, 'claimed', ?, '{}' FROM unnest(?::text[]) AS email`,
    [run!.id, WORKER, emails],
  );
  return { runId: run!.id, emails };
}

async function statuses(runId: string): Promise<Record<string, string>> {
  const { rows } = await db.raw<{ rows: { email: string; status: string }[] }>(
    'SELECT email, status FROM delivery.run_recipients WHERE run_id = ? ORDER BY email',
    [runId],
  );
  return Object.fromEntries(rows.map((row) => [row.email, row.status]));
}

const start = (runId: string, email: string): HandOverStart => ({ runId, email, messageId: `${email}.message` });
const sent = (runId: string, email: string): HandOverAnswer => ({
  runId,
  email,
  status: 'sent',
  error: null,
  retryInMs: null,
  bounceCode: null,
});

test('the starts of every connection asked in one turn share one commit', async () => {
  const store = new RecordingStore(db);
  const ledger = new HandOverLedger(store, WORKER, logger);
  const { runId, emails } = await claimedRun(5);

  const mayGo = await Promise.all(emails.map((email) => ledger.start(start(runId, email))));

  expect(mayGo).toEqual([true, true, true, true, true]);
  expect(store.commits).toEqual([{ answers: 0, starts: 5 }]);
  expect(Object.values(await statuses(runId))).toEqual(Array(5).fill('sending'));
});

test("an answer and its connection's next start go in one commit, the answer first", async () => {
  const store = new RecordingStore(db);
  const ledger = new HandOverLedger(store, WORKER, logger);
  const { runId, emails } = await claimedRun(2);
  expect(await ledger.start(start(runId, emails[0]))).toBe(true);

  const answered = ledger.settle(sent(runId, emails[0]));
  const next = ledger.start(start(runId, emails[1]));
  await Promise.all([answered, next]);

  expect(store.commits).toEqual([
    { answers: 0, starts: 1 },
    { answers: 1, starts: 1 },
  ]);
  expect(await statuses(runId)).toEqual({ [emails[0]]: 'sent', [emails[1]]: 'sending' });
});

test('what is asked during a commit waits for the next one, which takes all of it', async () => {
  const store = new RecordingStore(db);
  const ledger = new HandOverLedger(store, WORKER, logger);
  const { runId, emails } = await claimedRun(4);

  let open = (): void => undefined;
  store.gate = new Promise((resolve) => (open = resolve));

  const first = ledger.start(start(runId, emails[0]));
  await nextTurn();
  const later = [ledger.start(start(runId, emails[1])), ledger.start(start(runId, emails[2]))];
  await nextTurn();
  later.push(ledger.start(start(runId, emails[3])));
  await nextTurn();
  expect(store.commits).toEqual([{ answers: 0, starts: 1 }]);
  open();

  expect(await Promise.all([first, ...later])).toEqual([true, true, true, true]);
  expect(store.commits).toEqual([
    { answers: 0, starts: 1 },
    { answers: 0, starts: 3 },
  ]);
});

test('a recipient this worker no longer holds, or of a run no longer sending, may not go', async () => {
  const ledger = new HandOverLedger(new SendingStore(db), WORKER, logger);
  const taken = await claimedRun(1);
  await db.raw(`UPDATE delivery.run_recipients SET worker_id = 'worker-2' WHERE run_id = ?`, [taken.runId]);
  const paused = await claimedRun(1);
  await db.raw(`UPDATE delivery.runs SET status = 'paused' WHERE id = ?`, [paused.runId]);

  expect(await ledger.start(start(taken.runId, taken.emails[0]))).toBe(false);
  expect(await ledger.start(start(paused.runId, paused.emails[0]))).toBe(false);
  expect(await statuses(paused.runId)).toEqual({ [paused.emails[0]]: 'claimed' });
});

test('while messages are on their connections, a commit waits for their answers: one commit a wave', async () => {
  const store = new RecordingStore(db);
  // A wait no busy host outlasts: the commit can only come from the last answer.
  const ledger = new HandOverLedger(store, WORKER, logger, 600_000);
  const { runId, emails } = await claimedRun(4);
  expect(await Promise.all([ledger.start(start(runId, emails[0])), ledger.start(start(runId, emails[1]))])).toEqual([true, true]);

  const first = [ledger.settle(sent(runId, emails[0])), ledger.start(start(runId, emails[2]))];
  await nextTurn();
  await nextTurn();
  expect(store.commits).toEqual([{ answers: 0, starts: 2 }]);
  const second = [ledger.settle(sent(runId, emails[1])), ledger.start(start(runId, emails[3]))];
  await Promise.all([...first, ...second]);

  expect(store.commits).toEqual([
    { answers: 0, starts: 2 },
    { answers: 2, starts: 2 },
  ]);
  expect(await statuses(runId)).toEqual({
    [emails[0]]: 'sent',
    [emails[1]]: 'sent',
    [emails[2]]: 'sending',
    [emails[3]]: 'sending',
  });
});

test('a message whose answer does not come holds the others back only briefly', async () => {
  const store = new RecordingStore(db);
  const ledger = new HandOverLedger(store, WORKER, logger);
  const { runId, emails } = await claimedRun(3);
  expect(await Promise.all([ledger.start(start(runId, emails[0])), ledger.start(start(runId, emails[1]))])).toEqual([true, true]);

  await Promise.all([ledger.settle(sent(runId, emails[0])), ledger.start(start(runId, emails[2]))]);

  expect(store.commits).toEqual([
    { answers: 0, starts: 2 },
    { answers: 1, starts: 1 },
  ]);
  expect(await statuses(runId)).toEqual({ [emails[0]]: 'sent', [emails[1]]: 'sending', [emails[2]]: 'sending' });
});
