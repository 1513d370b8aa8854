import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';
import { composeMime, type MimeMessage } from '../src/domain/mime';

/** What composeMime writes: RFC 5322/2045 lines, and a message that reads back as what was given. */

const base: MimeMessage = {
  from: { name: 'News Team', address: 'news@sender.example.com' },
  replyTo: 'support@sender.example.com',
  to: 'ann@example.com',
  subject: 'Spring news',
  html: '<p>Hello <b>Ann</b></p>\n',
  text: 'Hello Ann\n',
  messageId: 'run-1.abc@sender.example.com',
  headers: {
    'List-Unsubscribe': '<https://t.example.com/u/abc>',
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    'X-SMTPAPI': '{"category":["spring"],"unique_args":{"variant_id":"v-1","run_id":"r-1","message_id":"m=1@x.example.com"}}',
  },
  date: new Date('2026-03-05T09:07:03Z'),
};

/** Checks the raw lines, then parses. */
async function compose(message: MimeMessage): Promise<{ raw: string; parsed: ParsedMail }> {
  const buffer = composeMime(message);
  const raw = buffer.toString('latin1');
  expect(raw).toMatch(/\r\n$/);
  expect(raw).not.toMatch(/\r(?!\n)|(?<!\r)\n/);
  expect(raw).not.toMatch(/[^\t\r\n\x20-\x7e]/);
  const blank = raw.indexOf('\r\n\r\n');
  const lengths = (text: string): number => Math.max(...text.split('\r\n').map((line) => line.length));
  expect(lengths(raw.slice(0, blank))).toBeLessThanOrEqual(998);
  // The body: quoted-printable lines and the parts' short headers.
  expect(lengths(raw.slice(blank + 4))).toBeLessThanOrEqual(76);
  return { raw, parsed: await simpleParser(buffer) };
}

const address = (value: AddressObject | AddressObject[] | undefined) => (Array.isArray(value) ? value : value?.value);
/** Parsed text has LF line breaks: in MIME a line break is CRLF, whichever the source had. */
const lf = (text: string) => text.replace(/\r\n/g, '\n');

function expectReadBack(parsed: ParsedMail, message: MimeMessage): void {
  expect(address(parsed.from)).toEqual([{ name: message.from.name ?? '', address: message.from.address }]);
  expect(address(parsed.to)).toEqual([{ name: '', address: message.to }]);
  expect(address(parsed.replyTo)).toEqual(message.replyTo === null ? undefined : [{ name: '', address: message.replyTo }]);
  // mailparser reads an empty Subject as none.
  expect(parsed.subject ?? '').toBe(message.subject);
  expect(parsed.messageId).toBe(`<${message.messageId}>`);
  // Empty is absent. Without a text part mailparser makes the text of the HTML.
  expect(parsed.html).toBe(message.html ? lf(message.html) : false);
  if (message.text || !message.html) expect(parsed.text ?? '').toBe(lf(message.text ?? ''));
  for (const [name, value] of Object.entries(message.headers)) {
    expect(parsed.headerLines.find((line) => line.key === name.toLowerCase())?.line).toBe(`${name}: ${value}`);
  }
}

test('an ASCII message: the headers as given, Date in RFC 5322 form, text then HTML as multipart/alternative', async () => {
  const { raw, parsed } = await compose(base);
  expectReadBack(parsed, base);
  expect(parsed.date).toEqual(base.date);
  expect(raw).toContain('\r\nDate: Thu, 05 Mar 2026 09:07:03 +0000\r\n');
  expect(raw).toMatch(/^From: "News Team" <news@sender\.example\.com>\r\nTo: ann@example\.com\r\nReply-To: .*\r\nSubject: Spring news\r\n/);
  expect(raw).toContain(`\r\nX-SMTPAPI: ${base.headers['X-SMTPAPI']}\r\n`);
  expect(raw).toContain('\r\nMIME-Version: 1.0\r\n');
  expect(raw.indexOf('Content-Type: text/plain; charset=utf-8')).toBeLessThan(raw.indexOf('Content-Type: text/html; charset=utf-8'));
  expect(raw.match(/Content-Transfer-Encoding: quoted-printable/g)).toHaveLength(2);
});

