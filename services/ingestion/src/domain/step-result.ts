import type { WorkspaceDay } from '../store/unsettled';
import type { PoisonRecord } from './records';

/** Go on with `value`. */
export interface Ok<T> {
  kind: 'ok';
  value: T;
}

/** The event needs no storing: it came twice in the batch, or is stored already. */
export interface Drop {
  kind: 'drop';
  reason: 'repeated in the batch' | 'stored already';
}

/** Never storable: it goes to the dead-letter topic alone rather than holding its partition up. */
export interface DeadLetter {
  kind: 'dead-letter';
  poison: PoisonRecord;
}

/**
 * A dependency failed: the whole batch is attempted again. `unsettledDays`
 * are the days whose rollups the failure may have left short or doubled;
 * they are marked before anything else is tried.
 */
export interface Retry {
  kind: 'retry';
  error: unknown;
  unsettledDays: WorkspaceDay[];
}

/** What a step made of one event (ok, drop, dead-letter) or of the whole batch (ok, retry). */
export type StepResult<T> = Ok<T> | Drop | DeadLetter | Retry;
/** A step on one event: it cannot fail, only sort the event out. */
export type EventResult<T> = Exclude<StepResult<T>, Retry>;
/** A step on the whole batch: its I/O succeeded, or the batch is retried. */
export type BatchResult<T> = Extract<StepResult<T>, Ok<T> | Retry>;

export const ok = <T>(value: T): Ok<T> => ({ kind: 'ok', value });
export const drop = (reason: Drop['reason']): Drop => ({ kind: 'drop', reason });
export const deadLetter = (poison: PoisonRecord): DeadLetter => ({ kind: 'dead-letter', poison });
export const retry = (error: unknown, unsettledDays: WorkspaceDay[] = []): Retry => ({ kind: 'retry', error, unsettledDays });

/** The values of the events a step let through. */
export function okValues<T>(results: readonly EventResult<T>[]): T[] {
  const values: T[] = [];
  for (const result of results) if (result.kind === 'ok') values.push(result.value);
  return values;
}

/** The poison of the events a step dead-lettered. */
export function deadLettered<T>(results: readonly EventResult<T>[]): PoisonRecord[] {
  const poison: PoisonRecord[] = [];
  for (const result of results) if (result.kind === 'dead-letter') poison.push(result.poison);
  return poison;
}

/** How many events a step dropped. */
export function dropped<T>(results: readonly EventResult<T>[]): number {
  let count = 0;
  for (const result of results) if (result.kind === 'drop') count += 1;
  return count;
}
