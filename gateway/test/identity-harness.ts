import { spawn, type ChildProcess } from 'node:child_process';
import crypto, { type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createTestClickHouse, createTestPostgres, freePorts, startStack } from '@mail/local';
import { UNREACHABLE, unreachableServices } from './support/env';

/**
 * Real servers for the gateway's identity tests: an identity provider that
 * publishes a JWKS over HTTP and signs tokens (node:crypto, because jose is
 * ESM-only and Jest on Node 20 cannot load it), and the built gateway as a
 * child process.
 */

export const ISSUER = 'https://idp.test.example';
export const AUDIENCE = 'mail-platform-api';

export interface SigningKey {
  kid: string;
  alg: 'RS256' | 'ES256' | 'PS256' | 'EdDSA';
  privateKey: KeyObject;
  publicKey: KeyObject;
}

export function signingKey(kid: string, alg: SigningKey['alg']): SigningKey {
  const pair =
    alg === 'ES256'
      ? crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
      : alg === 'EdDSA'
        ? crypto.generateKeyPairSync('ed25519')
        : crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, alg, ...pair };
}

const base64url = (data: string | Buffer): string => Buffer.from(data).toString('base64url');

/** A compact JWS over `claims`, signed with `key` unless the header says otherwise. */
export function signToken(key: SigningKey, claims: Record<string, unknown>, header: Record<string, unknown> = {}): string {
  const fullHeader = { alg: key.alg, typ: 'JWT', kid: key.kid, ...header };
  const input = `${base64url(JSON.stringify(fullHeader))}.${base64url(JSON.stringify(claims))}`;
  const data = Buffer.from(input);
  let signature: Buffer;
  switch (String(fullHeader.alg)) {
    case 'none':
      signature = Buffer.alloc(0);
      break;
    case 'HS256':
      // The classic confusion attack: the public key, as published, used as an HMAC secret.
      signature = crypto
        .createHmac('sha256', key.publicKey.export({ type: 'spki', format: 'pem' }))
        .update(data)
        .digest();
      break;
    case 'ES256':
      signature = crypto.sign('sha256', data, { key: key.privateKey, dsaEncoding: 'ieee-p1363' });
      break;
    case 'PS256':
      signature = crypto.sign('sha256', data, { key: key.privateKey, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 });
      break;
    case 'EdDSA':
      signature = crypto.sign(null, data, key.privateKey);
      break;
    default:
      signature = crypto.sign('sha256', data, key.privateKey);
  }
  return `${input}.${base64url(signature)}`;
}

export interface IdentityProvider {
  /** The issuer its tokens name: ISSUER, or with `discovery` the server's own origin. */
  issuer: string;
  jwksUrl: string;
  /** Adds a key to the published JWKS (a rotation). */
  publish(key: SigningKey): void;
  /** A token as the provider issues it: right issuer and audience, valid for 5 minutes. */
  token(key: SigningKey, claims: Record<string, unknown>): string;
  jwksRequests(): number;
  discoveryRequests(): number;
  close(): Promise<void>;
}

/**
 * A JWKS server; with `discovery`, also the OpenID Connect discovery document
 * at its origin, which is then the issuer. `port` pins the port (to bring a
 * provider up where a gateway already looks for it).
 */
