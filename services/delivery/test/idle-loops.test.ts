import { IdleLoops } from '../src/sending/idle-loops';

/** Which idle loops look for work again on their own (sending/idle-loops.ts), on jest's clock. */

const POLL_MS = 200;

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

/** Starts `count` idle waits in order; `ended` lists the ones that ended, by number. */
function idle(loops: IdleLoops, count: number): { ended: number[] } {
  const ended: number[] = [];
  for (let n = 0; n < count; n += 1) void loops.wait().then(() => ended.push(n));
  return { ended };
}

test('only the first idle loop looks again after the poll interval; the next one takes its turn', async () => {
  const loops = new IdleLoops(POLL_MS);
  const { ended } = idle(loops, 3);

  await jest.advanceTimersByTimeAsync(POLL_MS - 1);
  expect(ended).toEqual([]);
  await jest.advanceTimersByTimeAsync(1);
  expect(ended).toEqual([0]);
  await jest.advanceTimersByTimeAsync(POLL_MS);
  expect(ended).toEqual([0, 1]);
});

test('a loop going idle behind the scout waits to be woken', async () => {
  const loops = new IdleLoops(POLL_MS);
  const { ended } = idle(loops, 2);
  await jest.advanceTimersByTimeAsync(POLL_MS);
  expect(ended).toEqual([0]);

  const later = idle(loops, 1);
  await jest.advanceTimersByTimeAsync(POLL_MS - 1);
  expect(later.ended).toEqual([]);
  await jest.advanceTimersByTimeAsync(1);
  expect(ended).toEqual([0, 1]);
  expect(later.ended).toEqual([]);
});

test('a wake-up ends the scout at once, and the next loop polls from then on', async () => {
  const loops = new IdleLoops(POLL_MS);
  const { ended } = idle(loops, 2);
  await jest.advanceTimersByTimeAsync(POLL_MS / 2);

  loops.wakeOne();
  await Promise.resolve();
  expect(ended).toEqual([0]);
  await jest.advanceTimersByTimeAsync(POLL_MS - 1);
  expect(ended).toEqual([0]);
  await jest.advanceTimersByTimeAsync(1);
  expect(ended).toEqual([0, 1]);
});

test('stopping wakes every loop, and a wake-up with no loop idle is nothing', async () => {
  const loops = new IdleLoops(POLL_MS);
  loops.wakeOne();
  const { ended } = idle(loops, 3);

  loops.wakeAll();
  await Promise.resolve();
  expect(ended).toEqual([0, 1, 2]);
  expect(jest.getTimerCount()).toBe(0);
});
