import type { Request } from 'express';
import { valueError, type Violation } from '@mail/common';
import { eventsV1 } from '@mail/proto';
import { unprocessable } from '../errors/http-error';
import { readableJsonText } from '../pydantic/json-body';
import { isRecord } from '../pydantic/request-schemas';
import { jsonSyntaxViolations } from '../pydantic/violations';
import { MAX_TIMESTAMP } from './events';

/** Where a normalized event came from in the body: the 422 about an event too large for Kafka points there. */
export interface EventSource {
  loc: (string | number)[];
  input: unknown;
}

/** What a provider made of an authentic, well-formed request. */
export type Reception =
  | {
      kind: 'events';
      /** Provider events the body held, kept or not (the 202's `accepted`). */
      accepted: number;
      /** The kept ones, normalized. */
      events: eventsV1.EngagementEvent[];
      sourceOf(eventIndex: number): EventSource;
      /** Told whether Kafka took the events (a replay guard releases what a provider may send again). */
      settled?: (published: boolean) => void;
    }
  /** A request that carries no events (an SNS subscription message): answered as it is. */
  | { kind: 'answer'; status: number; body: unknown };

/**
 * One provider's webhook: how its requests are verified and its events
 * normalized. The route around it (gateway/src/webhook/router.ts) is shared.
 */
export interface WebhookProvider {
  name: string;
  /** Where it answers (its declaration's paths). */
  paths: string[];
  /** Whether its credential is configured, so that requests are verified. */
  verifies: boolean;
  /** Headers of a 401 (the Basic challenge where Basic is configured). */
  challenge: Record<string, string>;
  /** Checked before the body is read, so an unauthenticated caller cannot make us buffer 5 MB: why the request fails, if it does. */
  headerFailure?(req: Request): string | undefined;
  /** Verifies and normalizes; throws an HttpError (401, 422, 503) for a request it refuses. */
  receive(req: Request, raw: Buffer, receivedAt: Date): Promise<Reception>;
}

export type Loc = (string | number)[];
export type JsonObject = Record<string, unknown>;

/** The body as JSON, or FastAPI's 422 (400 for bytes that are not UTF-8 or nesting too deep); an empty body is a missing one. */
export function parseJsonBody(raw: Buffer): unknown {
  const text = readableJsonText(raw);
  if (raw.length === 0) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw unprocessable(jsonSyntaxViolations(text));
  }
}

