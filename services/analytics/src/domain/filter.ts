import { InvalidArgumentError, type Violation } from '@mail/common';
import { ENGAGEMENT_EVENT_TYPES, PROTO_EVENT_TYPES, storedNames, type StoredEventType } from '@mail/event-store';
import { analyticsV1, eventsV1, type commonV1Paging } from '@mail/proto';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

/** Which events a query reads: always one workspace, optionally narrowed. */
export interface EventFilter {
  workspaceId: string;
  /** The types read; every stored type when absent. */
  eventTypes?: readonly StoredEventType[];
  /** Inclusive. */
  from?: Date;
  /** Exclusive. */
  before?: Date;
  campaignId?: string;
  /** Lowercased, as the pipeline stores addresses. */
  email?: string;
  /** NO_VARIANT: the events attributed to no variant. */
  variantId?: string;
  /** NO_RUN: the events attributed to no run. */
  runId?: string;
}

export interface PageWindow {
  page: number;
  pageSize: number;
  offset: number;
}

export type Interval = 'hour' | 'day';

const STORED_EVENT_TYPES = storedNames(PROTO_EVENT_TYPES);

/** As Pydantic lists an enum's values: "'a', 'b' or 'c'". */
const QUOTED_TYPES = [...STORED_EVENT_TYPES.values()].map((type) => `'${type}'`);
const EXPECTED_TYPES = `${QUOTED_TYPES.slice(0, -1).join(', ')} or ${QUOTED_TYPES[QUOTED_TYPES.length - 1]}`;

/** Addresses are compared the way the pipeline stores them. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

function uuidViolation(loc: string, input: string): Violation {
  return { loc: [loc], type: 'uuid_parsing', msg: 'Input should be a valid UUID', input };
}

/** Throws every violation at once, Pydantic style. */
function throwIfAny(violations: Violation[]): void {
  if (violations.length > 0) throw new InvalidArgumentError(violations);
}

export function validWorkspaceId(workspaceId: string): string {
  throwIfAny(UUID.test(workspaceId) ? [] : [uuidViolation('workspace_id', workspaceId)]);
  return workspaceId.toLowerCase();
}

export function validRunId(runId: string): string {
  throwIfAny(UUID.test(runId) ? [] : [uuidViolation('run_id', runId)]);
  return runId.toLowerCase();
}

export function validFilter(filter: analyticsV1.EventFilter | undefined): EventFilter {
  const violations: Violation[] = [];
  const workspaceId = filter?.workspaceId ?? '';
  if (!UUID.test(workspaceId)) violations.push(uuidViolation('workspace_id', workspaceId));
  if (filter?.campaignId !== undefined && !UUID.test(filter.campaignId)) {
    violations.push(uuidViolation('campaign_id', filter.campaignId));
  }
  if (filter?.variantId !== undefined && !UUID.test(filter.variantId)) {
    violations.push(uuidViolation('variant_id', filter.variantId));
  }
  if (filter?.runId !== undefined && !UUID.test(filter.runId)) {
    violations.push(uuidViolation('run_id', filter.runId));
  }
  let eventType: StoredEventType | undefined;
  if (filter?.eventType !== undefined && filter.eventType !== eventsV1.EventType.EVENT_TYPE_UNSPECIFIED) {
    eventType = STORED_EVENT_TYPES.get(filter.eventType);
    if (!eventType) {
      violations.push({
        loc: ['event_type'],
        type: 'enum',
        msg: `Input should be ${EXPECTED_TYPES}`,
        input: eventsV1.EventType[filter.eventType] ?? filter.eventType,
        ctx: { expected: EXPECTED_TYPES },
      });
    }
  }
  throwIfAny(violations);
  return {
    workspaceId: workspaceId.toLowerCase(),
    eventTypes: eventType && [eventType],
    from: filter?.occurredFrom,
    before: filter?.occurredBefore,
    campaignId: filter?.campaignId?.toLowerCase(),
    email: filter?.email === undefined ? undefined : normalizeEmail(filter.email),
    variantId: filter?.variantId?.toLowerCase(),
    runId: filter?.runId?.toLowerCase(),
  };
}

/** The list shows the engagement types unless a type is asked for. */
export function listedTypes(filter: EventFilter): EventFilter {
  return { ...filter, eventTypes: filter.eventTypes ?? ENGAGEMENT_EVENT_TYPES };
}

/** proto3 zeros mean "not given": page 1, 50 per page. */
export function pageWindow(request: commonV1Paging.PageRequest | undefined): PageWindow {
  const page = request?.page || 1;
  const pageSize = request?.pageSize || DEFAULT_PAGE_SIZE;
  throwIfAny(
    pageSize > MAX_PAGE_SIZE
      ? [
          {
            loc: ['page_size'],
            type: 'less_than_equal',
            msg: `Input should be less than or equal to ${MAX_PAGE_SIZE}`,
            input: pageSize,
            ctx: { le: MAX_PAGE_SIZE },
          },
        ]
      : [],
  );
  return { page, pageSize, offset: (page - 1) * pageSize };
}

export function validInterval(interval: analyticsV1.Interval): Interval {
  return interval === analyticsV1.Interval.INTERVAL_HOUR ? 'hour' : 'day';
}

/** Runs every validation and throws all their violations together, as Pydantic reports them. */
export function validateAll<T extends unknown[]>(...checks: { [K in keyof T]: () => T[K] }): T {
  const violations: Violation[] = [];
  const results = checks.map((check) => {
    try {
      return check();
    } catch (error) {
      if (!(error instanceof InvalidArgumentError)) throw error;
      violations.push(...error.violations);
      return undefined;
    }
  });
  throwIfAny(violations);
  return results as T;
}
