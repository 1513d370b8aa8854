/**
 * First-party tracking in a message's HTML part (docs/api.md, "First-party tracking"): each link to an http or
 * https address but the unsubscribe link goes through the gateway's /t/c/, and a 1×1 image from /t/o/ marks an
 * open. Applied to the rendered HTML, so what a recipient's fields put into the links is tracked as sent.
 */
export interface MessageTracking {
  /** The open pixel's URL; absent: opens are not tracked. */
  openUrl?: string;
  /** The tracked URL of a link; absent: clicks are not tracked. */
  clickUrl?: (link: string) => string;
  /** Never tracked: one-click unsubscribe must reach the gateway as it is. */
  unsubscribeUrl: string;
}

const ANCHOR = /<a\b(?:[^>"']|"[^"]*"|'[^']*')*>/gi;
const HREF = /(\shref\s*=\s*)(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))/i;
const BODY_END = /<\/body\s*>/gi;
const NAMED_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** An attribute's value as a browser reads it: character references decoded. */
function attributeValue(text: string): string {
  return text.replace(/&(?:#(\d+)|#x([0-9a-f]+)|(amp|lt|gt|quot|apos));/gi, (whole, decimal?: string, hex?: string, name?: string) => {
    if (name) return NAMED_ENTITIES[name.toLowerCase()];
    const code = decimal !== undefined ? Number(decimal) : parseInt(hex!, 16);
    return code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
}

const escapeAttribute = (text: string): string => text.replace(/&/g, '&amp;').replace(/"/g, '&quot;');

function trackLinks(html: string, tracking: MessageTracking, clickUrl: (link: string) => string): string {
  return html.replace(ANCHOR, (tag) => {
    const href = HREF.exec(tag);
    if (!href) return tag;
    const link = attributeValue((href[2] ?? href[3] ?? href[4]).trim());
    if (!/^https?:\/\//i.test(link) || link === tracking.unsubscribeUrl) return tag;
    return `${tag.slice(0, href.index)}${href[1]}"${escapeAttribute(clickUrl(link))}"${tag.slice(href.index + href[0].length)}`;
  });
}

function addPixel(html: string, openUrl: string): string {
  const pixel = `<img src="${escapeAttribute(openUrl)}" width="1" height="1" alt="">`;
  let last = -1;
  for (const match of html.matchAll(BODY_END)) last = match.index;
  return last < 0 ? `${html}${pixel}` : `${html.slice(0, last)}${pixel}${html.slice(last)}`;
}

export function addTracking(html: string, tracking: MessageTracking): string {
  const linked = tracking.clickUrl ? trackLinks(html, tracking, tracking.clickUrl) : html;
  return tracking.openUrl ? addPixel(linked, tracking.openUrl) : linked;
}