test('no display name or Reply-To; a name with specials is quoted; without a date it is now', async () => {
  const message = { ...base, from: { name: null, address: 'news@sender.example.com' }, replyTo: null, date: undefined };
  const before = Math.floor(Date.now() / 1000) * 1000;
  const { raw, parsed } = await compose(message);
  expectReadBack(parsed, message);
  expect(raw).toMatch(/^From: news@sender\.example\.com\r\n/);
  expect(raw).not.toContain('Reply-To');
  expect(parsed.date!.getTime()).toBeGreaterThanOrEqual(before);
  expect(parsed.date!.getTime()).toBeLessThanOrEqual(Date.now());
  for (const name of ['Smith, John "JJ" \\ <Sales>', 'Looks =?UTF-8?B?ZW5jb2RlZA==?= but is not', '  spaced  out ', '']) {
    const named = { ...base, from: { name, address: 'news@sender.example.com' } };
    expectReadBack((await compose(named)).parsed, { ...named, from: { name: name || null, address: named.from.address } });
  }
});

test('non-ASCII subject and name are encoded words of whole characters, at most 75 each; a long subject folds', async () => {
  const subject = 'Café déjà vu – 🎉👩‍👩‍👧 日本語のニュース '.repeat(12).slice(0, 300);
  const message = { ...base, subject, from: { name: 'Zoë “Naïve” 李小龍 🚀', address: 'news@sender.example.com' } };
  const { raw, parsed } = await compose(message);
  expectReadBack(parsed, message);
  const words = raw.match(/=\?UTF-8\?B\?[^?]*\?=/g)!;
  expect(words.length).toBeGreaterThan(8);
  for (const word of words) {
    expect(word.length).toBeLessThanOrEqual(75);
    // Each decodes alone to valid UTF-8.
    expect(Buffer.from(Buffer.from(word.slice(10, -2), 'base64').toString()).equals(Buffer.from(word.slice(10, -2), 'base64'))).toBe(true);
  }
  const head = raw.slice(0, raw.indexOf('\r\n\r\n')).split('\r\n');
  for (const line of head.filter((line) => !line.startsWith('X-SMTPAPI'))) expect(line.length).toBeLessThanOrEqual(78);
  // A long ASCII subject is folded at its spaces.
  const long = { ...base, subject: 'All the news that fits, and then some more of it '.repeat(8).trim() };
  const folded = await compose(long);
  expectReadBack(folded.parsed, long);
  expect(folded.raw).toMatch(/\r\nSubject: All the news[^\r]*\r\n [^\r]*\r\n /);
});

test('HTML only, text only, and neither (empty is absent) are single parts; both are multipart/alternative', async () => {
  const cases: [Partial<MimeMessage>, RegExp][] = [
    [{ text: undefined }, /\r\nContent-Type: text\/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n/],
    [{ html: undefined }, /\r\nContent-Type: text\/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n/],
    [
      { html: undefined, text: undefined },
      /\r\nContent-Type: text\/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n$/,
    ],
    [{ html: '', text: '' }, /\r\nContent-Type: text\/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n$/],
    [{ text: '' }, /\r\nContent-Type: text\/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n/],
    [{}, /\r\nContent-Type: multipart\/alternative; boundary="[^"]+"\r\n/],
  ];
  for (const [change, type] of cases) {
    const message = { ...base, ...change };
    const { raw, parsed } = await compose(message);
    expectReadBack(parsed, message);
    expect(raw).toMatch(type);
    expect(raw.includes('multipart')).toBe(Boolean(message.html && message.text));
  }
});

test('quoted-printable: long lines, trailing whitespace, = signs, CRLF, LF and lone CR read back as written', async () => {
  const text = [
    'x'.repeat(77),
    `${'word '.repeat(250)}end`,
    'é'.repeat(1200),
    'trailing spaces   ',
    'trailing tab\t',
    ' \t ',
    '==3D=\r\n= =',
    '.leading dot',
    'From the start',
    'lone\rCR and CR at the end\r',
  ].join('\n');
  const html = `<p>${'a=b&amp;c '.repeat(300)}</p>\r\n<p>last line without a break, ending in a space `;
  const { raw, parsed } = await compose({ ...base, text, html });
  // A lone CR is no line break: it is kept as =0D and reads back as a CR.
  expectReadBack(parsed, { ...base, text, html });
  expect(raw).toContain('lone=0DCR');
  expect(raw).toContain('trailing spaces  =20\r\n');
  expect(raw).toContain('trailing tab=09\r\n');
  const single = await compose({ ...base, html: undefined, text: 'no line break at the end' });
  expect(single.parsed.text).toBe('no line break at the end');
  expect(single.raw).toMatch(/\r\n\r\nno line break at the end=\r\n$/);
});