export async function startIdentityProvider(
  keys: SigningKey[],
  { discovery = false, port = 0 }: { discovery?: boolean; port?: number } = {},
): Promise<IdentityProvider> {
  const published = [...keys];
  let requests = 0;
  let discoveries = 0;
  let origin = '';
  const issuer = () => (discovery ? origin : ISSUER);
  const server = http.createServer((req, res) => {
    if (discovery && req.url === '/.well-known/openid-configuration') {
      discoveries++;
      const document = { issuer: issuer(), jwks_uri: `${origin}/keys` };
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(document));
    }
    if (req.url !== (discovery ? '/keys' : '/.well-known/jwks.json')) return void res.writeHead(404).end();
    requests++;
    const jwks = published.map((key) => ({ ...key.publicKey.export({ format: 'jwk' }), kid: key.kid, alg: key.alg, use: 'sig' }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: jwks }));
  });
  server.listen(port, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const now = () => Math.floor(Date.now() / 1000);
  return {
    issuer: issuer(),
    jwksUrl: `${origin}${discovery ? '/keys' : '/.well-known/jwks.json'}`,
    publish: (key) => void published.push(key),
    token: (key, claims) => signToken(key, { iss: issuer(), aud: AUDIENCE, iat: now(), exp: now() + 300, ...claims }),
    jwksRequests: () => requests,
    discoveryRequests: () => discoveries,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port;
}

export interface IdentityService {
  /** host:port for IDENTITY_GRPC_ADDR. */
  address: string;
  /** The gateway's *_GRPC_ADDR variables for the services started. */
  gatewayEnv: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * The real identity service (its dist/main.js) over a private Postgres
 * database; with `withWorkspaceContent`, the campaign, brand-guide and
 * analytics services beside it (analytics over a private ClickHouse
 * database), which deleting a workspace also calls.
 */
export async function startIdentityService(
  label: string,
  bootstrapPlatformAdmins: string[] = [],
  { withWorkspaceContent = false } = {},
): Promise<IdentityService> {
  const [postgres, clickhouse] = await Promise.all([
    createTestPostgres(label),
    withWorkspaceContent ? createTestClickHouse(label) : undefined,
  ]);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${label}-`));
  const drop = async (): Promise<void> => {
    await Promise.all([postgres.drop(), clickhouse?.drop()]);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const stack = await startStack({
      stateDir: dir,
      logDir: dir,
      processes: withWorkspaceContent ? ['identity', 'campaign', 'brand-guide', 'analytics', 'delivery'] : ['identity'],
      env: {
        DATABASE_URL: postgres.url,
        ...(clickhouse ? { CLICKHOUSE_DATABASE: clickhouse.database } : {}),
        BOOTSTRAP_PLATFORM_ADMINS: bootstrapPlatformAdmins.join(','),
        LOG_LEVEL: 'warn',
      },
    });
    const { grpc } = stack.urls;
    return {
      address: grpc.identity,
      gatewayEnv: {
        IDENTITY_GRPC_ADDR: grpc.identity,
        ...(withWorkspaceContent
          ? {
              CAMPAIGN_GRPC_ADDR: grpc.campaign,
              BRAND_GUIDE_GRPC_ADDR: grpc['brand-guide'],
              ANALYTICS_GRPC_ADDR: grpc.analytics,
              DELIVERY_GRPC_ADDR: grpc.delivery,
            }
          : {}),
      },
      stop: async () => {
        await stack.stopAll();
        await drop();
      },
    };
  } catch (error) {
    await drop();
    throw error;
  }
}

const GATEWAY_MAIN = path.join(__dirname, '..', 'dist', 'main.js');

export interface GatewayProcess {
  url: string;
  /** The ops server: /metrics and the detailed /readyz. */
  opsUrl: string;
  output(): string;
  stop(): Promise<void>;
}

/** Spawns the built gateway with `env` (plus a free PORT and OPS_PORT; no broker, services unreachable unless given) and waits until /healthz answers. */
export async function startGateway(env: Record<string, string>): Promise<GatewayProcess> {
  const [port, opsPort] = await freePorts(2);
  const logFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-test-')), 'gateway.log');
  const log = fs.openSync(logFile, 'a');
  const child: ChildProcess = spawn(process.execPath, [GATEWAY_MAIN], {
    env: {
      PATH: process.env.PATH,
      PORT: String(port),
      OPS_PORT: String(opsPort),
      LOG_LEVEL: 'warn',
      // No broker: the webhook is not under test and must not create topics on the shared Kafka.
      KAFKA_BROKERS: UNREACHABLE,
      ...unreachableServices(),
      ...env,
    },
    stdio: ['ignore', log, log],
  });
  fs.closeSync(log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const output = () => fs.readFileSync(logFile, 'utf8');
  // A busy host starts a gateway in a fraction of a quiet one's speed: a bound against a hang only.
  for (const deadline = Date.now() + 90_000; ;) {
    if (child.exitCode !== null) throw new Error(`gateway exited with ${child.exitCode}:\n${output()}`);
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`gateway did not answer /healthz:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    opsUrl: `http://127.0.0.1:${opsPort}`,
    output,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

export interface SignedInGateway {
  identity: IdentityService;
  idp: IdentityProvider;
  gateway: GatewayProcess;
  /** What `gateway` was started with, to start another like it. */
  env: Record<string, string>;
  /** Gateway, then provider, then services. */
  stop(): Promise<void>;
}

/**
 * The built gateway verifying the tokens of a provider that publishes `keys`
 * (at its JWKS URL, or with `discovery` through its discovery document), in
 * front of the real services of startIdentityService(label, bootstrapPlatformAdmins, options).
 */
export async function startSignedInGateway(
  label: string,
  keys: SigningKey[],
  {
    bootstrapPlatformAdmins = [],
    withWorkspaceContent = false,
    discovery = false,
  }: { bootstrapPlatformAdmins?: string[]; withWorkspaceContent?: boolean; discovery?: boolean } = {},
): Promise<SignedInGateway> {
  const identity = await startIdentityService(label, bootstrapPlatformAdmins, { withWorkspaceContent });
  let idp: IdentityProvider | undefined;
  try {
    idp = await startIdentityProvider(keys, { discovery });
    const verification: Record<string, string> = discovery ? {} : { AUTH_JWKS_URL: idp.jwksUrl };
    const env = { ...verification, AUTH_ISSUER: idp.issuer, AUTH_AUDIENCE: AUDIENCE, ...identity.gatewayEnv };
    const gateway = await startGateway(env);
    const started = idp;
    return {
      identity,
      idp,
      gateway,
      env,
      stop: async () => {
        await gateway.stop();
        await started.close();
        await identity.stop();
      },
    };
  } catch (error) {
    await idp?.close();
    await identity.stop();
    throw error;
  }
}

/** Runs the built gateway to its exit (no broker, services unreachable unless given) and returns the exit code and what it printed. */
export function runGatewayToExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [GATEWAY_MAIN], {
      env: { PATH: process.env.PATH, KAFKA_BROKERS: UNREACHABLE, ...unreachableServices(), ...env },
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.once('close', (code) => {
      clearTimeout(killer);
      resolve({ code, output });
    });
  });
}
