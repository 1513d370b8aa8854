import { simpleParser, type StructuredHeader } from 'mailparser';

/**
 * What a message of the bounce mailbox reports about a message we sent,
 * named by that message's Message-ID (without angle brackets): a delivery
 * status notification (RFC 3464) that it bounced, hard for `Action: failed`
 * with a 5.x.x status, soft for a 4.x.x one; or a feedback report (RFC 5965)
 * of `Feedback-Type: abuse`, a spam report. Anything else reports nothing.
 */
export type MailboxReport = (
  | { kind: 'bounce'; originalMessageId: string; bounceType: 'hard' | 'soft'; status: string; reason: string }
  | { kind: 'spamreport'; originalMessageId: string }
) & {
  /** The report's Date header, when it has a valid one. */
  date: Date | undefined;
};

/** The report of a raw mailbox message, or undefined when it is no report we store (or names no message). */
export async function parseReport(raw: Buffer): Promise<MailboxReport | undefined> {
  // keepDeliveryStatus: the message/delivery-status part stays a part of its own, not text of the message.
  const mail = await simpleParser(raw, { keepDeliveryStatus: true, skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true });
  // mailparser gives Content-Type as a structured header.
  const type = mail.headers.get('content-type') as StructuredHeader | undefined;
  if (type?.value.toLowerCase() !== 'multipart/report') return undefined;
  const reportType = type.params['report-type']?.toLowerCase();
  const parts = mail.attachments.map((part) => ({ type: part.contentType.toLowerCase(), text: part.content.toString('utf8') }));
  const report = parts.find((part) => part.type === `message/${reportType}`);
  if (!report) return undefined;
  const groups = fieldGroups(report.text);
  const returned = parts.find((part) => part.type === 'message/rfc822' || part.type === 'text/rfc822-headers');
  const originalMessageId = messageIdIn(returned?.text) ?? firstField(groups, 'original-message-id')?.replace(/^<|>$/g, '');
  if (!originalMessageId) return undefined;
  const date = mail.date && !Number.isNaN(mail.date.getTime()) ? mail.date : undefined;
  if (reportType === 'feedback-report') {
    return firstField(groups, 'feedback-type')?.toLowerCase() === 'abuse' ? { kind: 'spamreport', originalMessageId, date } : undefined;
  }
  if (reportType !== 'delivery-status') return undefined;
  // The per-recipient groups follow the per-message one; a message of ours has one recipient.
  for (const group of groups.slice(1)) {
    const action = group.get('action')?.toLowerCase();
    const status = /^([245])\.\d{1,3}\.\d{1,3}/.exec(group.get('status') ?? '');
    if (!action || !status) continue;
    const reason = group.get('diagnostic-code')?.replace(/^[^;]*;\s*/, '') ?? `Status: ${status[0]}`;
    if (status[1] === '5' && action === 'failed')
      return { kind: 'bounce', originalMessageId, bounceType: 'hard', status: status[0], reason, date };
    if (status[1] === '4' && (action === 'failed' || action === 'delayed')) {
      return { kind: 'bounce', originalMessageId, bounceType: 'soft', status: status[0], reason, date };
    }
  }
  return undefined;
}

/** A report's header fields (RFC 822 syntax, folded lines unfolded), in groups split by blank lines; names lower-cased. */
export function fieldGroups(text: string): Map<string, string>[] {
  return text
    .replace(/\r\n/g, '\n')
    .split(/\n[ \t]*\n/)
    .map((block) => {
      const fields = new Map<string, string>();
      for (const line of block.replace(/\n[ \t]+/g, ' ').split('\n')) {
        const colon = line.indexOf(':');
        if (colon > 0) fields.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
      return fields;
    })
    .filter((fields) => fields.size > 0);
}

function firstField(groups: Map<string, string>[], name: string): string | undefined {
  return groups.find((group) => group.has(name))?.get(name);
}

/** The Message-ID among the headers of a returned message (or of its headers alone). */
function messageIdIn(text: string | undefined): string | undefined {
  if (!text) return undefined;
  const headers = text.replace(/\r\n/g, '\n').split(/\n[ \t]*\n/)[0];
  return /^message-id:[ \t]*\n?[ \t]*<([^>\s]+)>/im.exec(headers)?.[1];
}