test('a line that looks like the boundary stays content', async () => {
  const boundary = /boundary="(=_[0-9a-f]+_)([0-9a-z]+)"/.exec((await compose(base)).raw)!;
  const next = `${boundary[1]}${(parseInt(boundary[2], 36) + 1).toString(36)}`;
  const text = `before\n--${next}\nContent-Type: text/html\n\n--${next}--\nafter`;
  const { raw, parsed } = await compose({ ...base, text, html: `<pre>${text}</pre>` });
  expectReadBack(parsed, { ...base, text, html: `<pre>${text}</pre>` });
  expect(raw).toContain(`boundary="${next}"`);
  expect(raw.split(`--${next}`)).toHaveLength(4);
});

test('a 2 MB body', async () => {
  const text = 'Zoë’s 2 MB of news = 🎉, with a line break now and then.\n'.repeat(33_000);
  const html = `<div>${text.replace(/\n/g, ' ')}</div>`;
  expect(Buffer.byteLength(html)).toBeGreaterThan(2_000_000);
  expectReadBack((await compose({ ...base, text, html })).parsed, { ...base, text, html });
});

test('custom headers are written as given, and one past 998 characters folds at spaces or else after commas', async () => {
  const spaced = `tag-a, ${Array.from({ length: 200 }, (_, n) => `tag-${n}`).join(' ')}`;
  const json = JSON.stringify({ unique_args: Object.fromEntries(Array.from({ length: 100 }, (_, n) => [`key${n}`, `value-${n}`])) });
  const message = { ...base, headers: { ...base.headers, 'X-Tags': spaced, 'X-SMTPAPI': json } };
  const { raw, parsed } = await compose(message);
  expect(json.length).toBeGreaterThan(998);
  expect(parsed.headers.get('x-tags')).toBe(spaced);
  // After a comma the fold adds a space: JSON between its tokens does not mind.
  expect(JSON.parse(parsed.headers.get('x-smtpapi') as string)).toEqual(JSON.parse(json));
  expect(raw).toMatch(/\r\nX-SMTPAPI: \{[^\r]*,\r\n "key/);
  // Nor does a value without either pass 998 (compose checks the lines); only spaces are added.
  for (const length of [997, 998, 999, 1996, 1997, 5000]) {
    for (const value of ['x'.repeat(length), `${'y'.repeat(990)},${'z'.repeat(length)}`, `${'a'.repeat(length)} b`]) {
      const folded = await compose({ ...base, headers: { 'X-Long': value } });
      expect(folded.parsed.headerLines.find((line) => line.key === 'x-long')!.line.replace(/\r\n| /g, '')).toBe(
        `X-Long:${value.replace(/ /g, '')}`,
      );
    }
  }
});

/** Mulberry32: the same strings on every run. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('random unicode strings read back as written', async () => {
  const next = random(20260305);
  const pools = [' \t=.-\r\n', 'abcXYZ019<>"\\,;:@()', 'àéîõüßçñ€', '日本語中文한국어', '😀🎉👩‍👧🚀', 'אבגعربي'];
  const string = (length: number, pick = pools) => {
    let result = '';
    for (let i = 0; i < length; i++) {
      const pool = [...pick[Math.floor(next() * pick.length)]];
      result += next() < 0.05 ? String.fromCodePoint(1 + Math.floor(next() * 0xd7fe)) : pool[Math.floor(next() * pool.length)];
    }
    return result;
  };
  for (let i = 0; i < 300; i++) {
    const message: MimeMessage = {
      ...base,
      from: { name: string(Math.floor(next() * 40), pools.slice(1)).trim() || null, address: 'news@sender.example.com' },
      subject: string(Math.floor(next() * 200)),
      text: next() < 0.8 ? string(Math.floor(next() * 2000)) : undefined,
      html: next() < 0.8 ? string(Math.floor(next() * 2000)) : undefined,
    };
    expectReadBack((await compose(message)).parsed, message);
  }
});
