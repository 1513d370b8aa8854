import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/** Parser and timeout errors that are not a plain malformed request (400), by Node's error code. */
const ANSWERS: Record<string, [status: number, detail: string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request header fields too large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Request chunk extensions too large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request timeout'],
};

/**
 * The HTTP server's `clientError` handler. Node's HTTP parser refuses some
 * requests before Express sees them (a NUL in a header, a malformed request
 * line, a request head over 16 KB, a request not received in time) and would
 * answer with a bare status line; this answers in the API's format
 * instead, then closes the connection, since the rest of its bytes cannot be
 * read as HTTP. As Node's own handler does, it writes nothing when the socket
 * is not writable or a response was already started on it (the bytes would
 * corrupt that response).
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent: boolean } | null })._httpMessage;
  if (error.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, detail] = ANSWERS[error.code ?? ''] ?? [400, 'Invalid HTTP request'];
  const body = JSON.stringify({ detail });
  const head = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy());
}
