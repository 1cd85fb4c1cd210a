// Server-Sent Events over fetch(): EventSource cannot send the bearer key,
// and keys do not belong in URLs. The parser follows the SSE format (id,
// event, data, retry; comments ignored), and a dropped stream reconnects
// with backoff, sending Last-Event-ID so the daemon replays what was missed.

/** Reads one SSE response body, calling onMessage({id, event, data}) and
 * onData() on every chunk (heartbeats too). */
export async function readSse(body, onMessage, signal, onData) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let msg = { id: null, event: 'message', data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      onData?.();
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        // A CR at the end may be the first half of a CRLF split across chunks.
        if (nl === buf.length - 1 && buf[nl] === '\r') break;
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (msg.data.length) onMessage({ id: msg.id, event: msg.event, data: msg.data.join('\n') });
          msg = { id: null, event: 'message', data: [] };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'data') msg.data.push(val);
        else if (field === 'event') msg.event = val;
        else if (field === 'id') msg.id = val;
      }
      if (signal?.aborted) return;
    }
  } finally {
    reader.releaseLock();
  }
}

/** The daemon's default heartbeat (events.heartbeat), for a response
 * that does not name its own. */
export const DEFAULT_HEARTBEAT_MS = 15000;

/**
 * How long a stream whose heartbeat comes every `heartbeatMs` may stay
 * silent before it is dead: two heartbeats missed plus 10 s of slack for
 * a slow network (40 s at the default 15 s). `heartbeatMs` is the
 * `actiongate-heartbeat-ms` response header; absent or not a positive
 * number, the default heartbeat is assumed.
 */
export function staleMs(heartbeatMs) {
  const n = Number(heartbeatMs);
  const beat = heartbeatMs != null && heartbeatMs !== '' && Number.isFinite(n) && n > 0 ? n : DEFAULT_HEARTBEAT_MS;
  return 2 * beat + 10000;
}

/**
 * Follows GET /v1/events for as long as it is not stopped.
 * onEvent(event) gets each parsed event once, in seq order; onReset() is
 * called when the daemon no longer has the events after our last id (the
 * caller reloads its lists); onState(state, detail) reports 'connecting',
 * 'live' or 'reconnecting'; onOpen(first) each connection once it is
 * answered (first: the first one); onFatal(error) a refused key.
 */
export class EventFollower {
  constructor({ key, types, onEvent, onReset, onState, onOpen, onFatal }) {
    Object.assign(this, { key, types, onEvent, onReset, onState, onOpen, onFatal });
    this.lastId = null;
    this.opens = 0;
    this.stopped = false;
    this.controller = null;
    this.staleMs = staleMs(null);
  }

  start() {
    this.loop();
  }

  stop() {
    this.stopped = true;
    this.controller?.abort();
  }

  async loop() {
    let delay = 250;
    while (!this.stopped) {
      this.controller = new AbortController();
      const headers = { authorization: `Bearer ${this.key}`, accept: 'text/event-stream' };
      if (this.lastId !== null) headers['last-event-id'] = this.lastId;
      let why = 'the stream ended';
      try {
        const q = this.types ? `?types=${encodeURIComponent(this.types)}` : '';
        const resp = await fetch(`/v1/events${q}`, { headers, signal: this.controller.signal, cache: 'no-store' });
        if (resp.status === 401 || resp.status === 403) {
          this.stopped = true;
          this.onFatal?.(new Error(`the event stream refused the key (HTTP ${resp.status})`));
          return;
        }
        if (!resp.ok || !resp.body) throw new Error(`HTTP ${resp.status}`);
        // The daemon names its heartbeat period: a stream silent for
        // longer than staleMs() of it is dead even if no error says so,
        // and is not called live.
        this.staleMs = staleMs(resp.headers.get('actiongate-heartbeat-ms'));
        this.onState?.('live');
        // The daemon subscribed before answering: anything after this is ours.
        // Whether this is the first connection: after a break, events may
        // have been missed even where none had arrived before it.
        await this.onOpen?.(this.opens++ === 0);
        delay = 250;
        const stale = this.staleMs;
        const controller = this.controller;
        let seen = Date.now();
        const watchdog = setInterval(() => {
          if (Date.now() - seen > stale) { why = 'no heartbeat'; controller.abort(); }
        }, 1000);
        try {
          await readSse(resp.body, (m) => this.dispatch(m), controller.signal, () => { seen = Date.now(); });
        } finally {
          clearInterval(watchdog);
        }
      } catch (e) {
        if (this.stopped) return;
        if (why !== 'no heartbeat') why = String(e.message || e);
      }
      if (this.stopped) return;
      this.onState?.('reconnecting', why);
      await new Promise((r) => setTimeout(r, delay + Math.random() * delay / 2));
      delay = Math.min(delay * 2, 5000);
    }
  }

  dispatch(m) {
    if (m.event === 'reset') {
      this.onReset?.();
      return;
    }
    if (m.id !== null && m.id !== '') this.lastId = m.id;
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    this.onEvent?.(ev);
  }
}
