import fc from 'fast-check';
import { SENDGRID_EVENT_TYPES, fromSendgridEvent, type SendgridEventFields } from '@mail/common';
import { chsql } from '@mail/event-store';
import { uniqueSuffix } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import { engagementEvent, startIngestion, type Ingestion } from './harness';

/**
 * Property: whatever SendGrid event the webhook accepts, ingestion stores it
 * (events or unmatched_events) or dead-letters it, and the batch after it is
 * stored too; none is refused by ClickHouse. The events are what the webhook
 * publishes: SendGrid JSON within the webhook's checks (a non-empty
 * sg_event_id, an e-mail with a character besides white space, a kept type,
 * a whole timestamp from 0 to its maximum) normalized by the webhook's
 * fromSendgridEvent, everything else arbitrary JSON.
 */
jest.setTimeout(300_000);

const { str } = chsql;
/** The webhook's largest timestamp (gateway/src/webhook/events.ts, MAX_TIMESTAMP). */
const MAX_TIMESTAMP = chsql.DATE_TIME_SECONDS.max - 1;
const run = uniqueSuffix();
const CATEGORY = `prop-${run}`;

let ingestion: Ingestion;
let workspaceId: string;
const deadLettered = new Set<string>();
let stopReading: () => Promise<void>;

beforeAll(async () => {
  ingestion = await startIngestion({ label: 'arbitrary' });
  ({ workspaceId } = await ingestion.createCampaign(CATEGORY));
  const reader = ingestion.kafka.consumer({ groupId: `dlq-reader-${uniqueSuffix()}`, maxWaitTimeInMs: 100 });
  await reader.connect();
  await reader.subscribe({ topic: ingestion.deadLetterTopic, fromBeginning: true });
  await reader.run({
    eachMessage: ({ message }) => {
      const letter = eventsV1.DeadLetter.decode(message.value!);
      deadLettered.add(eventsV1.EngagementEvent.decode(letter.value).providerEventId);
      return Promise.resolve();
    },
  });
  stopReading = () => reader.disconnect();
});

afterAll(async () => {
  await stopReading?.();
  await ingestion?.close();
});

/** Pieces that end, split or corrupt a field of one format or another, lone UTF-16 surrogates among them. */
const hostile = fc.constantFrom(
  '\t',
  '\n',
  '\r',
  '\0',
  '\\',
  '\\N',
  '\\t',
  "'",
  '"',
  '[',
  ']',
  ',',
  '\u0001',
  '\u007f',
  '\u2028',
  '\ufeff',
  ' ',
);
const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit));
const shortText = fc
  .array(fc.oneof(fc.string({ unit: 'binary', maxLength: 12 }), hostile, loneSurrogate), { maxLength: 8 })
  .map((parts) => parts.join(''));
const longText = fc
  .tuple(fc.constantFrom('a', 'é', '🎉', '\t', '\\', '\ud800'), fc.integer({ min: 1_000, max: 12_000 }))
  .map(([unit, times]) => unit.repeat(times));
const text = fc.oneof({ weight: 6, arbitrary: shortText }, { weight: 1, arbitrary: longText });
const json = fc.oneof(fc.jsonValue({ maxDepth: 3 }), text, fc.constantFrom(1e308, -1e308, 2 ** 53 + 1, -0, 0.1));
const timestamp = fc.oneof(
  fc.integer({ min: 0, max: 99_999 }),
  fc.integer({ min: 0, max: MAX_TIMESTAMP }),
  fc.constantFrom(0, 1, 1_000, 9_999, MAX_TIMESTAMP),
);
const optional = fc.oneof(text, json);

const sendgridEvent = fc
  .tuple(
    fc.record(
      {
        sg_event_id: text.filter((id) => id !== ''),
        // Long addresses more often than other fields: suppression signals carry them into queries.
        email: fc.oneof(text, longText).filter((email) => email.trim() !== ''),
        // Those that suppress, more often.
        event: fc.oneof(fc.constantFrom(...SENDGRID_EVENT_TYPES.keys()), fc.constantFrom('bounce', 'unsubscribe', 'spamreport')),
        category: fc.oneof(fc.constant(CATEGORY), fc.array(fc.oneof(fc.constant(CATEGORY), text, json), { maxLength: 4 }), json),
        url: optional,
        reason: optional,
        response: optional,
        useragent: optional,
        ip: optional,
        sg_message_id: optional,
        variant_id: optional,
        type: fc.oneof(fc.constantFrom('bounce', 'blocked'), optional),
        bounce_classification: fc.oneof(fc.constantFrom('Technical', 'Invalid Address'), optional),
        sg_machine_open: fc.oneof(fc.boolean(), json),
      },
      { requiredKeys: ['sg_event_id', 'email', 'event', 'category'] },
    ),
    // Custom args travel as top-level fields.
    fc.dictionary(
      text.filter((key) => key !== '__proto__'),
      json,
      { maxKeys: 3 },
    ),
    timestamp,
  )
  // Through JSON, as the webhook parses them.
  .map(([fields, customArgs, seconds]) => ({
    event: JSON.parse(JSON.stringify({ ...customArgs, ...fields, timestamp: seconds })) as SendgridEventFields,
    seconds,
  }));

