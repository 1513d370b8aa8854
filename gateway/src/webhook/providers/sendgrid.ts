import type { KeyObject } from 'node:crypto';
import { HttpError, unprocessable } from '../../errors/http-error';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, basicAuthMatches, signatureFailure, signatureHeadersFailure } from '../auth';
import { bodyViolations, toEngagementEvent, type SendgridEvent } from '../events';
import { parseJsonBody, type WebhookProvider } from '../provider';

export interface SendgridCredentials {
  /** Verifies SendGrid's signature when set. */
  publicKey?: KeyObject;
  /** `user:password` required through HTTP Basic when set. */
  basicAuth?: string;
}

/** SendGrid's Event Webhook: a JSON array of events, signed (ECDSA) and/or behind HTTP Basic. */
export function sendgridProvider({ publicKey, basicAuth }: SendgridCredentials): WebhookProvider {
  const challenge: Record<string, string> = basicAuth ? { 'WWW-Authenticate': 'Basic realm="campaign-events"' } : {};
  return {
    name: 'sendgrid',
    verifies: publicKey !== undefined || basicAuth !== undefined,
    challenge,
    headerFailure: (req) => {
      if (basicAuth && !basicAuthMatches(basicAuth, req.headers.authorization)) return 'Invalid or missing webhook credentials';
      return publicKey ? signatureHeadersFailure(req.get(SIGNATURE_HEADER), req.get(TIMESTAMP_HEADER)) : undefined;
    },
    receive: (req, raw, receivedAt) => {
      if (publicKey) {
        const failure = signatureFailure(publicKey, req.get(SIGNATURE_HEADER), req.get(TIMESTAMP_HEADER), raw);
        if (failure) throw new HttpError(401, failure, challenge);
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
}
