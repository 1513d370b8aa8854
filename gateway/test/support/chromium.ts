import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';

/** Debian's chromium, which playwright-core drives. */
const CHROMIUM = '/usr/bin/chromium';
const INSTALL_SCRIPT = path.resolve(__dirname, '..', '..', '..', 'deploy', 'local', 'install-chromium.sh');
/** Flags that keep Chromium off the network (this machine reaches only package registries). */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A headless Chromium for the dashboard tests, installed first if the machine has none. */
export async function launchChromium(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) execFileSync('bash', [INSTALL_SCRIPT], { stdio: 'inherit' });
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}