/** A string as ClickHouse holds it: its UTF-8, where a lone surrogate became U+FFFD. */
const stored = (value: string): string => Buffer.from(value, 'utf8').toString('utf8');

/** The webhook's bound on a produce request's events (gateway/src/webhook/publisher.ts); it refuses a larger event. */
const WEBHOOK_REQUEST_BYTES = 900_000;

const encodedBytes = (event: eventsV1.EngagementEvent): number => eventsV1.EngagementEvent.encode(event).finish().length;

/** The events in order, split into produce requests of at most WEBHOOK_REQUEST_BYTES, as the webhook sends them. */
function webhookRequests(events: eventsV1.EngagementEvent[]): eventsV1.EngagementEvent[][] {
  const requests: eventsV1.EngagementEvent[][] = [];
  let bytes = Infinity;
  for (const event of events) {
    const size = encodedBytes(event);
    if (bytes + size > WEBHOOK_REQUEST_BYTES) {
      requests.push([]);
      bytes = 0;
    }
    requests[requests.length - 1].push(event);
    bytes += size;
  }
  return requests;
}

let batchNumber = 0;

it('stores or dead-letters every event the webhook accepts, and none holds up the batch after it', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(sendgridEvent, { minLength: 1, maxLength: 40 }), async (generated) => {
      const prefix = `${run}-${(batchNumber += 1)}-`;
      const receivedAt = new Date();
      const events = generated
        .map(({ event, seconds }, i) =>
          fromSendgridEvent({ ...event, sg_event_id: `${prefix}${i}-${event.sg_event_id}` }, new Date(seconds * 1000), receivedAt)!,
        )
        .filter((event) => encodedBytes(event) <= WEBHOOK_REQUEST_BYTES);
      // As the webhook writes them: records of up to 16 events, each produce request within its byte bound.
      for (const request of webhookRequests(events)) {
        const records: eventsV1.EngagementEvent[][] = [];
        for (let start = 0; start < request.length; start += 16) records.push(request.slice(start, start + 16));
        await ingestion.produceBatches(records);
      }
      const next = engagementEvent({ providerEventId: `${prefix}next`, categories: [CATEGORY] });
      await ingestion.produceBatches([[next]]);

      await ingestion.waitForCount(
        `SELECT count() AS n FROM events WHERE provider_event_id = ${str(next.providerEventId).text}`,
        1,
        60_000,
      );
      await ingestion.waitUntilCaughtUp(60_000);
      const like = str(`${prefix}%`).text;
      const rows = await ingestion.rows<{ id: string }>(
        `SELECT provider_event_id AS id FROM events WHERE workspace_id = toUUID('${workspaceId}') AND provider_event_id LIKE ${like}
         UNION ALL SELECT provider_event_id AS id FROM unmatched_events WHERE provider_event_id LIKE ${like}`,
      );
      const storedIds = new Set(rows.map((row) => row.id));
      // The dead-letter reader may lag the commit that follows the dead letter.
      for (let waited = 0; waited < 10_000; waited += 100) {
        if (events.every(({ providerEventId: id }) => storedIds.has(stored(id)) || deadLettered.has(stored(id)))) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const lost = events.filter(({ providerEventId: id }) => !storedIds.has(stored(id)) && !deadLettered.has(stored(id)));
      expect(lost.map(({ providerEventId }) => providerEventId)).toEqual([]);
    }),
    // No shrinking: a batch that holds the pipeline up holds up every run after it too.
    { numRuns: 10, endOnFailure: true },
  );
  // The encoding is total: nothing the webhook accepts is refused by its table or by ClickHouse.
  expect(await ingestion.metric('ingestion_events_dead_lettered_total', 'reason="invalid_row"')).toBe(0);
  expect(await ingestion.metric('ingestion_events_dead_lettered_total', 'reason="refused_by_clickhouse"')).toBe(0);
});
