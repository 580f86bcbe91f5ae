// Notifications: someone mentioned the person or replied to them. The
// count of unread ones is in the navigation and the page's title, moved by
// the live stream's notification events; the page (#notifications) lists
// them newest first and, opened, marks read what it shows. While the tab
// is hidden, a desktop notification says what arrived, once the person
// has asked for them with the button on the page (never unasked).

import { h, $, time, rich, showError, clearError } from './dom.js';
import { author, authorName, threadLink } from './message.js';

const PAGE = 20;
const TITLE = 'Herald';

const said = { mention: 'mentioned you', reply: 'replied to you' };

export function notifications({ session, announce }) {
  const view = $('#notifications-view');
  const list = $('#notifications');
  const more = $('#notifications-more');
  const notifyMe = $('#notify-me');
  let unread = 0;
  let newest = 0; // the highest notification ID counted in unread
  let next = null;
  let open = false; // the page is shown
  let epoch = 0; // answers for an earlier session are dropped
  let generation = 0; // answers for an earlier opening of the page are dropped
  const shown = new Map(); // id → <li>

  function count(n) {
    unread = Math.max(0, n);
    $('#unread').textContent = String(unread);
    $('#unread-badge').hidden = unread === 0;
    document.title = unread ? `(${unread}) ${TITLE}` : TITLE;
  }

  // fetchCount asks the server for the exact count.
  async function fetchCount() {
    const gen = epoch;
    try {
      const { data } = await session.call('GET', '/api/me/notifications?limit=1');
      if (gen !== epoch) return;
      newest = Math.max(newest, data.items[0]?.id ?? 0);
      count(data.unread);
    } catch {
      // The count stays as it is; the page says why when opened.
    }
  }

  // where a notification leads: the thread its message is in.
  const target = (n) => threadLink(n.kind === 'reply' ? (n.message.replyTo ?? n.message.id) : n.message.id);

  function render(n) {
    const label = `n${n.id}-label`;
    return h('li', { class: `msg note${n.read ? '' : ' unread'}`, 'data-id': n.id },
      h('article', { 'aria-labelledby': label },
        h('p', { class: 'meta', id: label },
          n.read ? null : h('span', { class: 'badge' }, 'Unread'), ' ',
          author(n.actor), ` ${said[n.kind] ?? n.kind} `, time(n.at)),
        n.message
          ? h('p', { class: 'content', dir: 'auto' }, ...rich(n.message.content, n.message.mentions ?? []))
          : h('p', { class: 'muted' }, 'The message was deleted.'),
        n.message ? h('p', { class: 'actions' }, h('a', { href: target(n), 'aria-describedby': label }, 'Open the thread')) : null));
  }

  function add(n, { first = false } = {}) {
    if (shown.has(n.id)) return;
    const li = render(n);
    shown.set(n.id, li);
    if (first) list.prepend(li);
    else list.append(li);
    $('#notifications-empty').hidden = true;
  }

  async function loadPage() {
    const gen = generation;
    list.setAttribute('aria-busy', 'true');
    try {
      const params = new URLSearchParams({ limit: PAGE });
      if (next) params.set('cursor', next);
      const { data } = await session.call('GET', `/api/me/notifications?${params}`);
      if (gen !== generation) return null;
      next = data.next;
      data.items.forEach((n) => add(n));
      $('#notifications-empty').hidden = shown.size > 0;
      return data;
    } catch (err) {
      if (gen === generation) showError(view, err);
      return null;
    } finally {
      if (gen === generation) {
        list.removeAttribute('aria-busy');
        more.hidden = !next;
      }
    }
  }

  // markRead marks read every notification up to upTo (all of them when
  // it is null), then takes the exact count again.
  async function markRead(upTo) {
    try {
      await session.call('POST', '/api/me/notifications/read', { body: upTo ? { upTo } : {} });
      await fetchCount();
      return true;
    } catch (err) {
      showError(view, err);
      return false;
    }
  }

  more.addEventListener('click', loadPage);

  $('#notifications-read').addEventListener('click', async () => {
    if (!(await markRead(null))) return;
    for (const li of shown.values()) {
      li.classList.remove('unread');
      $('.badge', li)?.remove();
    }
    announce('Every notification is marked read.');
  });

  // Desktop notifications need the browser's permission, asked for only
  // when the person presses the button.
  const canNotify = () => typeof Notification === 'function' && Notification.permission === 'default';
  notifyMe.addEventListener('click', async () => {
    const answer = await Notification.requestPermission();
    notifyMe.hidden = !canNotify();
    announce(answer === 'granted'
      ? 'This browser will tell you of new notifications while Herald is in the background.'
      : 'This browser will not show notifications from Herald.');
  });

  // desktop shows n while the tab is hidden. Through the service worker
  // when one is active: Chrome on Android has no \`new Notification\` (it
  // throws), only the worker's showNotification, whose click the worker
  // handles (it opens data.url). The tag is the one the worker gives the
  // same notification pushed (its ID), so a device that gets both shows
  // it once. The page shows it itself only where there is no worker, or
  // the worker could not.
  async function desktop(n) {
    if (!document.hidden || typeof Notification !== 'function' || Notification.permission !== 'granted') return;
    const title = `${authorName(n.actor)} ${said[n.kind] ?? n.kind}`;
    const options = { body: n.message?.content.slice(0, 200) ?? '', tag: String(n.id) };
    try {
      const reg = await navigator.serviceWorker?.getRegistration();
      if (reg?.active) {
        await reg.showNotification(title, { ...options, data: { url: n.message ? target(n) : '#notifications' } });
        return;
      }
    } catch {
      // Shown by the page below.
    }
    try {
      const shown = new Notification(title, options);
      shown.addEventListener('click', () => {
        focus();
        if (n.message) location.hash = target(n);
        shown.close();
      });
    } catch {
      // This browser shows notifications only through a worker, and had
      // none: the count in the title says it all the same.
    }
  }

  return {
    // arrived takes a notification event's data.
    arrived(data) {
      let n;
      try {
        n = JSON.parse(data);
      } catch {
        return;
      }
      // A resumed stream may bring again what was counted already.
      if (n.id > newest) {
        newest = n.id;
        if (!n.read) count(unread + 1);
        desktop(n);
      }
      if (open) add(n, { first: true });
    },
    start() {
      epoch++;
      fetchCount();
    },
    // show opens the page: the first page, newest first, and what it
    // shows marked read (it stays marked unread here until reloaded).
    async show() {
      open = true;
      generation++;
      next = null;
      shown.clear();
      list.replaceChildren();
      clearError(view);
      notifyMe.hidden = !canNotify();
      const data = await loadPage();
      const top = data?.items.find((n) => !n.read);
      if (top && open) await markRead(data.items[0].id);
    },
    hide() {
      open = false;
    },
    stop() {
      open = false;
      epoch++;
      generation++;
      unread = newest = 0;
      count(0);
      shown.clear();
      list.replaceChildren();
      clearError(view);
    },
  };
}
