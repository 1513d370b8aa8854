import crypto from 'node:crypto';
import { NO_VARIANT } from '@mail/event-store';
import { eventsV1 } from '@mail/proto';
import { campaignOf, toRows, variantOf } from '../src/domain/rows';
import { fromUnmatched } from '../src/domain/unmatched';
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

describe('campaignOf', () => {
  const matches = new Map([['cat', match]]);
  const named = { workspaceId: crypto.randomUUID(), campaignId: crypto.randomUUID() };

  it('takes the workspace and campaign the event names, lower-cased, with its variant, over its categories', () => {
    const event = engagementEvent({
      providerEventId: 'e',
      categories: ['cat'],
      workspaceId: named.workspaceId.toUpperCase(),
      campaignId: named.campaignId,
      variantId: variantA.toUpperCase(),
    });
    expect(campaignOf(event, matches)).toEqual({ providerCategoryId: '', ...named, variantIds: [variantA] });
    expect(toRows(event, campaignOf(event, matches), 1).event).toMatchObject({
      ...{ workspace_id: named.workspaceId, campaign_id: named.campaignId },
      variant_id: variantA,
    });
  });

  it.each([
    ['only a workspace', { workspaceId: named.workspaceId }],
    ['only a campaign', { campaignId: named.campaignId }],
    ['a workspace that is no UUID', { workspaceId: 'w', campaignId: named.campaignId }],
    ['a campaign that is no UUID', { workspaceId: named.workspaceId, campaignId: '' }],
  ])('falls back to the categories for an event that names %s', (_, ids) => {
    expect(campaignOf(engagementEvent({ providerEventId: 'e', categories: ['cat'], ...ids }), matches)).toBe(match);
  });

  it('attributes no variant when the named variant is no UUID', () => {
    const event = engagementEvent({ providerEventId: 'e', ...named, variantId: 'variant-a' });
    expect(toRows(event, campaignOf(event, matches), 1).event?.variant_id).toBe(NO_VARIANT);
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

  it('keeps an unmatched event of any provider whole: read back, it is the event', () => {
    const event = engagementEvent({
      providerEventId: 'pm-1',
      provider: 'postmark',
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_SOFT,
      bounceClass: BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE,
      categories: ['cat', 'other'],
      variantId: variantA,
      reason: 'mailbox full',
      rawJson: JSON.stringify({ RecordType: 'Bounce', ID: 1 }),
      receivedAt: new Date('2026-11-20T10:00:05Z'),
    });
    const row = toRows(event, undefined, 1).unmatched!;
    expect(row.raw).toBe(event.rawJson);
    // raw_json is stored once, in raw.
    expect(row.encoded_event.length).toBeLessThan(Buffer.from(eventsV1.EngagementEvent.encode(event).finish()).toString('base64').length);
    expect(fromUnmatched({ ...row, occurred_at: 0, received_at: 0 })).toEqual(event);
  });

  it('reads a row stored before unmatched rows kept their event from its SendGrid JSON, and no other', () => {
    const sendgrid = { sg_event_id: 'sg-1', email: 'Reader@Example.com', event: 'open', timestamp: 1_763_719_200, category: 'cat' };
    const row = {
      provider: 'sendgrid',
      provider_event_id: 'sg-1',
      occurred_at: 1_763_719_200,
      received_at: 1_763_719_260,
      raw: JSON.stringify(sendgrid),
      encoded_event: '',
    };
    expect(fromUnmatched(row)).toMatchObject({
      provider: 'sendgrid',
      providerEventId: 'sg-1',
      email: 'reader@example.com',
      categories: ['cat'],
    });
    expect(fromUnmatched({ ...row, provider: 'mailgun' })).toBeUndefined();
    expect(fromUnmatched({ ...row, raw: '{"sg_event_id":"sg-1"}' })).toBeUndefined();
  });

  it('keeps an unmatched delivery event under its stored type name', () => {
    const rows = toRows(engagementEvent({ providerEventId: 'u', eventType: EventType.EVENT_TYPE_DEFERRED }), undefined, 1);
    expect(rows).toEqual({ unmatched: expect.objectContaining({ event_type: 'deferred' }) });
  });
});
