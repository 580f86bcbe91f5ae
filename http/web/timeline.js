// The timeline: messages newest first, paged on the search cursor as the
// reader scrolls, kept current by the live stream; posting, searching, and
// editing and deleting one's own messages. Administrators may also delete
// other people's (moderation); editing stays the owner's alone.

import { h, $, showError, clearError, busy, grow } from './dom.js';
import { liveStream } from './stream.js';
import { article, authorName, authorInFull, repliesLink, threadLink } from './message.js';

const PAGE = 20;

// sameEmail compares e-mails as the server does, case-insensitively; it
// only decides which controls to offer, since the server checks ownership.
const sameEmail = (a, b) => a.normalize('NFC').toLowerCase() === b.normalize('NFC').toLowerCase();

export function timeline({ session, announce, onNotification }) {
  const list = $('#messages');
  const more = $('#more');
  const postForm = $('#post-form');
  const searchForm = $('#search-form');
  const shown = new Map(); // id → <li>
  let filters = new URLSearchParams();
  let next = null;
  let loading = false;
  let generation = 0; // answers to an older search are dropped
  let queued = null; // live events that arrive while page one loads
  let stream = null;
  const checks = new Map(); // id → the pending question about its latest update
  let resetPending = false; // a reset came while an editor was open
  // Infinite scroll: the "older" button loads the next page when it comes
  // into view, and is there to press for keyboard users.
  const inView = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && next && !loading) loadPage();
  }, { rootMargin: '400px' });

  const mine = (m) => sameEmail(m.user.email, session.me.email);
  const moderator = () => session.me.roles?.includes('ROLE_ADMIN');

  function render(m) {
    const meta = `m${m.id}-meta`;
    const own = mine(m);
    const li = h('li', { class: 'msg', 'data-id': m.id }, article(m, meta));
    $('.head', li).append(h('div', { class: 'actions' },
      repliesLink(m),
      h('a', { href: `${threadLink(m.id)}/reply`, class: 'reply', 'aria-describedby': meta }, 'Reply'),
      own ? h('button', { type: 'button', 'data-act': 'edit', 'aria-describedby': meta }, 'Edit') : null,
      own || moderator() ? h('button', { type: 'button', 'data-act': 'delete', 'aria-describedby': meta, class: 'danger' }, 'Delete') : null));
    li.message = m;
    return li;
  }

  // answered brings a shown message up to date when a reply to it
  // arrives, for its count of replies.
  async function answered(id) {
    if (!shown.has(id)) return;
    try {
      const { data } = await session.call('GET', `/api/messages/${id}`);
      if (shown.has(id)) put(data);
    } catch {
      // a message deleted meanwhile has its own event
    }
  }

  // slot is where message id goes in the list, newest first: before the
  // <li> it returns, or at the end for null. It is undefined when id is
  // older than everything loaded and more pages remain: its page will
  // bring it.
  function slot(id) {
    // The order shown on the page, not shown's, which is the order of
    // arrival: live messages arrive after older ones.
    const after = [...list.children].find((x) => x.message.id < id);
    return !after && next && shown.size ? undefined : after ?? null;
  }

  // put shows m: in place if it is shown, else at its slot when it has one.
  function put(m, { append = false } = {}) {
    const old = shown.get(m.id);
    if (old?.editing) return void (old.message = m);
    const li = render(m);
    if (old) {
      const hadFocus = old.contains(document.activeElement);
      old.replaceWith(li);
      if (hadFocus) li.querySelector('button')?.focus();
    } else if (append) {
      list.append(li);
    } else {
      const after = slot(m.id);
      if (after === undefined) return;
      list.insertBefore(li, after);
    }
    shown.set(m.id, li);
    $('#empty').hidden = true;
  }

  // hadFocus says the focus was in the message before busy() took it away
  // while its request was in flight.
  function remove(id, { hadFocus = false } = {}) {
    const li = shown.get(id);
    if (!li) return;
    hadFocus ||= li.contains(document.activeElement);
    const neighbour = li.nextElementSibling ?? li.previousElementSibling;
    li.remove();
    shown.delete(id);
    if (hadFocus) focusOn(neighbour);
    $('#empty').hidden = shown.size > 0 || !!next;
  }

  // focusOn gives the focus to the message next to one taken away, so a
  // keyboard user goes on from where they were: to its first button, or to
  // the message itself when it has none (someone else's); with no message
  // left, to the timeline's heading.
  function focusOn(li) {
    const button = li?.querySelector('button');
    if (button) return button.focus();
    if (!li) return $('#timeline-title').focus();
    li.firstChild.tabIndex = -1; // focusable by script, not a Tab stop
    li.firstChild.focus();
  }

  // deleted takes away a message deleted elsewhere, except one open in
  // the editor: taking that away would throw away what was typed into it
  // without a word. It stays, saying why it can no longer be saved, until
  // the editor is closed.
  function deleted(id) {
    const form = $('form.edit', shown.get(id));
    if (!form) return remove(id);
    gone(shown.get(id), form);
  }

  function gone(li, form) {
    li.gone = true;
    showError(form, { message: 'This message was deleted elsewhere, so your changes cannot be saved. Copy your text if you want to keep it; Cancel closes the editor.' });
  }

  // leave takes away a message that no longer matches the search. One
  // being edited (or asked about for deletion) stays until that ends.
  function leave(id) {
    const li = shown.get(id);
    if (!li) return;
    if (li.editing) return void (li.unmatched = true);
    const hadFocus = li.contains(document.activeElement);
    remove(id);
    if (hadFocus) announce('The message no longer matches the search.');
  }

  // matches asks the server whether m, as edited, is found by the search
  // shown. Word matching is the server's (whole words, NFC, case folding),
  // so the page does not guess: one search with the same filters, bounded
  // to m's creation time, newest first. Since is inclusive and until
  // exclusive, so until is a millisecond past the start of m's: a window
  // that holds m and seldom anything else. The answer is true, false, or
  // null when it cannot tell (the request failed, or more than a page of
  // matches share that millisecond).
  async function matches(m) {
    const created = Date.parse(m.createdAt);
    if (Number.isNaN(created)) return null;
    const params = new URLSearchParams(filters);
    params.set('since', m.createdAt);
    params.set('until', new Date(created + 1).toISOString());
    params.set('limit', 100);
    try {
      const { data } = await session.call('GET', `/api/messages?${params}`);
      if (data.items.some((x) => x.id === m.id)) return true;
      // Without m: the whole answer, or a page that went past its id.
      return !data.next || data.items.some((x) => x.id < m.id) ? false : null;
    } catch {
      return null;
    }
  }

  // updated applies a message.updated event. Under a search for words, the
  // stream sends an update when the message matched before the edit or
  // matches after it, without saying which, so the page asks (matches):
  // one that no longer matches leaves the list; one that newly matches is
  // put in ID order if it falls within the messages loaded, and is left to
  // its page otherwise, without asking. An owner filter needs no question:
  // an edit never changes the owner.
  function updated(m) {
    const li = shown.get(m.id);
    if (!filters.has('q')) return void (li && put(m));
    if (!li && slot(m.id) === undefined) return;
    const check = {};
    checks.set(m.id, check);
    const gen = generation;
    matches(m).then((found) => {
      // A newer event about this message, or another search, decides instead.
      if (gen !== generation || checks.get(m.id) !== check) return;
      checks.delete(m.id);
      const li = shown.get(m.id);
      if (found === false) return leave(m.id);
      if (found && li) li.unmatched = false; // back in, while being edited
      if (found || li) put(m); // unclear: kept up to date, not added
    });
  }

  async function loadPage() {
    if (loading) return;
    const before = shown.size;
    let failed = false;
    loading = true;
    const gen = generation;
    list.setAttribute('aria-busy', 'true');
    try {
      const params = new URLSearchParams(filters);
      params.set('limit', PAGE);
      if (next) params.set('cursor', next);
      const { data } = await session.call('GET', `/api/messages?${params}`);
      if (gen !== generation) return;
      data.items.forEach((m) => shown.has(m.id) || put(m, { append: true }));
      next = data.next;
    } catch (err) {
      failed = true;
      if (gen === generation) showError(searchForm, err);
    } finally {
      if (gen === generation) {
        loading = false;
        list.removeAttribute('aria-busy');
        more.hidden = !next;
        $('#empty').hidden = shown.size > 0 || !!next;
        const pending = queued;
        queued = null;
        pending?.forEach(apply);
        if (document.activeElement === more && shown.size > before) announce(`${shown.size - before} older messages loaded.`);
        // The observer reports only changes of visibility, and what it
        // saw while this page loaded was ignored; nor does it see a change
        // that comes and goes between two frames (a page that pushes the
        // button down, then a scroll that brings it back). Observed afresh,
        // it reports at the next frame whether the button is in view then.
        if (!failed && next && !more.hidden) {
          inView.unobserve(more);
          inView.observe(more);
        }
      }
    }
  }

  // clear empties the timeline for a new first page; live events wait in
  // the queue until it has loaded.
  function clear() {
    resetPending = false;
    generation++;
    loading = false;
    shown.clear();
    list.replaceChildren();
    next = null;
    queued = [];
    checks.clear();
    clearError(searchForm);
  }

  const editorOpen = () => [...shown.values()].some((li) => li.editing);

  function reload() {
    clear();
    loadPage();
  }

  // reloadIfReset runs as an editor or a question whether to delete
  // closes: a reset that came meanwhile is carried out now. The focus,
  // inside the list that is replaced, goes to its heading.
  function reloadIfReset() {
    if (!resetPending || editorOpen()) return;
    const hadFocus = list.contains(document.activeElement);
    reload();
    if (hadFocus) $('#timeline-title').focus();
  }

  function apply(ev) {
    // The person's own notifications come whatever the search, and do
    // not wait for the list.
    if (ev.type === 'notification') return void onNotification?.(ev.data);
    if (queued) return void queued.push(ev);
    let m;
    try {
      m = ev.data ? JSON.parse(ev.data) : {};
    } catch {
      return;
    }
    switch (ev.type) {
      case 'message.created':
        if (!shown.has(m.id) && !mine(m)) announce(`New message from ${authorName(m.user)}.`);
        put(m);
        if (m.replyTo) answered(m.replyTo);
        break;
      case 'message.updated':
        updated(m);
        break;
      case 'message.deleted':
        checks.delete(m.id);
        deleted(m.id);
        break;
      case 'reset':
        // The stream missed changes, so the list is loaded afresh; but not
        // under an open editor, which would go with it and take what was
        // typed. That waits until the last editor closes (reloadIfReset).
        if (editorOpen()) {
          resetPending = true;
          announce('Some changes were missed while live updates were paused; the list is brought up to date when you close the editor.', { stay: true });
        } else reload();
        break;
    }
  }

  const liveText = {
    live: 'Live updates are on.',
    reconnecting: 'Live updates paused; reconnecting…',
    offline: 'The server cannot be reached. Live updates resume when it answers again.',
    unavailable: 'Live updates are not available; new messages appear when you search again.',
  };

  // connect (re)opens the stream; it resolves once the stream is open, or
  // has failed, or is slow to open, which must not hold up the timeline.
  function connect() {
    stream?.close();
    return new Promise((opened) => {
      setTimeout(opened, 3000);
      stream = liveStream({
        token: session.token,
        params: filters,
        onEvent: apply,
        onState: (state) => {
          opened();
          if (state === 'unauthorized') return session.ended();
          $('#live').textContent = liveText[state];
        },
      });
    });
  }

  // Search: the stream takes the same filters, so live updates match what
  // is shown. It is open before page one is asked for, so nothing posted
  // in between is missed; its events wait until page one is shown, and
  // what both bring is shown once.
  async function search() {
    filters = new URLSearchParams();
    for (const name of ['q', 'owner']) {
      const v = searchForm.elements[name].value.trim();
      if (v) filters.set(name, v);
    }
    clear();
    await connect();
    return loadPage();
  }

  searchForm.addEventListener('submit', (e) => {
    e.preventDefault();
    busy(searchForm, search);
  });
  $('#search-clear').addEventListener('click', () => {
    searchForm.reset();
    search();
    searchForm.elements.q.focus();
  });

  postForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const box = postForm.elements.content;
    busy(postForm, async () => {
      try {
        const { data } = await session.call('POST', '/api/messages', { body: { content: box.value } });
        clearError(postForm);
        box.value = '';
        box.dispatchEvent(new Event('input')); // shrinks again
        // Under a search, the stream adds it if it matches.
        if (!filters.size) put(data);
        announce('Message posted.');
        // Ready for the next one, whether it was sent with Enter in the box
        // or with the Post button.
        box.focus();
      } catch (err) {
        showError(postForm, err);
      }
    });
  });
  // Enter posts, and so does Ctrl+Enter (Cmd+Enter on a Mac);
  // Shift+Enter starts a new line.
  postForm.elements.content.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      postForm.requestSubmit();
    }
  });
  grow(postForm.elements.content);

  list.addEventListener('click', (e) => {
    const button = e.target.closest('button[data-act]');
    const li = button?.closest('li');
    if (!li) return;
    ({ edit, delete: confirmDelete, save, cancel, remove: doDelete })[button.dataset.act]?.(li, button);
  });
  list.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      const li = e.target.closest('li');
      if (li?.editing) cancel(li);
    }
  });

  async function edit(li) {
    const article = li.firstChild;
    li.editing = true; // live updates now only note the new version
    try {
      // Read it afresh: its ETag makes the save fail rather than overwrite
      // an edit made elsewhere in the meantime.
      const res = await session.call('GET', `/api/messages/${li.message.id}`);
      li.message = res.data;
      li.etag = res.etag;
    } catch (err) {
      li.editing = false;
      reloadIfReset();
      if (err.status !== 404) return announce(err.message, { stay: true });
      remove(li.message.id);
      return announce('That message was deleted elsewhere.');
    }
    const id = `edit-${li.message.id}`;
    const form = h('form', { class: 'edit' },
      h('div', { class: 'form-error', role: 'alert' }),
      h('label', { for: id }, 'Edit message'),
      h('textarea', { id, name: 'content', dir: 'auto', rows: 3, maxlength: 10000, required: true }),
      h('div', { class: 'actions' },
        h('button', { type: 'submit', class: 'primary', 'data-act': 'save' }, 'Save'),
        h('button', { type: 'button', 'data-act': 'cancel' }, 'Cancel')));
    form.elements.content.value = li.message.content;
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      save(li);
    });
    // In the editor Enter starts a new line; Ctrl+Enter (Cmd+Enter) saves.
    form.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && !e.isComposing) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
    $('.actions', article).hidden = true;
    $('.content', article).replaceWith(form);
    form.elements.content.focus();
  }

  async function save(li, button) {
    if (button) return; // the form's submit event does the work
    const form = $('form.edit', li);
    await busy(form, async () => {
      try {
        const { data } = await session.call('PATCH', `/api/messages/${li.message.id}`, {
          body: { content: form.elements.content.value },
          contentType: 'application/merge-patch+json',
          headers: { 'If-Match': li.etag },
        });
        li.editing = false;
        // The version this edit replaced had left the search. Should the new
        // one match, the stream sends its update, which brings it back.
        if (li.unmatched) {
          remove(data.id, { hadFocus: true });
          return announce('Message saved.');
        }
        put(data);
        shown.get(data.id).querySelector('button').focus();
        announce('Message saved.');
      } catch (err) {
        if (err.status === 404) return gone(li, form);
        if (err.status === 412) err.message = 'This message was changed elsewhere since you opened it. Cancel to see the new version, then edit again.';
        showError(form, err);
      }
    });
    reloadIfReset();
  }

  // cancel closes the editor or the question whether to delete, and gives
  // the focus back to the button that opened it.
  function cancel(li) {
    li.editing = false;
    try {
      if (li.gone) {
        remove(li.message.id);
        return announce('The message was deleted elsewhere.');
      }
      if (li.unmatched) return leave(li.message.id);
      const act = li.confirming ? 'delete' : 'edit';
      put(li.message);
      shown.get(li.message.id).querySelector(`[data-act=${act}]`).focus();
    } finally {
      reloadIfReset();
    }
  }

  function confirmDelete(li) {
    const actions = $('.actions', li);
    const prompt = h('div', { class: 'actions confirm', role: 'group', 'aria-label': 'Confirm deletion' },
      h('span', {}, mine(li.message) ? 'Delete this message?' : `Delete this message by ${authorInFull(li.message.user)}?`),
      h('button', { type: 'button', class: 'danger', 'data-act': 'remove' }, 'Yes, delete'),
      h('button', { type: 'button', 'data-act': 'cancel' }, 'Keep it'));
    actions.replaceWith(prompt);
    li.editing = li.confirming = true;
    prompt.querySelector('[data-act=remove]').focus();
  }

  async function doDelete(li) {
    try {
      await session.call('DELETE', `/api/messages/${li.message.id}`);
      li.editing = false;
      remove(li.message.id);
      announce('Message deleted.');
    } catch (err) {
      if (err.status !== 404) return announce(err.message, { stay: true });
      remove(li.message.id);
      announce('The message was already deleted.');
    } finally {
      reloadIfReset();
    }
  }

  more.addEventListener('click', loadPage);
  inView.observe(more);

  // What was being typed when the session ended without being asked to
  // (the token was revoked elsewhere, another tab logged out): the post
  // box, and every open editor whose text was changed. Given back if the
  // same person logs in again in this tab, and to nobody else.
  let draft = null;

  // reopen opens the editors a draft kept, with the text as it was,
  // loading older pages as far as their messages. The ETag stays the one
  // the text was written against, so a save still fails if the message
  // changed in between, rather than overwrite that change. An edit whose
  // message is gone is said, with its text, rather than dropped. Should
  // the session end again meanwhile, what is left goes with the new draft;
  // nothing of it is ever shown to a session of someone else.
  async function reopen(edits) {
    const gen = generation;
    const me = session.me;
    const lost = [];
    for (const [i, kept] of edits.entries()) {
      // Older than page one: load pages until it is shown or cannot be.
      while (gen === generation && !shown.has(kept.id) && next && Math.min(...shown.keys()) > kept.id) {
        const before = shown.size;
        await loadPage();
        if (shown.size === before) break;
      }
      if (gen === generation && shown.has(kept.id)) await edit(shown.get(kept.id));
      if (gen !== generation) {
        // The session ended, or the person began another search.
        const rest = edits.slice(i);
        if (draft && sameEmail(draft.email, me.email)) draft.edits.push(...rest);
        else if (session.me === me) lost.push(...rest.map((e) => e.content));
        break;
      }
      const li = shown.get(kept.id);
      const form = li && $('form.edit', li);
      if (!form) {
        lost.push(kept.content); // not shown, or deleted as it was opened
        continue;
      }
      form.elements.content.value = kept.content;
      li.etag = kept.etag;
    }
    if (lost.length && session.me === me) {
      showError(postForm, { message: `An edit you had not saved is of a message no longer shown here; its text was: ${lost.join(' / ')}` });
    }
  }

  return {
    async start() {
      const kept = draft && sameEmail(draft.email, session.me.email) ? draft : null;
      draft = null;
      if (kept) postForm.elements.content.value = kept.content;
      await search();
      if (kept?.edits.length) await reopen(kept.edits);
    },
    // stop ends the timeline; keepDraftOf is the e-mail of the person whose
    // drafts to keep, when the session ended under them.
    stop(keepDraftOf) {
      const content = postForm.elements.content.value;
      const edits = [];
      for (const [id, li] of shown) {
        const text = li.editing && $('form.edit', li)?.elements.content.value;
        if (text && text !== li.message.content && li.etag) edits.push({ id, content: text, etag: li.etag });
      }
      // Kept even when empty: an editor being opened again as the session
      // ends puts its text here (reopen).
      draft = keepDraftOf ? { email: keepDraftOf, content, edits } : null;
      stream?.close();
      stream = null;
      generation++;
      shown.clear();
      checks.clear();
      list.replaceChildren();
      searchForm.reset();
      postForm.reset();
      clearError(postForm);
      clearError(searchForm);
    },
  };
}