/** The body as one JSON object (a Pydantic model), or the 422 a model would give. */
export function bodyObject(body: unknown): JsonObject {
  if (body === null) throw unprocessable([{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]);
  if (!isRecord(body)) {
    throw unprocessable([
      {
        type: 'model_attributes_type',
        loc: ['body'],
        msg: 'Input should be a valid dictionary or object to extract fields from',
        input: body,
      },
    ]);
  }
  return body;
}

/**
 * Reads required fields the way a Pydantic model reports them, gathering
 * every violation; `check()` throws the 422 once all fields are read.
 */
export class FieldReader {
  private readonly violations: Violation[] = [];

  object(container: JsonObject, key: string, loc: Loc): JsonObject | undefined {
    const value = this.present(container, key, loc);
    if (value === undefined || isRecord(value)) return value;
    return this.fail('model_attributes_type', [...loc, key], 'Input should be a valid dictionary or object to extract fields from', value);
  }

  /** A list of at most `maxItems`, empty when it is not one (or longer: Pydantic reports that list alone, none of its items). */
  list(container: JsonObject, key: string, loc: Loc, maxItems = Infinity): unknown[] {
    const value = this.present(container, key, loc);
    if (value === undefined) return [];
    if (!Array.isArray(value)) {
      this.fail('list_type', [...loc, key], 'Input should be a valid list', value);
      return [];
    }
    if (value.length <= maxItems) return value;
    this.fail('too_long', [...loc, key], `List should have at most ${maxItems} items after validation, not ${value.length}`, value, {
      field_type: 'List',
      max_length: maxItems,
      actual_length: value.length,
    });
    return [];
  }

  /** The non-empty strings of a list (of at most `maxItems`); each other item is a violation. */
  texts(container: JsonObject, key: string, loc: Loc, maxItems = Infinity): string[] {
    return this.list(container, key, loc, maxItems).flatMap((item, i) => {
      if (typeof item === 'string' && item !== '') return [item];
      this.fail('string_type', [...loc, key, i], 'Input should be a valid string', item);
      return [];
    });
  }

  /** The objects of a list (of at most `maxItems`), each with its place; each other item is a violation. */
  objects(container: JsonObject, key: string, loc: Loc, maxItems = Infinity): { object: JsonObject; loc: Loc }[] {
    return this.list(container, key, loc, maxItems).flatMap((item, i) => {
      if (isRecord(item)) return [{ object: item, loc: [...loc, key, i] }];
      this.fail('model_attributes_type', [...loc, key, i], 'Input should be a valid dictionary or object to extract fields from', item);
      return [];
    });
  }

  /** An integer that a double holds exactly. */
  integer(container: JsonObject, key: string, loc: Loc): number | undefined {
    const value = this.present(container, key, loc);
    if (value === undefined) return undefined;
    if (typeof value === 'number' && Number.isSafeInteger(value)) return value;
    return this.fail('int_type', [...loc, key], 'Input should be a valid integer', value);
  }

  /** A string; at least one character unless `minLength` is 0. */
  text(container: JsonObject, key: string, loc: Loc, minLength = 1): string | undefined {
    const value = this.present(container, key, loc);
    if (value === undefined) return undefined;
    if (typeof value !== 'string') return this.fail('string_type', [...loc, key], 'Input should be a valid string', value);
    if (value.length < minLength) {
      return this.fail('string_too_short', [...loc, key], `String should have at least ${minLength} character`, value, {
        min_length: minLength,
      });
    }
    return value;
  }

  /** Unix seconds (a number, fractions allowed) within what the event store takes. */
  unixSeconds(container: JsonObject, key: string, loc: Loc): Date | undefined {
    const value = this.present(container, key, loc);
    if (value === undefined) return undefined;
    if (typeof value !== 'number') return this.fail('float_type', [...loc, key], 'Input should be a valid number', value);
    return this.inRange(new Date(Math.round(value * 1000)), [...loc, key], value);
  }

  /** An ISO 8601 date-time with its offset. */
  dateTime(container: JsonObject, key: string, loc: Loc): Date | undefined {
    const value = this.text(container, key, loc);
    if (value === undefined) return undefined;
    const date = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)$/i.test(value) ? new Date(value) : undefined;
    if (!date || Number.isNaN(date.getTime())) {
      this.violations.push(valueError([...loc, key], value, 'expected an ISO 8601 date-time with its offset'));
      return undefined;
    }
    return this.inRange(date, [...loc, key], value);
  }

  /** Throws the 422 when any field failed. */
  check(): void {
    if (this.violations.length > 0) throw unprocessable(this.violations);
  }

  private present(container: JsonObject, key: string, loc: Loc): unknown {
    if (Object.hasOwn(container, key) && container[key] !== undefined) return container[key];
    this.violations.push({ type: 'missing', loc: [...loc, key], msg: 'Field required', input: container });
    return undefined;
  }

  private inRange(date: Date, loc: Loc, input: unknown): Date | undefined {
    const seconds = date.getTime() / 1000;
    if (seconds >= 0 && seconds <= MAX_TIMESTAMP) return date;
    this.violations.push(valueError(loc, input, 'the time must be between 1970-01-01T00:00:00Z and 2106-02-05T23:59:59Z'));
    return undefined;
  }

  private fail(type: string, loc: Loc, msg: string, input: unknown, ctx?: Record<string, unknown>): undefined {
    this.violations.push(ctx ? { type, loc, msg, input, ctx } : { type, loc, msg, input });
    return undefined;
  }
}

/** A non-empty string, or undefined for anything else (optional fields are read only when they have their type). */
export const optionalText = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

export const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : typeof value === 'string' ? [value] : [];

/** The fields a provider fills; the rest take their neutral values. */
export type EventFields = Pick<
  eventsV1.EngagementEvent,
  'provider' | 'providerEventId' | 'eventType' | 'email' | 'occurredAt' | 'receivedAt'
> &
  Partial<eventsV1.EngagementEvent> & { raw: unknown };

/** The normalized event: the address trimmed and lower-cased, the provider's object kept as JSON. */
export function normalizedEvent({ raw, ...fields }: EventFields): eventsV1.EngagementEvent {
  return eventsV1.EngagementEvent.fromPartial({
    ...fields,
    email: fields.email.trim().toLowerCase(),
    rawJson: JSON.stringify(raw),
  });
}
