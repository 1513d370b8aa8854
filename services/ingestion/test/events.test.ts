import { EVENT_BATCH_SCHEMA } from '@mail/common';
import { eventsV1 } from '@mail/proto';
import { decodeEvent, decodeRecord, eventId, signalReason, storedBounceClass, storedBounceType, storedType } from '../src/domain/events';

const { EventType, BounceType, BounceClass } = eventsV1;

const valid: eventsV1.EngagementEvent = {
  providerEventId: 'sg-1',
  provider: 'sendgrid',
  eventType: EventType.EVENT_TYPE_BOUNCE,
  bounceType: BounceType.BOUNCE_TYPE_SOFT,
  bounceClass: BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE,
  machineOpen: false,
  machineClick: false,
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
    expect(decodeEvent(encode({}))).toEqual({
      event: { ...valid, providerMessageId: undefined, url: undefined, reason: undefined, userAgent: undefined, ip: undefined },
    });
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

describe('decodeRecord', () => {
  const batch = (events: Buffer[]): Buffer => Buffer.from(eventsV1.EngagementEventBatch.encode({ events }).finish());
  const decodedValid = { ...valid, providerMessageId: undefined, url: undefined, reason: undefined, userAgent: undefined, ip: undefined };

  it('decodes the events of a batch record in order, and sets apart each one that is poison with its index and bytes', () => {
    const bad = encode({ providerEventId: '' });
    const [a, b] = [encode({ providerEventId: 'a' }), encode({ providerEventId: 'b' })];
    const { events, poison } = decodeRecord(batch([a, bad, Buffer.from('garbage'), b]), EVENT_BATCH_SCHEMA);
    expect(events).toEqual([
      { event: { ...decodedValid, providerEventId: 'a' }, value: a, eventIndex: 0 },
      { event: { ...decodedValid, providerEventId: 'b' }, value: b, eventIndex: 3 },
    ]);
    expect(poison).toEqual([
      { reason: 'provider_event_id is empty', value: bad, eventIndex: 1 },
      { reason: expect.stringContaining('not an EngagementEvent'), value: Buffer.from('garbage'), eventIndex: 2 },
    ]);
  });

  it('reads a record without the schema header as one EngagementEvent (records written before batching)', () => {
    expect(decodeRecord(encode({}), undefined)).toEqual({ events: [{ event: decodedValid, value: encode({}) }], poison: [] });
    expect(decodeRecord(Buffer.from('garbage'), undefined)).toEqual({
      events: [],
      poison: [{ reason: expect.stringContaining('not an EngagementEvent'), value: Buffer.from('garbage') }],
    });
  });

  it.each<[string, Buffer | null, string | undefined, string]>([
    ['an unknown schema', encode({}), 'events.v9.Other', 'unknown record schema "events.v9.Other"'],
    ['an empty batch record', null, EVENT_BATCH_SCHEMA, 'empty record'],
    ['a batch that does not decode', Buffer.from([0x0a, 0xff]), EVENT_BATCH_SCHEMA, 'not an EngagementEventBatch'],
  ])('calls %s poison as a whole', (_case, value, schema, reason) => {
    const { events, poison } = decodeRecord(value, schema);
    expect(events).toEqual([]);
    expect(poison).toEqual([{ reason: expect.stringContaining(reason), value: value ?? Buffer.alloc(0) }]);
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

  // Stored ids must never change: these are RFC 4122 version-5 UUIDs (Python's uuid.uuid5 gives the same).
  it.each([
    ['sendgrid', 'sg-1', '44f46392-75a3-58f3-9ac7-15c65ebdda39'],
    ['sendgrid', 'ünïcode-🎉', '9fd10a40-82ed-55dc-91a3-0f85af66afa7'],
    ['other', 'x', '2f86022f-28be-5f46-8b55-ac292008ded1'],
  ])('derives the id of %s %s as before', (provider, providerEventId, id) => {
    expect(eventId({ ...valid, provider, providerEventId })).toBe(id);
  });

  it.each([
    [EventType.EVENT_TYPE_OPEN, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'open', 'none', undefined],
    [EventType.EVENT_TYPE_CLICK, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'click', 'none', undefined],
    [EventType.EVENT_TYPE_BOUNCE, BounceType.BOUNCE_TYPE_HARD, 'bounce', 'hard', 'hard_bounce'],
    [EventType.EVENT_TYPE_BOUNCE, BounceType.BOUNCE_TYPE_SOFT, 'bounce', 'soft', 'soft_bounce'],
    [EventType.EVENT_TYPE_UNSUBSCRIBE, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'unsubscribe', 'none', 'unsubscribe'],
    [EventType.EVENT_TYPE_SPAM_REPORT, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'spamreport', 'none', 'spam_report'],
    [EventType.EVENT_TYPE_PROCESSED, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'processed', 'none', undefined],
    [EventType.EVENT_TYPE_DELIVERED, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'delivered', 'none', undefined],
    [EventType.EVENT_TYPE_DEFERRED, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'deferred', 'none', undefined],
    [EventType.EVENT_TYPE_DROPPED, BounceType.BOUNCE_TYPE_UNSPECIFIED, 'dropped', 'none', undefined],
  ])('type %s / bounce %s is stored as %s (%s) with signal %s', (eventType, bounceType, type, bounce, signal) => {
    const event = { ...valid, eventType, bounceType };
    expect(storedType(event)).toBe(type);
    expect(storedBounceType(event)).toBe(bounce);
    expect(storedBounceClass(event)).toBe(eventType === EventType.EVENT_TYPE_BOUNCE ? 'mailbox_unavailable' : 'none');
    expect(signalReason(event)).toBe(signal);
  });

  it.each([
    [BounceClass.BOUNCE_CLASS_INVALID_ADDRESS, 'invalid_address', 'soft_bounce'],
    [BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE, 'mailbox_unavailable', 'soft_bounce'],
    [BounceClass.BOUNCE_CLASS_UNCLASSIFIED, 'unclassified', 'soft_bounce'],
    [BounceClass.BOUNCE_CLASS_UNSPECIFIED, 'unclassified', 'soft_bounce'],
    [BounceClass.BOUNCE_CLASS_TECHNICAL, 'technical', undefined],
    [BounceClass.BOUNCE_CLASS_CONTENT, 'content', undefined],
    [BounceClass.BOUNCE_CLASS_REPUTATION, 'reputation', undefined],
    [BounceClass.BOUNCE_CLASS_FREQUENCY_OR_VOLUME, 'frequency_or_volume', undefined],
  ])('a soft bounce of class %s is stored as %s and signals %s; a hard one always signals', (bounceClass, stored, signal) => {
    const soft = { ...valid, bounceType: BounceType.BOUNCE_TYPE_SOFT, bounceClass };
    expect(storedBounceClass(soft)).toBe(stored);
    expect(signalReason(soft)).toBe(signal);
    expect(signalReason({ ...soft, bounceType: BounceType.BOUNCE_TYPE_HARD })).toBe('hard_bounce');
  });
});
