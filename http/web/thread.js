// A thread (#/messages/{id}): the message, then its replies oldest first,
// paged on the replies' cursor, with a box to reply in; #/messages/{id}/reply
// opens it with the focus in that box. Replies written meanwhile arrive
// from a live stream of its own, open while the thread is shown.

import { h, $, showError, clearError, busy, grow } from './dom.js';
import { liveStream } from './stream.js';
import { article, authorName, repliesLink, threadLink } from './message.js';

const PAGE = 20;

export function threadPage({ session, announce }) {
  const view = $('#thread-view');
  const root = $('#thread-root');
  const list = $('#thread-replies');
  const more = $('#thread-more');
  const form = $('#reply-form');
  const box = form.elements.content;
  let id = null; // the thread's message
  let next = null;
  let stream = null;
  let generation = 0; // answers about an earlier thread are dropped
  let queued = null; // live events that arrive while the first page loads
  const shown = new Map(); // reply id → <li>

  function render(m) {
    const meta = `t${m.id}-meta`;
    const li = h('li', { class: 'msg', 'data-id': m.id }, article(m, meta));
    $('.head', li).append(h('div', { class: 'actions' },
      repliesLink(m),
      h('a', { href: `${threadLink(m.id)}/reply`, class: 'reply', 'aria-describedby': meta }, 'Reply')));
    return li;
  }

  function showRoot(m) {
    root.replaceChildren(h('div', { class: 'msg root' }, article(m, 'thread-meta')));
  }

  // put shows a reply: in place when shown, else at the end, unless
  // older replies are still to be paged in, whose last page brings it.
  function put(m) {
    const old = shown.get(m.id);
    const li = render(m);
    if (old) old.replaceWith(li);
    else if (!next) list.append(li);
    else return;
    shown.set(m.id, li);
    $('#thread-empty').hidden = true;
  }

  function apply(ev) {
    if (queued) return void queued.push(ev);
    let m;
    try {
      m = ev.data ? JSON.parse(ev.data) : {};
    } catch {
      return;
    }
    switch (ev.type) {
      case 'message.created':
        if (m.replyTo === id && !shown.has(m.id)) {
          put(m);
          announce(`New reply from ${authorName(m.user)}.`);
        }
        break;
      case 'message.updated':
        if (m.id === id) showRoot(m);
        else if (shown.has(m.id)) put(m);
        break;
      case 'message.deleted':
        if (m.id === id) root.replaceChildren(h('p', { class: 'muted' }, 'This message was deleted.'));
        shown.get(m.id)?.remove();
        shown.delete(m.id);
        break;
      case 'reset':
        load();
        break;
    }
  }

  async function loadPage() {
    const gen = generation;
    list.setAttribute('aria-busy', 'true');
    try {
      const params = new URLSearchParams({ limit: PAGE });
      if (next) params.set('cursor', next);
      const { data } = await session.call('GET', `/api/messages/${id}/replies?${params}`);
      if (gen !== generation) return;
      next = data.next;
      for (const m of data.items) if (!shown.has(m.id)) {
        const li = render(m);
        list.append(li);
        shown.set(m.id, li);
      }
      $('#thread-empty').hidden = shown.size > 0;
    } catch (err) {
      if (gen === generation) showError(view, err);
    } finally {
      if (gen === generation) {
        list.removeAttribute('aria-busy');
        more.hidden = !next;
      }
    }
  }

  // load shows the thread afresh: the message, then the first page of
  // replies, then what the stream brought meanwhile.
  async function load() {
    const gen = ++generation;
    queued ??= [];
    next = null;
    shown.clear();
    list.replaceChildren();
    root.replaceChildren();
    clearError(view);
    try {
      const { data } = await session.call('GET', `/api/messages/${id}`);
      if (gen === generation) showRoot(data);
    } catch (err) {
      if (gen !== generation) return;
      // A deleted message's replies are still listed.
      if (err.status === 404) root.replaceChildren(h('p', { class: 'muted' }, 'This message was deleted, or never existed.'));
      else showError(view, err);
    }
    if (gen !== generation) return;
    await loadPage();
    if (gen !== generation) return;
    const pending = queued;
    queued = null;
    pending.forEach(apply);
  }

  // connect opens the thread's stream, resolving once it is open, has
  // failed, or is slow to open, which must not hold up the thread.
  function connect() {
    stream?.close();
    return new Promise((opened) => {
      setTimeout(opened, 3000);
      stream = liveStream({
        token: session.token,
        params: new URLSearchParams(),
        onEvent: apply,
        onState: (state) => {
          opened();
          if (state === 'unauthorized') session.ended();
        },
      });
    });
  }

  more.addEventListener('click', loadPage);

  // Enter sends, and so does Ctrl+Enter (Cmd+Enter); Shift+Enter starts a
  // new line.
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  grow(box);

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    busy(form, async () => {
      try {
        const { data } = await session.call('POST', '/api/messages', { body: { content: box.value, replyTo: id } });
        clearError(form);
        box.value = '';
        box.dispatchEvent(new Event('input'));
        if (data.replyTo === id) put(data);
        announce('Reply posted.');
        box.focus();
      } catch (err) {
        showError(form, err);
      }
    });
  });

  return {
    async open(messageId, { reply = false } = {}) {
      const same = messageId === id && stream;
      id = messageId;
      if (reply) box.focus();
      if (same) return;
      box.value = '';
      clearError(form);
      generation++;
      queued = [];
      await connect();
      await load();
      if (reply && messageId === id) box.focus();
    },
    stop() {
      stream?.close();
      stream = null;
      id = null;
      generation++;
      shown.clear();
      list.replaceChildren();
      root.replaceChildren();
      form.reset();
      clearError(form);
      clearError(view);
    },
  };
}
