import net from 'node:net';

/**
 * Whether a machine, not the recipient, fetched a pixel or followed a link (docs/api.md, "First-party
 * tracking", where each rule's evidence is given). Only what the request itself shows is used: its
 * user agent, and its client address (from the socket, or from X-Forwarded-For as TRUSTED_PROXIES allow).
 */
export interface TrackingRequest {
  userAgent?: string;
  ip?: string;
}

/**
 * Apple Mail Privacy Protection fetches every remote image when a message arrives, from Apple's own network
 * (17.0.0.0/8, all of it Apple's), with a user agent of `Mozilla/5.0` and nothing after it.
 */
const PRIVACY_PROXY_AGENT = /^Mozilla\/5\.0$/;
const APPLE_NETWORK = new net.BlockList();
APPLE_NETWORK.addSubnet('17.0.0.0', 8, 'ipv4');

/**
 * Link scanners of mail gateways and security suites, link previews and HTTP libraries name themselves in their
 * user agent; a mail client or browser never does.
 */
const SCANNER_AGENT =
  /bot\b|crawler|spider|scanner|preview|barracuda|proofpoint|mimecast|urldefense|safelinks|python-requests|python-urllib|curl\/|wget\/|go-http-client|okhttp|java\/|libwww|headlesschrome|phantomjs/i;

function inAppleNetwork(ip: string | undefined): boolean {
  if (ip === undefined) return false;
  const v4 = ip.startsWith('::ffff:') ? ip.slice(7) : ip;
  return net.isIPv4(v4) && APPLE_NETWORK.check(v4, 'ipv4');
}

const scanner = (request: TrackingRequest) => request.userAgent !== undefined && SCANNER_AGENT.test(request.userAgent);

/** An open a privacy proxy or a scanner made. */
export function isMachineOpen(request: TrackingRequest): boolean {
  const agent = request.userAgent?.trim();
  return (agent !== undefined && PRIVACY_PROXY_AGENT.test(agent)) || inAppleNetwork(request.ip) || scanner(request);
}

/** A click a scanner made. */
export function isMachineClick(request: TrackingRequest): boolean {
  return scanner(request);
}
