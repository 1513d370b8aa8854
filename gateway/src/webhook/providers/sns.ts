import crypto from 'node:crypto';
import https from 'node:https';

/** An SNS message's fields as posted (every value a string). */
export type SnsMessage = Record<string, unknown>;

/** The keys AWS signs, in its order, per message type (absent optional keys are left out). */
const SIGNED_KEYS: Record<string, string[]> = {
  Notification: ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type'],
  SubscriptionConfirmation: ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'],
  UnsubscribeConfirmation: ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'],
};
const OPTIONAL_KEYS = new Set(['Subject']);

const ALGORITHMS: Record<string, string> = { '1': 'sha1', '2': 'sha256' };

/** Certificates cached at most (one per SNS region and key rotation). */
const MAX_CACHED_CERTIFICATES = 64;
/** A certificate or subscription answer larger than this is not SNS's. */
const MAX_RESPONSE_BYTES = 64 * 1024;
const FETCH_TIMEOUT_MS = 5_000;

/** The string SNS signs: "Key\nValue\n" for each signed key present; undefined for a type SNS does not send. */
export function snsStringToSign(message: SnsMessage): string | undefined {
  const keys = SIGNED_KEYS[String(message.Type)];
  if (!keys) return undefined;
  let text = '';
  for (const key of keys) {
    const value = message[key];
    if (value === undefined && OPTIONAL_KEYS.has(key)) continue;
    if (typeof value !== 'string') return undefined;
    text += `${key}\n${value}\n`;
  }
  return text;
}

/**
 * The URL when it is https on port 443 at a host the pattern allows (nothing
 * is fetched from anywhere else), else undefined. SNS serves on the default
 * port only, so an explicit other port is refused (the URL parser drops `:443`).
 */
export function allowedSnsUrl(text: unknown, hostPattern: RegExp): URL | undefined {
  if (typeof text !== 'string') return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' || url.port !== '' || url.username !== '' || url.password !== '') return undefined;
  return hostPattern.test(url.hostname) ? url : undefined;
}

/** GET over https; the body of a 200, else a rejection. */
export function httpsGet(url: URL): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = https.get(url, { timeout: FETCH_TIMEOUT_MS }, (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        reject(new Error(`GET ${url.host}${url.pathname} answered ${response.statusCode}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES)
          request.destroy(new Error(`GET ${url.host}${url.pathname} answered more than ${MAX_RESPONSE_BYTES} bytes`));
        else chunks.push(chunk);
      });
      response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      response.on('error', reject);
    });
    request.on('timeout', () => request.destroy(new Error(`GET ${url.host}${url.pathname} timed out`)));
    request.on('error', reject);
  });
}

/** Verifies SNS messages: the signing certificate comes from an allowed https host, and is fetched once per URL. */
export class SnsVerifier {
  private readonly certificates = new Map<string, Promise<crypto.KeyObject>>();

  constructor(
    private readonly hostPattern: RegExp,
    private readonly fetchText: (url: URL) => Promise<string> = httpsGet,
  ) {}

  /** Why the message's signature fails, or undefined when it is SNS's. */
  async failure(message: SnsMessage): Promise<string | undefined> {
    const algorithm = ALGORITHMS[String(message.SignatureVersion)];
    if (!algorithm) return 'Unsupported or missing SNS SignatureVersion';
    if (typeof message.Signature !== 'string' || message.Signature === '') return 'Missing SNS Signature';
    const stringToSign = snsStringToSign(message);
    if (stringToSign === undefined) return 'SNS message without the fields its type signs';
    const certificateUrl = allowedSnsUrl(message.SigningCertURL, this.hostPattern);
    if (!certificateUrl) return 'SigningCertURL is not https on an allowed SNS host';
    let key: crypto.KeyObject;
    try {
      key = await this.certificateKey(certificateUrl);
    } catch {
      return 'The SNS signing certificate could not be fetched';
    }
    const valid = crypto.verify(algorithm, Buffer.from(stringToSign, 'utf8'), key, Buffer.from(message.Signature, 'base64'));
    return valid ? undefined : 'Invalid SNS signature';
  }

  private certificateKey(url: URL): Promise<crypto.KeyObject> {
    const cached = this.certificates.get(url.href);
    if (cached) return cached;
    const key = this.fetchText(url).then((pem) => new crypto.X509Certificate(pem).publicKey);
    // A failure is not cached: the next message tries again.
    key.catch(() => this.certificates.delete(url.href));
    if (this.certificates.size >= MAX_CACHED_CERTIFICATES) this.certificates.delete(this.certificates.keys().next().value!);
    this.certificates.set(url.href, key);
    return key;
  }
}
