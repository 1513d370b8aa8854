import { HttpError, unprocessable } from '../../errors/http-error';
import {
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  basicAuthGate,
  parseSendgridPublicKey,
  signatureFailure,
  signatureHeadersFailure,
} from '../auth';
import { WEBHOOK_PATH, basicAuthCredential, defineProvider, parsedCredential } from '../declaration';
import { bodyViolations, toEngagementEvent, type SendgridEvent } from '../events';
import { parseJsonBody } from '../provider';

/** SendGrid's Event Webhook: a JSON array of events, signed (ECDSA) and/or behind HTTP Basic. */
export const sendgrid = defineProvider({
  name: 'sendgrid',
  otherPaths: [WEBHOOK_PATH],
  variables: {
    publicKey: parsedCredential(
      'SENDGRID_WEBHOOK_PUBLIC_KEY',
      "SendGrid's signed event webhook key (base64 DER or PEM, P-256).",
      'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEgTo0fKfooDujyFK86J7c41AaPimjythXlmPo/BRz4+WheDOtWKhOXxzYfVYbFK6YyquvWnzR8Vq07/+iHMHl4g==',
      parseSendgridPublicKey,
    ),
    basicAuth: basicAuthCredential(
      'WEBHOOK_BASIC_AUTH',
      "`user:password` for HTTP Basic on SendGrid's webhook. SendGrid's credential is this, the key above, or both.",
    ),
  },
  docs: {
    title: 'SendGrid',
    verification:
      'ECDSA P-256 signature over the timestamp header and the raw body (10 minutes either way) and/or HTTP Basic; both must pass when both are set',
    category: '`category`',
    variant: '`variant_id` custom argument',
    bounceSource: '`bounce_classification`',
    bounceClasses: {
      invalid_address: 'Invalid Address',
      mailbox_unavailable: 'Mailbox Unavailable',
      technical: 'Technical',
      content: 'Content',
      reputation: 'Reputation',
      frequency_or_volume: 'Frequency or Volume Issues',
      unclassified: 'Unclassified, or none',
    },
  },
  create: ({ publicKey, basicAuth }) => {
    const basic = basicAuthGate(basicAuth);
    return {
      challenge: basic.challenge,
      headerFailure: (req) =>
        basic.failure(req.headers.authorization) ??
        (publicKey ? signatureHeadersFailure(req.get(SIGNATURE_HEADER), req.get(TIMESTAMP_HEADER)) : undefined),
      receive: (req, raw, receivedAt) => {
        if (publicKey) {
          const failure = signatureFailure(publicKey, req.get(SIGNATURE_HEADER), req.get(TIMESTAMP_HEADER), raw);
          if (failure) throw new HttpError(401, failure, basic.challenge);
        }
        const body = parseJsonBody(raw);
        const violations = bodyViolations(body);
        if (violations.length > 0) throw unprocessable(violations);
        const events = body as SendgridEvent[];
        const indexes: number[] = [];
        const normalized = events.flatMap((event, index) => {
          const engagement = toEngagementEvent(event, receivedAt);
          if (!engagement) return [];
          indexes.push(index);
          return [engagement];
        });
        return Promise.resolve({
          kind: 'events',
          accepted: events.length,
          events: normalized,
          sourceOf: (i) => ({ loc: ['body', indexes[i]], input: events[indexes[i]] }),
        });
      },
    };
  },
});
