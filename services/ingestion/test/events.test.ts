import { eventsV1 } from '@mail/proto';
import { decodeEvent, eventId, signalReason, storedBounceType, storedType } from '../src/domain/events';

const { EventType, BounceType } = eventsV1;

const valid: eventsV1.EngagementEvent = {
  providerEventId: 'sg-1',
  provider: 'sendgrid',
  eventType: EventType.EVENT_TYPE_BOUNCE,
  bounceType: BounceType.BOUNCE_TYPE_SOFT,
  email: 'a@example.com',
  occurredAt: new Date('2026-01-02T03:04:05Z'),
  receivedAt: new Date('2026-01-02T03:04:06Z'),
  categories: ['cat'],
  rawJson: '{}',
};
const encode = (event: Partial<eventsV1.EngagementEvent>): Buffer =>
  Buffer.from(eventsV1.EngagementEvent.encode({ ...valid, ...event }).finish());

describe('decodeEvent', () => {
  it('decodes a valid record', () => {
    expect(decodeEvent(encode({}))).toEqual({ event: { ...valid, providerMessageId: undefined, url: undefined, reason: undefined, userAgent: undefined, ip: undefined } });
  });

  it.each<[string, Buffer | null, string]>([
    ['a tombstone', null, 'empty record'],
    ['garbage', Buffer.from('garbage'), 'not an EngagementEvent'],
    ['no provider_event_id', encode({ providerEventId: '' }), 'provider_event_id is empty'],
    ['no provider', encode({ provider: '' }), 'provider is empty'],
    ['no email', encode({ email: '' }), 'email is empty'],
    ['an unspecified type', encode({ eventType: EventType.EVENT_TYPE_UNSPECIFIED }), 'unknown event_type 0'],
    ['a type from the future', encode({ eventType: 42 as eventsV1.EventType }), 'unknown event_type 42'],
    ['a bounce without bounce type', encode({ bounceType: BounceType.BOUNCE_TYPE_UNSPECIFIED }), 'bounce without bounce_type'],
    ['no occurred_at', encode({ occurredAt: undefined }), 'occurred_at is missing or out of range'],
    ['occurred_at before 1970', encode({ occurredAt: new Date(-1000) }), 'occurred_at is missing or out of range'],
    ['no received_at', encode({ receivedAt: undefined }), 'received_at is missing or out of range'],
  ])('calls %s poison', (_case, value, reason) => {
    const decoded = decodeEvent(value);
    expect('poison' in decoded && decoded.poison).toContain(reason);
  });
});

describe('mapping', () => {
  it('derives a stable version-5 UUID from provider and provider event id', () => {
    const id = eventId(valid);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(eventId({ ...valid, email: 'other@example.com', rawJson: '{"x":1}' })).toBe(id);
    expect(eventId({ ...valid, providerEventId: 'sg-2' })).not.toBe(id);
    expect(eventId({ ...valid, provider: 'other' })).not.toBe(id);
  });

  it.each([
    [EventType.EVENT_TYPE_OPEN, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'open', 'none', undefined],
    [EventType.EVENT_TYPE_CLICK, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'click', 'none', undefined],
    [EventType.EVENT_TYPE_BOUNCE, BounceType.BOUNCE_TYPE_HARD, 'bounce', 'hard', 'hard_bounce'],
    [EventType.EVENT_TYPE_BOUNCE, BounceType.BOUNCE_TYPE_SOFT, 'bounce', 'soft', 'soft_bounce'],
    [EventType.EVENT_TYPE_UNSUBSCRIBE, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'unsubscribe', 'none', 'unsubscribe'],
    [EventType.EVENT_TYPE_SPAM_REPORT, BounceType.BOUNCE_TYPE_UNSPECIFIED, undefined, 'none', 'spam_report'],
  ])('type %s / bounce %s is stored as %s (%s) with signal %s', (eventType, bounceType, type, bounce, signal) => {
    const event = { ...valid, eventType, bounceType };
    expect(storedType(event)).toBe(type);
    expect(storedBounceType(event)).toBe(bounce);
    expect(signalReason(event)).toBe(signal);
  });
});
