import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

/** The fields of the answers the tests read. */
export interface ApiBody {
  accepted?: number;
  detail?: string | { type: string; loc: (string | number)[] }[];
  id?: string;
  total?: number;
  items?: { event_type: string; [field: string]: unknown }[];
  totals?: Record<string, number>;
}

/** Requests made by the providers' tests, each signed as the provider signs it, with real crypto. */

export async function postTo(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: ApiBody; headers: Headers }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as ApiBody, headers: response.headers };
}

export const basicHeader = (credentials: string): Record<string, string> => ({
  authorization: `Basic ${Buffer.from(credentials).toString('base64')}`,
});

/** A Mailgun webhook body: `event-data` signed as Mailgun signs it (hex HMAC-SHA256 of timestamp + token). */
export function mailgunBody(
  signingKey: string,
  eventData: Record<string, unknown>,
  options: { timestamp?: number; token?: string } = {},
): string {
  const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  const token = options.token ?? crypto.randomBytes(25).toString('hex');
  const signature = crypto
    .createHmac('sha256', signingKey)
    .update(timestamp + token)
    .digest('hex');
  return JSON.stringify({ signature: { timestamp, token, signature }, 'event-data': eventData });
}

/** The string SNS signs, written out as AWS documents it. */
function snsStringToSign(message: Record<string, string>): string {
  const keys =
    message.Type === 'Notification'
      ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
      : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  return keys
    .filter((key) => message[key] !== undefined)
    .map((key) => `${key}\n${message[key]}\n`)
    .join('');
}

/** An SNS message with its Signature (v1 SHA1withRSA or v2 SHA256withRSA) made with `privateKey`. */
export function signedSnsMessage(
  fields: Record<string, string>,
  privateKey: crypto.KeyObject,
  options: { version?: '1' | '2'; certUrl: string },
): Record<string, string> {
  const version = options.version ?? '2';
  const message = { Timestamp: new Date().toISOString(), MessageId: crypto.randomUUID(), ...fields };
  const signature = crypto.sign(version === '1' ? 'sha1' : 'sha256', Buffer.from(snsStringToSign(message)), privateKey);
  return { ...message, SignatureVersion: version, Signature: signature.toString('base64'), SigningCertURL: options.certUrl };
}

export interface TlsFixtures {
  /** The test CA, PEM file: the gateway trusts it through NODE_EXTRA_CA_CERTS. */
  caFile: string;
  /** TLS key and certificate for localhost and 127.0.0.1, issued by the CA. */
  serverKey: string;
  serverCert: string;
  /** The SNS signing key and its certificate, which the certificate server serves. */
  signingKey: crypto.KeyObject;
  signingCert: string;
}

/**
 * An address of its own on the loopback interface (127.0.0.0/8), where a
 * test can serve on port 443, the only port SNS URLs may name, without
 * taking it from another test.
 */
export function loopbackAddress(): string {
  const byte = (low: number) => low + crypto.randomInt(254 - low + 1);
  return `127.${byte(1)}.${byte(0)}.${byte(1)}`;
}

/** A CA, a server certificate it issued (for localhost, 127.0.0.1 and `addresses`), and an SNS signing certificate, made with openssl in `dir`. */
export function makeTlsFixtures(dir: string, addresses: string[] = []): TlsFixtures {
  const file = (name: string): string => path.join(dir, name);
  const openssl = (...args: string[]): void => void execFileSync('openssl', args, { stdio: 'pipe' });
  /** A self-signed certificate and its key, <name>.pem and <name>.key. */
  const selfSigned = (name: string, subject: string): void =>
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      file(`${name}.key`),
      '-out',
      file(`${name}.pem`),
      '-days',
      '2',
      '-subj',
      subject,
    );
  selfSigned('ca', '/CN=provider test CA');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('server.key'), '-out', file('server.csr'), '-subj', '/CN=localhost');
  fs.writeFileSync(
    file('server.ext'),
    `subjectAltName=${['DNS:localhost', ...['127.0.0.1', ...addresses].map((ip) => `IP:${ip}`)].join(',')}\n`,
  );
  openssl(
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-out',
    file('server.pem'),
    '-days',
    '2',
    '-extfile',
    file('server.ext'),
  );
  selfSigned('signing', '/CN=sns.amazonaws.com');
  return {
    caFile: file('ca.pem'),
    serverKey: fs.readFileSync(file('server.key'), 'utf8'),
    serverCert: fs.readFileSync(file('server.pem'), 'utf8'),
    signingKey: crypto.createPrivateKey(fs.readFileSync(file('signing.key'))),
    signingCert: fs.readFileSync(file('signing.pem'), 'utf8'),
  };
}

export interface CertificateServer {
  host: string;
  port: number;
  /** Requests by path (query included). */
  requests: Map<string, number>;
  total(): number;
  close(): Promise<void>;
}

/**
 * An HTTPS server at `host`:`port` (443 unless told; 0 for any free port) that serves the SNS signing certificate
 * at /cert.pem and answers 200 to anything else (SubscribeURL).
 */
export async function startCertificateServer(tls: TlsFixtures, host: string, port = 443): Promise<CertificateServer> {
  const requests = new Map<string, number>();
  const server = https.createServer({ key: tls.serverKey, cert: tls.serverCert }, (req, res) => {
    requests.set(req.url!, (requests.get(req.url!) ?? 0) + 1);
    if (req.url === '/cert.pem') res.writeHead(200, { 'content-type': 'application/x-pem-file' }).end(tls.signingCert);
    else res.writeHead(200, { 'content-type': 'text/xml' }).end('<ConfirmSubscriptionResponse/>');
  });
  server.listen(port, host);
  await new Promise((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  return {
    host,
    port: (server.address() as AddressInfo).port,
    requests,
    total: () => [...requests.values()].reduce((sum, n) => sum + n, 0),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
