import crypto from 'node:crypto';
import { NO_VARIANT } from '@mail/event-store';
import { eventsV1 } from '@mail/proto';
import { toRows, variantOf } from '../src/domain/rows';
import type { CategoryMatch } from '../src/grpc/categories';
import { engagementEvent } from './harness';

const { EventType, BounceType, BounceClass } = eventsV1;

const variantA = crypto.randomUUID();
const variantB = crypto.randomUUID();
const match: CategoryMatch = {
  providerCategoryId: 'cat',
  campaignId: crypto.randomUUID(),
  workspaceId: crypto.randomUUID(),
  variantIds: [variantA, variantB],
};

describe('variantOf', () => {
  it.each([
    ['one of the campaign’s variants', variantA, variantA],
    ['one in upper case', variantB.toUpperCase(), variantB],
    ['an unknown id', crypto.randomUUID(), NO_VARIANT],
    ['a malformed id', 'variant-a', NO_VARIANT],
    ['an empty id', '', NO_VARIANT],
    ['no id', undefined, NO_VARIANT],
  ])('attributes %s', (_, variantId, expected) => {
    expect(variantOf(engagementEvent({ providerEventId: 'e', variantId }), match)).toBe(expected);
  });

  it('attributes nothing for a campaign without variants', () => {
    expect(variantOf(engagementEvent({ providerEventId: 'e', variantId: variantA }), { ...match, variantIds: [] })).toBe(NO_VARIANT);
  });
});

describe('toRows', () => {
  it('stores a delivery event with its reason and no signal', () => {
    const delivered = engagementEvent({
      providerEventId: 'delivered',
      eventType: EventType.EVENT_TYPE_DELIVERED,
      reason: '250 OK',
      variantId: variantA,
    });
    const rows = toRows(delivered, match, 1);
    expect(rows.signal).toBeUndefined();
    expect(rows.event).toMatchObject({
      event_type: 'delivered',
      variant_id: variantA,
      bounce_type: 'none',
      bounce_class: 'none',
      machine_open: 0,
      reason: '250 OK',
    });
  });

  it('stores a spam report and signals it', () => {
    const rows = toRows(engagementEvent({ providerEventId: 'spam', eventType: EventType.EVENT_TYPE_SPAM_REPORT }), match, 1);
    expect(rows.event).toMatchObject({ event_type: 'spamreport' });
    expect(rows.signal).toMatchObject({ reason: 'spam_report' });
  });

  it('marks a machine open', () => {
    expect(toRows(engagementEvent({ providerEventId: 'm', machineOpen: true }), match, 1).event).toMatchObject({ machine_open: 1 });
  });

  it('stores a sender-side soft bounce with its class, without a signal', () => {
    const bounce = engagementEvent({
      providerEventId: 'b',
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_SOFT,
      bounceClass: BounceClass.BOUNCE_CLASS_REPUTATION,
    });
    const rows = toRows(bounce, match, 1);
    expect(rows.event).toMatchObject({ event_type: 'bounce', bounce_type: 'soft', bounce_class: 'reputation' });
    expect(rows.signal).toBeUndefined();
  });

  it('keeps an unmatched delivery event under its stored type name', () => {
    const rows = toRows(engagementEvent({ providerEventId: 'u', eventType: EventType.EVENT_TYPE_DEFERRED }), undefined, 1);
    expect(rows).toEqual({ unmatched: expect.objectContaining({ event_type: 'deferred' }) });
  });
});
