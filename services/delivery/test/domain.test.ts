import { addressOf, messageIdOf } from '../src/domain/recipient';
import { providerHeaders } from '../src/domain/headers';
import { classifySmtpError, retryDelayMs } from '../src/domain/run';
import { dueFireTime } from '../src/domain/schedule';
import { pickVariant } from '../src/domain/variants';
import { compileTemplate, renderMessage } from '../src/domain/render';

const variants = [
  { id: 'a', weight: 1 },
  { id: 'b', weight: 3 },
];

test('variants: the same run and address always get the same variant, and the shares follow the weights', () => {
  const picks = Array.from({ length: 8000 }, (_, n) => pickVariant(variants, 'run-1', `user${n}@example.com`).id);
  expect(Array.from({ length: 8000 }, (_, n) => pickVariant(variants, 'run-1', `user${n}@example.com`).id)).toEqual(picks);
  const share = picks.filter((id) => id === 'a').length / picks.length;
  expect(share).toBeGreaterThan(0.22);
  expect(share).toBeLessThan(0.28);
  // Another run draws anew.
  const other = Array.from({ length: 8000 }, (_, n) => pickVariant(variants, 'run-2', `user${n}@example.com`).id);
  expect(other).not.toEqual(picks);
  expect(pickVariant([{ id: 'only', weight: 5 }], 'run-1', 'x@example.com').id).toBe('only');
});

test('addresses are trimmed and lower-cased; malformed ones are invalid with the reason', () => {
  expect(addressOf({ email: '  Ann@Example.COM ' })).toEqual({ email: 'ann@example.com', valid: true });
  expect(addressOf({ email: 'nope' })).toEqual({ email: 'nope', valid: false, reason: expect.stringContaining('@-sign') });
  expect(addressOf({ email: null })).toEqual(expect.objectContaining({ email: '', valid: false }));
  expect(messageIdOf('run-1', 'a@example.com', 'news@sender.example.com')).toMatch(/^run-1\.[0-9a-f]{24}@sender\.example\.com$/);
  expect(messageIdOf('run-1', 'a@example.com', 'x@y.example.com')).toBe(messageIdOf('run-1', 'a@example.com', 'z@y.example.com'));
});

test('provider header dialects carry the category and the variant, run and message ids', () => {
  const tracking = { category: 'spring', variantId: 'v-1', runId: 'r-1', messageId: 'm-1@x.example.com' };
  expect(providerHeaders('none', tracking)).toEqual({});
  expect(JSON.parse(providerHeaders('sendgrid', tracking)['X-SMTPAPI'])).toEqual({
    category: ['spring'],
    unique_args: { variant_id: 'v-1', run_id: 'r-1', message_id: 'm-1@x.example.com' },
  });
  expect(providerHeaders('mailgun', tracking)).toEqual({
    'X-Mailgun-Tag': 'spring',
    'X-Mailgun-Variables': JSON.stringify({ run_id: 'r-1', message_id: 'm-1@x.example.com', variant_id: 'v-1' }),
  });
  expect(providerHeaders('ses', tracking)).toEqual({
    'X-SES-MESSAGE-TAGS': 'category=spring, run_id=r-1, message_id=m-1@x.example.com, variant_id=v-1',
  });
  expect(providerHeaders('postmark', { ...tracking, variantId: null })).toEqual({
    'X-PM-Tag': 'spring',
    'X-PM-Metadata-run_id': 'r-1',
    'X-PM-Metadata-message_id': 'm-1@x.example.com',
  });
});

test('SMTP answers: 5xx fails with the answer, 4xx is retried with doubling waits; no answer is retried before the data, unknown after', () => {
  for (const dataSent of [false, true]) {
    expect(classifySmtpError({ responseCode: 550, response: '550 5.1.1 no such user' }, dataSent)).toEqual({
      kind: 'failed',
      error: '550 5.1.1 no such user',
      code: 550,
    });
    expect(classifySmtpError({ responseCode: 451, response: '451 try later' }, dataSent)).toEqual({
      kind: 'retry',
      error: '451 try later',
      code: 451,
    });
  }
  const dropped = { code: 'ECONNECTION', command: 'CONN', message: 'Connection closed unexpectedly' };
  expect(classifySmtpError(dropped, false)).toEqual({ kind: 'retry', error: 'Connection closed unexpectedly' });
  expect(classifySmtpError(dropped, true)).toEqual({ kind: 'unknown', error: 'Connection closed unexpectedly' });
  expect([1, 2, 3, 30].map((attempt) => retryDelayMs(attempt, 1000))).toEqual([1000, 2000, 4000, 3_600_000]);
});

test('schedules: the latest fire time after the schedule was set, if within the grace', () => {
  const set = new Date('2026-11-20T10:30:00Z');
  const hourly = '0 * * * *';
  expect(dueFireTime(hourly, set, new Date('2026-11-20T10:45:00Z'), 3_600_000)).toBeUndefined();
  expect(dueFireTime(hourly, set, new Date('2026-11-20T11:00:00Z'), 3_600_000)).toEqual(new Date('2026-11-20T11:00:00Z'));
  // After downtime: only the latest missed fire time, and only while it is within the grace.
  expect(dueFireTime(hourly, set, new Date('2026-11-20T14:20:00Z'), 3_600_000)).toEqual(new Date('2026-11-20T14:00:00Z'));
  expect(dueFireTime('0 0 * * *', set, new Date('2026-11-23T02:00:00Z'), 3_600_000)).toBeUndefined();
});

test('rendering: recipient fields HTML-escaped in html only, the unsubscribe link as a field, a one-line subject', () => {
  const template = compileTemplate({
    subject: 'Hi {{name}}\r\n',
    html: '<p>{{name}}</p><a href="{{unsubscribe_url}}">x</a>',
    text: '{{name}}',
  });
  expect(renderMessage(template, { name: '<b>A&B</b>' }, 'http://h/unsubscribe/t')).toEqual({
    subject: 'Hi <b>A&B</b> ',
    html: '<p>&lt;b&gt;A&amp;B&lt;/b&gt;</p><a href="http://h/unsubscribe/t">x</a>',
    text: '<b>A&B</b>',
  });
});
