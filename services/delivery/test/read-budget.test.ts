import { ReadBudget, stuckReads } from '../src/store/recipient-source';

/**
 * The time limit of a run's read (RECIPIENTS_QUERY_TIMEOUT_MS), on jest's fake
 * clock: one budget for every fetch of the run, the database's cancel at the
 * limit, and a read that outlives its cancel counted as stuck (delivery's
 * `recipient-loads` readiness check) until its connection is dropped.
 */

const limits = { timeoutMs: 1_000, rowMaxBytes: 65_536, maxRows: 100 };
const TIME_LIMIT = /RECIPIENTS_QUERY_TIMEOUT_MS/;

/** A read that ends only when told to. */
function pendingRead(): { read: () => Promise<string>; finish: (value: string) => void } {
  let finish: (value: string) => void = () => undefined;
  const settled = new Promise<string>((resolve) => (finish = resolve));
  return { read: () => settled, finish: (value) => finish(value) };
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

test('a read within the limit answers; the next read has only what is left of the budget', async () => {
  const cancel = jest.fn();
  const budget = new ReadBudget(limits, cancel, jest.fn());
  const first = pendingRead();
  const firstRead = budget.spend(first.read);
  await jest.advanceTimersByTimeAsync(600);
  first.finish('rows');
  await expect(firstRead).resolves.toBe('rows');

  const second = pendingRead();
  const secondRead = budget.spend(second.read).catch((error: Error) => error);
  await jest.advanceTimersByTimeAsync(399);
  expect(cancel).not.toHaveBeenCalled();
  await jest.advanceTimersByTimeAsync(1);
  expect(cancel).toHaveBeenCalledTimes(1);
  second.finish('too late');
  expect(await secondRead).toMatchObject({ message: expect.stringMatching(TIME_LIMIT) });
  await expect(budget.spend(() => Promise.resolve('never asked'))).rejects.toThrow(TIME_LIMIT);
});

test('a read that outlives its cancel is stuck, and so shown, until its connection is dropped', async () => {
  const { read, finish } = pendingRead();
  const cancel = jest.fn();
  // The database ignored the cancel; dropping the connection ends the read.
  const drop = jest.fn(() => finish('dropped'));
  const outcome = new ReadBudget(limits, cancel, drop).spend(read).catch((error: Error) => error);

  await jest.advanceTimersByTimeAsync(999);
  expect(stuckReads()).toBe(0);
  await jest.advanceTimersByTimeAsync(1);
  expect(cancel).toHaveBeenCalledTimes(1);
  expect(stuckReads()).toBe(1);

  await jest.advanceTimersByTimeAsync(4_999);
  expect(drop).not.toHaveBeenCalled();
  expect(stuckReads()).toBe(1);
  await jest.advanceTimersByTimeAsync(1);
  expect(drop).toHaveBeenCalledTimes(1);
  expect(await outcome).toMatchObject({ message: expect.stringMatching(TIME_LIMIT) });
  expect(stuckReads()).toBe(0);
});
