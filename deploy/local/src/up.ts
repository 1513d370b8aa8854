import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ensureRecipientDatabase } from './recipients';
import { DEFAULT_PORTS, SERVICE_NAMES, runningDetached, startStack, type StackUrls } from './stack';
import { infraEnv } from './testing/infra';

/**
 * `npm run up`, after deploy/local/up.sh started the servers and exported
 * their addresses: starts every service and the gateway detached, on the
 * ports of docs/CONVENTIONS.md unless the environment says otherwise, and
 * prints where everything listens.
 */

interface Summary {
  urls: StackUrls;
  infra: string;
  /** Mailpit's web page, and its SMTP address. */
  mailpit?: { web: string; smtp: string };
  /** The bounce mailbox's web page, and its SMTP address. */
  bounceMailpit?: { web: string; smtp: string };
  logDir: string;
  notes: string[];
}

const repoRoot = path.resolve(__dirname, '../../..');
const stateDir = path.resolve(process.env.STATE_DIR?.trim() || path.join(repoRoot, '.state'));
const summaryFile = path.join(stateDir, 'stack.json');

async function main(): Promise<void> {
  const env = { ...process.env };
  const notes: string[] = [];
  // The gateway refuses DEV_AUTH_ENABLED=1 in production, so there the default stays off.
  if (!isSet(env.AUTH_ISSUER) && !isSet(env.DEV_AUTH_ENABLED) && env.NODE_ENV?.trim() !== 'production') {
    env.DEV_AUTH_ENABLED = '1';
    notes.push(
      'No identity provider configured (AUTH_ISSUER unset), so the gateway runs with DEV_AUTH_ENABLED=1:',
      'no token checks, every request acts as dev@example.com, a platform admin, and webhook providers',
      'without their credential take unverified posts. For development only;',
      'set AUTH_ISSUER and AUTH_AUDIENCE (or DEV_AUTH_ENABLED=0) to change that.',
    );
  }

  // Sending goes to the local Mailpit (deploy/local/up.sh started it) and the local recipient database, unless
  // the environment says otherwise. Runs sign one-click unsubscribe links and the gateway verifies them with one
  // key: a first run makes one and keeps it in the state folder, so the links of messages already sent stay valid.
  if (!isSet(env.SMTP_URL) && isSet(env.MAILPIT_SMTP_URL)) env.SMTP_URL = env.MAILPIT_SMTP_URL;
  // Bounces and feedback reports are read from the second Mailpit, often enough to see one arrive while watching.
  if (!isSet(env.BOUNCE_MAILBOX_URL) && isSet(env.BOUNCE_MAILPIT_POP3_URL)) {
    env.BOUNCE_MAILBOX_URL = env.BOUNCE_MAILPIT_POP3_URL;
    if (!isSet(env.BOUNCE_MAILBOX_INTERVAL_MS)) env.BOUNCE_MAILBOX_INTERVAL_MS = '5000';
  }
  if (!isSet(env.RECIPIENTS_DATABASE_URL)) {
    const recipients = new URL(infraEnv(env).databaseUrl);
    recipients.pathname = '/recipients';
    env.RECIPIENTS_DATABASE_URL = await ensureRecipientDatabase(recipients.toString());
  }
  if (!isSet(env.UNSUBSCRIBE_SIGNING_KEY)) env.UNSUBSCRIBE_SIGNING_KEY = keptSecret('unsubscribe-signing-key');
  if (!isSet(env.TRACKING_SIGNING_KEY)) env.TRACKING_SIGNING_KEY = keptSecret('tracking-signing-key');
  // Workspaces' own recipient database URLs are stored encrypted with this key: kept too, so they stay readable.
  if (!isSet(env.RECIPIENTS_ENCRYPTION_KEY)) env.RECIPIENTS_ENCRYPTION_KEY = keptSecret('recipients-encryption-key');

  const running = runningDetached(stateDir);
  if (running.length > 0) {
    const saved = readSummary();
    const list = running.map((p) => `${p.name} (pid ${p.pid})`).join(', ');
    if (running.length === SERVICE_NAMES.length + 1 && saved) {
      console.log(`The stack already runs: ${list}.`);
      printSummary(saved);
      return;
    }
    throw new Error(`part of the stack already runs: ${list}; run \`npm run down\` first`);
  }

  const logDir = path.join(stateDir, 'logs');
  console.error(`[up] starting ${[...SERVICE_NAMES, 'gateway'].join(', ')} (logs in ${logDir})`);
  const startedAt = Date.now();
  const stack = await startStack({ stateDir, logDir, env, ports: DEFAULT_PORTS, detached: true });
  console.error(`[up] all ready in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
  const infra = infraEnv(env);
  const summary: Summary = {
    urls: stack.urls,
    infra: `${infra.databaseUrl}  kafka ${infra.kafkaBrokers.join(',')}  ${infra.clickhouseUrl}`,
    mailpit: isSet(env.MAILPIT_API_URL) ? { web: env.MAILPIT_API_URL!.trim(), smtp: env.SMTP_URL ?? '' } : undefined,
    bounceMailpit: isSet(env.BOUNCE_MAILPIT_API_URL)
      ? { web: env.BOUNCE_MAILPIT_API_URL!.trim(), smtp: env.BOUNCE_MAILPIT_SMTP_URL ?? '' }
      : undefined,
    logDir,
    notes,
  };
  fs.writeFileSync(summaryFile, `${JSON.stringify(summary, null, 2)}\n`);
  printSummary(summary);
}

function printSummary({ urls, infra, mailpit, bounceMailpit, logDir, notes }: Summary): void {
  const pad = (text: string, width: number): string => text.padEnd(width);
  const lines = [
    '',
    'Mail platform is up.',
    `  Gateway     ${urls.gateway}`,
    `  API docs    ${urls.gateway}/docs`,
    `  Dashboard   ${urls.gateway}/dashboard`,
    `  Readiness   ${urls.gateway}/readyz   (in detail, and /metrics: ${urls.ops.gateway})`,
    '  Services    gRPC address       ops (/readyz, /metrics)',
    ...SERVICE_NAMES.map((name) => `    ${pad(name, 12)}${pad(urls.grpc[name], 19)}${urls.ops[name]}`),
    `  Servers     ${infra}`,
    ...(mailpit ? [`  Mailpit     ${mailpit.web}   (every message sent; SMTP ${mailpit.smtp})`] : []),
    ...(bounceMailpit ? [`  Bounces     ${bounceMailpit.web}   (the bounce mailbox; bounces arrive by SMTP ${bounceMailpit.smtp})`] : []),
    `  Logs        ${path.join(logDir, '<name>.log')}`,
    '  Stop        npm run down   (stops the services, the gateway and the servers)',
  ];
  if (notes.length > 0) lines.push('', ...notes.map((note, i) => `${i === 0 ? 'NOTE: ' : '      '}${note}`));
  console.log(lines.join('\n'));
}

function readSummary(): Summary | undefined {
  try {
    return JSON.parse(fs.readFileSync(summaryFile, 'utf8')) as Summary;
  } catch {
    return undefined;
  }
}

function isSet(value: string | undefined): boolean {
  return value !== undefined && value.trim() !== '';
}

/** A random secret kept in the state folder under `name` (readable by its owner only), made on first use. */
function keptSecret(name: string): string {
  const file = path.join(stateDir, name);
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  const secret = crypto.randomBytes(32).toString('base64url');
  fs.mkdirSync(stateDir, { recursive: true });
  fs.writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}

main().catch((error: unknown) => {
  console.error(`[up] ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
