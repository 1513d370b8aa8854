import { fieldGroups, parseReport } from '../src/domain/reports';

/** What a message of the bounce mailbox reports (docs/api.md, "Bounces without a provider"). */

function report(contentType: string, parts: [string, string][]): Buffer {
  const lines = ['From: mailer-daemon@mx.example.net', 'Subject: report', 'Date: Fri, 27 Nov 2026 10:00:05 +0000', 'MIME-Version: 1.0'];
  lines.push(`Content-Type: ${contentType}; boundary="B"`, '');
  for (const [type, body] of parts) lines.push('--B', `Content-Type: ${type}`, '', body);
  lines.push('--B--', '');
  return Buffer.from(lines.join('\r\n'));
}

const returned: [string, string] = [
  'text/rfc822-headers',
  'From: news@sender.example.com\r\nMessage-ID:\r\n <run.abc@sender.example.com>\r\n',
];

function status(action: string, code: string): [string, string] {
  return [
    'message/delivery-status',
    `Reporting-MTA: dns; mx.example.net\r\n\r\nFinal-Recipient: rfc822; a@example.com\r\nAction: ${action}\r\nStatus: ${code}\r\n` +
      `Diagnostic-Code: smtp; 550 5.1.1 <a@example.com>:\r\n    no such user\r\n`,
  ];
}

test('a DSN: failed with 5.x.x is hard, 4.x.x soft, the diagnostic (unfolded) its reason; delivered or without a Message-ID, nothing', async () => {
  const dsn = 'multipart/report; report-type=delivery-status';
  expect(await parseReport(report(dsn, [status('failed', '5.1.1'), returned]))).toEqual({
    kind: 'bounce',
    originalMessageId: 'run.abc@sender.example.com',
    bounceType: 'hard',
    status: '5.1.1',
    reason: '550 5.1.1 <a@example.com>: no such user',
    date: new Date('2026-11-27T10:00:05.000Z'),
  });
  expect(await parseReport(report(dsn, [status('delayed', '4.2.2'), returned]))).toEqual(
    expect.objectContaining({ kind: 'bounce', bounceType: 'soft', status: '4.2.2' }),
  );
  expect(await parseReport(report(dsn, [status('delivered', '2.0.0'), returned]))).toBeUndefined();
  expect(await parseReport(report(dsn, [status('failed', '5.1.1')]))).toBeUndefined();
  expect(await parseReport(report('multipart/mixed', [status('failed', '5.1.1'), returned]))).toBeUndefined();
});

test('a feedback report: abuse is a spam report; another feedback type is nothing', async () => {
  const arf = 'multipart/report; report-type=feedback-report';
  const feedback = (type: string): [string, string] => ['message/feedback-report', `Feedback-Type: ${type}\r\nVersion: 1\r\n`];
  expect(await parseReport(report(arf, [feedback('abuse'), returned]))).toEqual({
    kind: 'spamreport',
    originalMessageId: 'run.abc@sender.example.com',
    date: new Date('2026-11-27T10:00:05.000Z'),
  });
  expect(await parseReport(report(arf, [feedback('not-spam'), returned]))).toBeUndefined();
  expect(await parseReport(Buffer.from('Subject: hello\r\n\r\nnot a report\r\n'))).toBeUndefined();
});

test('report fields: folded lines unfolded, groups split by blank lines, names lower-cased', () => {
  expect(fieldGroups('A: 1\r\nB-Name: two\r\n  lines\r\n\r\nC: 3\r\n').map((group) => Object.fromEntries(group))).toEqual([
    { a: '1', 'b-name': 'two lines' },
    { c: '3' },
  ]);
});
