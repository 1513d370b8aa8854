import { enum8 } from './sql';

/**
 * The stored event: its types and bounce classes, the row of the events
 * table, and the ClickHouse enums of those columns. Shared by the tables
 * (schema.ts), the rollups and the v1 migration, and by the services that
 * write and read events.
 */

/** What a marketer reads as engagement: the event list shows these unless asked for another type. */
export const ENGAGEMENT_EVENT_TYPES = ['open', 'click', 'bounce', 'unsubscribe'] as const;
export type EngagementEventType = (typeof ENGAGEMENT_EVENT_TYPES)[number];
/**
 * The other stored types: what the provider reports of a message's way to the inbox, spam reports, and
 * `sent` (our own sender handed the message over; added after the others, see WIDENED_ENUMS in schema.ts).
 */
export const DELIVERY_EVENT_TYPES = ['processed', 'delivered', 'deferred', 'dropped', 'spamreport', 'sent'] as const;
/** Every type the events table stores, in the order of its Enum8 values (1-10). */
export const EVENT_TYPES = [...ENGAGEMENT_EVENT_TYPES, ...DELIVERY_EVENT_TYPES] as const;
export type StoredEventType = (typeof EVENT_TYPES)[number];
export const BOUNCE_TYPES = ['none', 'hard', 'soft'] as const;
export type StoredBounceType = (typeof BOUNCE_TYPES)[number];
/** Why a bounce happened, as the provider classifies it. */
export const BOUNCE_CLASSES = [
  'invalid_address',
  'mailbox_unavailable',
  'technical',
  'content',
  'reputation',
  'frequency_or_volume',
  'unclassified',
] as const;
export type BounceClass = (typeof BOUNCE_CLASSES)[number];
/** The bounce_class column: 'none' on every event but a bounce. */
export type StoredBounceClass = 'none' | BounceClass;
/**
 * Soft bounces of these classes say nothing about the address (the sender's
 * reputation, the content, a technical fault, the volume): they do not count
 * towards the soft-bounce suppression.
 */
export const SENDER_SIDE_BOUNCE_CLASSES: readonly StoredBounceClass[] = ['technical', 'content', 'reputation', 'frequency_or_volume'];
/** variant_id of an event attributed to no variant (the API shows null). */
export const NO_VARIANT = '00000000-0000-0000-0000-000000000000';

/**
 * A row of the events table, every column: the old ClickHouse fills an
 * omitted column with its type's zero value, not its DEFAULT. `Time` is how
 * the DateTime columns travel: unix seconds, or 'YYYY-MM-DD hh:mm:ss' (UTC).
 */
export interface EventRow<Time extends number | string = number> {
  id: string;
  workspace_id: string;
  campaign_id: string;
  /** NO_VARIANT when the event names no variant of its campaign. */
  variant_id: string;
  event_type: StoredEventType;
  bounce_type: StoredBounceType;
  bounce_class: StoredBounceClass;
  /** 1 on an open or a click flagged as made by a machine (a privacy proxy, a security scanner). */
  machine_open: number;
  email: string;
  occurred_at: Time;
  received_at: Time;
  url: string | null;
  reason: string | null;
  user_agent: string | null;
  ip: string | null;
  provider: string;
  provider_event_id: string;
  provider_message_id: string | null;
  raw: string;
  ingested_at: Time;
  /** NO_RUN when the event names no run. */
  run_id: string;
}
export const SIGNAL_REASONS = ['hard_bounce', 'soft_bounce', 'unsubscribe', 'spam_report'] as const;
export type SignalReason = (typeof SIGNAL_REASONS)[number];

export const EVENT_TYPE_ENUM = enum8(EVENT_TYPES, 1);
export const BOUNCE_TYPE_ENUM = enum8(BOUNCE_TYPES, 0);
export const BOUNCE_CLASS_ENUM = enum8(['none', ...BOUNCE_CLASSES], 0);
