import { status } from '@grpc/grpc-js';

export interface CloseRaceOutcome<T> {
  /** What `close` answered. */
  closed: T;
  /** How many creates succeeded. */
  created: number;
  /** Creates that failed other than with NOT_FOUND (a refusal by the closed workspace): should be none. */
  unexpected: string[];
}

/**
 * Races `count` creates, started 2 ms apart, against closing their
 * workspace `closeAfterMs` after the first: the test of a service's
 * CloseWorkspace that nothing a create wrote outlives the closing.
 */
export async function raceCreatesWithClose<T>(
  count: number,
  closeAfterMs: number,
  create: () => Promise<unknown>,
  close: () => Promise<T>,
): Promise<CloseRaceOutcome<T>> {
  const outcomes = Array.from({ length: count }, (_, i) =>
    new Promise((resolve) => setTimeout(resolve, i * 2)).then(() =>
      create().then(
        () => 'created',
        (error: Error & { code?: number }) => (error.code === status.NOT_FOUND ? 'refused' : `error ${String(error)}`),
      ),
    ),
  );
  await new Promise((resolve) => setTimeout(resolve, closeAfterMs));
  const closed = await close();
  const answers = await Promise.all(outcomes);
  return {
    closed,
    created: answers.filter((answer) => answer === 'created').length,
    unexpected: answers.filter((answer) => answer !== 'created' && answer !== 'refused'),
  };
}
