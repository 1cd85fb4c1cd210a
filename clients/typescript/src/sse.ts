/**
 * An incremental Server-Sent Events parser (the WHATWG event-stream rules):
 * text arrives in chunks cut anywhere, also between `\r` and `\n`.
 */
import type { Event } from './models.js';

/** One dispatched message. */
export interface Message {
  id: string | null;
  event: string;
  data: string;
}

export class SseParser {
  private buf = '';
  private data: string[] = [];
  private event = '';
  private id: string | null = null;

  /** The messages the chunk completes. */
  *feed(chunk: string): Generator<Message> {
    this.buf += chunk;
    for (;;) {
      const i = lineEnd(this.buf);
      if (i < 0) return;
      const line = this.buf.slice(0, i);
      const step = this.buf.startsWith('\r\n', i) ? 2 : 1;
      this.buf = this.buf.slice(i + step);
      const msg = this.line(line);
      if (msg) yield msg;
    }
  }

  private line(line: string): Message | null {
    if (line === '') {
      if (this.data.length === 0 && !this.event) {
        this.id = null;
        return null;
      }
      const msg = { id: this.id, event: this.event || 'message', data: this.data.join('\n') };
      this.data = [];
      this.event = '';
      this.id = null;
      return msg;
    }
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'data') this.data.push(value);
    else if (name === 'event') this.event = value;
    else if (name === 'id' && !value.includes('\0')) this.id = value;
    return null;
  }
}

function lineEnd(buf: string): number {
  const n = buf.indexOf('\n');
  const r = buf.indexOf('\r');
  if (r < 0) return n;
  // A trailing \r may be the first half of \r\n: wait for more.
  if (r === buf.length - 1) return n >= 0 && n < r ? n : -1;
  return n < 0 || r < n ? r : n;
}

/** The event a message carries, or null for one that carries none. */
export function toEvent(msg: Message): Event | null {
  let data: unknown;
  try {
    data = msg.data ? JSON.parse(msg.data) : {};
  } catch {
    data = { text: msg.data };
  }
  const obj: Record<string, unknown> =
    data !== null && typeof data === 'object' && !Array.isArray(data) ? (data as Record<string, unknown>) : { value: data };
  if (msg.event === 'reset') return { seq: null, type: 'reset', data: obj };
  if (msg.id === null || !/^\d+$/.test(msg.id)) return null;
  const kind = obj['type'];
  return { seq: Number(msg.id), type: typeof kind === 'string' ? kind : msg.event, data: obj };
}

/** Reconnection pauses: 0.25 s doubling to 10 s, reset once data flows. */
export class Backoff {
  private current: number;
  constructor(
    private readonly first = 250,
    private readonly cap = 10_000,
  ) {
    this.current = first;
  }
  next(): number {
    const v = this.current;
    this.current = Math.min(this.current * 2, this.cap);
    return v;
  }
  reset(): void {
    this.current = this.first;
  }
}
