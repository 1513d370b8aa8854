import net from 'node:net';
import tls from 'node:tls';
import { InputSignal } from './input-signal';

/**
 * A small POP3 client (RFC 1939: USER/PASS, UIDL, RETR, DELE, QUIT; `pop3s:`
 * is TLS from the start, RFC 8314), for the bounce mailbox. Not npm's
 * node-pop3 (0.11, the maintained one): it tells a reply's end only when the
 * terminating ".\r\n" arrives at the end of one TCP chunk, takes "+OK"/"-ERR"
 * from a chunk's first byte, and leaves dot-stuffed lines stuffed, so a
 * message split unluckily across reads hangs or arrives altered. One command
 * at a time: each call waits for its reply before the next is sent.
 */
export class Pop3Client {
  private received: Buffer = Buffer.alloc(0);
  private readonly input = new InputSignal();

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.received = this.received.length === 0 ? chunk : Buffer.concat([this.received, chunk]);
      this.input.signal();
    });
    socket.on('error', (error) => this.input.fail(error));
    socket.on('close', () => this.input.fail(new Error('the POP3 server closed the connection')));
  }

  /** Connects and logs in with the URL's user and password; every reply must come within `timeoutMs`. */
  static async open(url: URL, timeoutMs: number): Promise<Pop3Client> {
    const secure = url.protocol === 'pop3s:';
    const port = url.port ? Number(url.port) : secure ? 995 : 110;
    // SNI takes host names only (RFC 6066); the certificate is checked against the host either way.
    const servername = net.isIP(url.hostname) ? undefined : url.hostname;
    const socket = secure ? tls.connect({ host: url.hostname, port, servername }) : net.connect({ host: url.hostname, port });
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`the POP3 server did not answer within ${timeoutMs} ms`)));
    const client = new Pop3Client(socket);
    try {
      await client.reply();
      await client.command(`USER ${decodeURIComponent(url.username)}`);
      await client.command(`PASS ${decodeURIComponent(url.password)}`, 'PASS ***');
      return client;
    } catch (error) {
      client.close();
      throw error;
    }
  }

  /** The mailbox's messages: their numbers in this session and their unique ids, which stay the same across sessions. */
  async list(): Promise<{ number: number; uid: string }[]> {
    await this.command('UIDL');
    const body = (await this.multiline()).toString('latin1');
    return body
      .split('\r\n')
      .filter((line) => line !== '')
      .map((line) => {
        const [number, uid] = line.split(' ');
        return { number: Number(number), uid };
      });
  }

  /** The message as it is stored (its bytes, dot-stuffing undone). */
  async retrieve(number: number): Promise<Buffer> {
    await this.command(`RETR ${number}`);
    return this.multiline();
  }

  /** Marks the message deleted: the server removes it at QUIT. */
  async delete(number: number): Promise<void> {
    await this.command(`DELE ${number}`);
  }

  /** Ends the session, which makes the deletions take effect. */
  async quit(): Promise<void> {
    await this.command('QUIT');
    this.socket.end();
  }

  close(): void {
    this.socket.destroy();
  }

  private async command(line: string, shown = line): Promise<string> {
    this.socket.write(`${line}\r\n`);
    const answer = await this.reply();
    if (!answer.startsWith('+OK')) throw new Error(`POP3 ${shown.split(' ')[0]}: ${answer}`);
    return answer;
  }

  /** The next reply line. */
  private async reply(): Promise<string> {
    for (;;) {
      const end = this.received.indexOf('\r\n');
      if (end >= 0) {
        const line = this.received.subarray(0, end).toString('utf8');
        this.received = this.received.subarray(end + 2);
        return line;
      }
      await this.input.next();
    }
  }

  /** A multi-line reply's body, up to the line holding only ".". */
  private async multiline(): Promise<Buffer> {
    for (;;) {
      const empty = this.received.subarray(0, 3).toString('latin1') === '.\r\n';
      const end = empty ? 0 : this.received.indexOf('\r\n.\r\n');
      if (end >= 0) {
        const body = empty ? '' : this.received.subarray(0, end + 2).toString('latin1');
        this.received = this.received.subarray(empty ? 3 : end + 5);
        return Buffer.from(body.replace(/^\.\./, '.').replace(/\r\n\.\./g, '\r\n.'), 'latin1');
      }
      await this.input.next();
    }
  }
}
