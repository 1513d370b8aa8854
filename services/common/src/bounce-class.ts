import { eventsV1 } from '@mail/proto';

const { BounceClass } = eventsV1;

/** An enhanced status code (RFC 3463: class.subject.detail) in a provider's text, e.g. "550 5.1.1 no such user". */
const ENHANCED_CODE = /\b([245])\.(\d{1,3})\.(\d{1,3})\b/;

/** Authentication of the sender's domain (SPF, DKIM, DMARC, reverse DNS): the sender's set-up, not its standing. */
const AUTHENTICATION_DETAILS = new Set([7, 23, 24, 25, 26, 27]);

/**
 * Why a server refused a message, from its SMTP reply: the enhanced status
 * code when there is one (in `enhanced` or in the text), else the basic
 * reply code. The table is docs/api.md's "Bounce classes". One copy for the
 * gateway's providers and delivery's own bounces (SMTP answers, the bounce mailbox).
 */
export function smtpBounceClass(code: number | undefined, text: string | undefined, enhanced?: string): eventsV1.BounceClass {
  const match = ENHANCED_CODE.exec(enhanced ?? '') ?? ENHANCED_CODE.exec(text ?? '');
  if (match) return enhancedCodeClass(Number(match[1]), Number(match[2]), Number(match[3]));
  return code === undefined ? BounceClass.BOUNCE_CLASS_UNCLASSIFIED : (BASIC_CODES.get(code) ?? BounceClass.BOUNCE_CLASS_UNCLASSIFIED);
}

function enhancedCodeClass(kind: number, subject: number, detail: number): eventsV1.BounceClass {
  switch (subject) {
    case 1:
      return [0, 1, 2, 3, 6, 10].includes(detail) ? BounceClass.BOUNCE_CLASS_INVALID_ADDRESS : BounceClass.BOUNCE_CLASS_TECHNICAL;
    case 2:
      return detail === 3 ? BounceClass.BOUNCE_CLASS_CONTENT : BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE;
    case 3:
      return detail === 4 ? BounceClass.BOUNCE_CLASS_CONTENT : BounceClass.BOUNCE_CLASS_TECHNICAL;
    case 6:
      return BounceClass.BOUNCE_CLASS_CONTENT;
    case 7:
      if (AUTHENTICATION_DETAILS.has(detail)) return BounceClass.BOUNCE_CLASS_TECHNICAL;
      return kind === 4 ? BounceClass.BOUNCE_CLASS_FREQUENCY_OR_VOLUME : BounceClass.BOUNCE_CLASS_REPUTATION;
    case 4:
    case 5:
      return BounceClass.BOUNCE_CLASS_TECHNICAL;
    default:
      return BounceClass.BOUNCE_CLASS_UNCLASSIFIED;
  }
}

const BASIC_CODES = new Map<number, eventsV1.BounceClass>([
  [421, BounceClass.BOUNCE_CLASS_FREQUENCY_OR_VOLUME],
  [450, BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE],
  [451, BounceClass.BOUNCE_CLASS_TECHNICAL],
  [452, BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE],
  [550, BounceClass.BOUNCE_CLASS_INVALID_ADDRESS],
  [551, BounceClass.BOUNCE_CLASS_INVALID_ADDRESS],
  [552, BounceClass.BOUNCE_CLASS_MAILBOX_UNAVAILABLE],
  [553, BounceClass.BOUNCE_CLASS_INVALID_ADDRESS],
]);
