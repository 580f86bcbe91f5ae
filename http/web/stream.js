// The live stream, GET /api/messages/stream (Server-Sent Events). EventSource
// cannot send a bearer token, so this reads the response body itself.

import { answered, serverReached } from './api.js';
import { sleep } from './dom.js';

// sseParser returns a function to feed text chunks to; it calls emit with
// { type, data, id } for each event and { retry } when the server sets the
// reconnection delay. It follows the HTML standard's parsing rules: lines
// end in CRLF, LF or CR (possibly split across chunks), ":" starts a
// comment, one space after the colon is dropped, data lines are joined with
// newlines. Unlike EventSource it also passes on an event with a type but
// no data, such as a bare "reset". A block with an id and nothing else
// moves the position a reconnection resumes from; it is passed on as { id }.
export function sseParser(emit) {
  let buf = '';
  let type = '';
  let data = [];
  let id = null;
  let idSeen = false;
  const line = (l) => {
    if (l === '') {
      if (data.length || type) emit({ type: type || 'message', data: data.join('\n'), id });
      else if (idSeen) emit({ id });
      type = '';
      data = [];
      idSeen = false;
      return;
    }
    if (l[0] === ':') return;
    const i = l.indexOf(':');
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? '' : l.slice(i + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id' && !value.includes('\0')) { id = value; idSeen = true; }
    else if (field === 'retry' && /^\d+$/.test(value)) emit({ retry: Number(value) });
  };
  return (chunk) => {
    buf += chunk;
    for (;;) {
      const m = /\r\n|\n|\r/.exec(buf);
      // A CR at the very end may be the first half of a CRLF.
      if (!m || (m[0] === '\r' && m.index === buf.length - 1)) return;
      line(buf.slice(0, m.index));
      buf = buf.slice(m.index + m[0].length);
    }
  };
}

// silenceFor is how long a stream may say nothing before it is taken for
// dead: 2.5 times the keep-alive interval the server announces, so one
// late keep-alive is not enough, or a minute when it announces none. A
// connection can die without a word — a laptop that slept, a NAT that
// forgot it — and only silence tells.
const silenceFor = (res) => {
  const heartbeat = Number(res?.headers.get('Herald-Stream-Heartbeat'));
  return heartbeat > 0 ? heartbeat * 2.5 : 60000;
};

// liveStream keeps a stream open until close(): on a dropped or silent
// connection it reconnects with backoff, sending Last-Event-ID so nothing
// is missed. It stops for good on 401 (the token is gone) and on any other
// refusal that retrying cannot fix, telling onState why. onState hears
// 'live', 'reconnecting', 'offline' (the server did not answer at all),
// 'unauthorized' and 'unavailable'.
export function liveStream({ token, params, onEvent, onState }) {
  const abort = new AbortController();
  const { signal } = abort;
  let lastId = null;
  let delay = 1000;
  let retry = 0; // the server's retry: value, when it sent one
  (async () => {
    while (!signal.aborted) {
      let wait = 0;
      let offline = false;
      // One connection: aborted by close() or by the watchdog.
      const conn = new AbortController();
      const hangUp = () => conn.abort();
      signal.addEventListener('abort', hangUp, { once: true });
      let watchdog = setTimeout(hangUp, silenceFor(null));
      const heard = (res) => {
        clearTimeout(watchdog);
        watchdog = setTimeout(hangUp, silenceFor(res));
      };
      try {
        const headers = { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' };
        if (lastId !== null) headers['Last-Event-ID'] = lastId;
        const res = await fetch(`/api/messages/stream?${params}`, { headers, signal: conn.signal, cache: 'no-store' }).catch((err) => {
          // No answer at all, unless the watchdog or close() hung up.
          offline = !conn.signal.aborted;
          throw err;
        });
        answered(res);
        if (res.status === 401) return onState('unauthorized');
        if (res.ok) {
          heard(res);
          onState('live');
          const feed = sseParser((ev) => {
            if (ev.retry !== undefined) return void (retry = ev.retry);
            if (ev.id !== null) lastId = ev.id;
            if (ev.type === undefined) return; // only a position
            delay = 1000; // the connection works: start over on the next drop
            onEvent(ev);
          });
          const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            heard(res);
            feed(value);
          }
        } else if (res.status === 429 || res.status >= 500) {
          // Seconds; a date (which Herald never sends) counts as none.
          wait = (Number(res.headers.get('Retry-After')) || 0) * 1000;
        } else {
          return onState('unavailable');
        }
      } catch {
        if (signal.aborted) return;
      } finally {
        clearTimeout(watchdog);
        signal.removeEventListener('abort', hangUp);
      }
      if (offline) serverReached(false);
      onState(offline ? 'offline' : 'reconnecting');
      // A server that did not answer may be back long before the backoff
      // ends: when the browser is online again, or another request got an
      // answer, try at once. A server that answered "later" is left alone.
      const wakeOn = offline ? ['online', 'herald:reachable'] : [];
      await sleep(Math.max(wait, retry, delay) * (0.8 + Math.random() * 0.4), signal, wakeOn);
      delay = Math.min(delay * 2, 30000);
    }
  })();
  return { close: () => abort.abort() };
}
