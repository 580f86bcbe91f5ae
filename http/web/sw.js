// Herald's service worker, at /sw.js so that its scope is the whole
// origin. It shows the notifications pushed to this browser and opens the
// message on a click, and it keeps the app shell (the page and its files,
// never anything of /api/) so that the installed app opens offline and
// says so. A classic script, not a module: module workers are not yet
// everywhere a person installs Herald.
//
// The server fills in the version and the shell (the addresses to keep);
// any change to the client changes both, so this file's bytes change and
// the browser installs the new worker, which takes over at once.

const VERSION = '{{version}}';
const SHELL_CACHE = `herald-shell-${VERSION}`;
const SHELL = '{{shell}}'.split(' ');
const ICON = `/assets/${VERSION}/icon-192.png`;
const BADGE = `/assets/${VERSION}/badge.png`;

// Where a notification without a message of its own leads.
const NOTIFICATIONS_PAGE = '/#notifications';

self.addEventListener('install', (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(SHELL_CACHE);
    // Fetched afresh: the HTTP cache may hold a page of the last version,
    // naming assets this cache would not hold.
    await cache.addAll(SHELL.map((url) => new Request(url, { cache: 'no-cache' })));
    await self.skipWaiting();
  })());
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith('herald-shell-') && name !== SHELL_CACHE) await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const request = event.request;
  const url = new URL(request.url);
  // The API's answers are one account's data: they go to the network
  // only, and are never kept, whoever is signed in next.
  if (request.method !== 'GET' || url.origin !== self.location.origin || url.pathname.startsWith('/api/')) return;
  if (request.mode === 'navigate') {
    // Any page of the app is the one page, whose address (its fragment)
    // picks the screen; kept, it then says it is offline.
    event.respondWith(networkElseKept(request, '/'));
  } else if (url.pathname.startsWith('/assets/')) {
    // An asset's address names its content, so a kept copy is the same.
    event.respondWith(caches.match(request, { cacheName: SHELL_CACHE }).then((kept) => kept ?? fetch(request)));
  } else if (SHELL.includes(url.pathname)) {
    event.respondWith(networkElseKept(request, url.pathname));
  }
});

// networkElseKept answers from the server when it answers, and with the
// kept copy of address when it does not.
async function networkElseKept(request, address) {
  try {
    return await fetch(request);
  } catch (err) {
    const kept = await caches.match(address, { cacheName: SHELL_CACHE });
    if (kept) return kept;
    throw err;
  }
}

self.addEventListener('push', (event) => {
  const n = pushedNotification(event.data);
  event.waitUntil(self.registration.showNotification(n.title, {
    body: n.body,
    tag: n.tag,
    data: { url: n.url },
    icon: ICON,
    badge: BADGE,
  }));
});

// pushedNotification reads a push's payload, the server's JSON
// {kind, id, title, body, url, messageId}. A push it cannot read still
// shows something: browsers count a push that shows nothing against the
// site, and may stop delivering them.
function pushedNotification(data) {
  let p = null;
  try {
    p = data?.json();
  } catch {
    // not JSON: the generic notification below
  }
  if (!p || typeof p !== 'object' || typeof p.title !== 'string' || p.title === '') {
    return { title: 'New notification', body: 'Open Herald to read it.', tag: undefined, url: NOTIFICATIONS_PAGE };
  }
  return {
    title: p.title,
    body: typeof p.body === 'string' ? p.body : '',
    // The same notification pushed twice replaces itself.
    tag: p.id == null ? undefined : String(p.id),
    url: typeof p.url === 'string' ? p.url : NOTIFICATIONS_PAGE,
  };
}

// notificationTarget is where a click on a notification leads: its url
// when that is on this origin, else the notifications page. A payload is
// the server's, but the worker opens nothing it did not come from.
function notificationTarget(raw, origin) {
  const fallback = new URL(NOTIFICATIONS_PAGE, origin).href;
  if (typeof raw !== 'string') return fallback;
  let url;
  try {
    url = new URL(raw, origin);
  } catch {
    return fallback;
  }
  return url.origin === origin ? url.href : fallback;
}

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const target = notificationTarget(event.notification.data?.url, self.location.origin);
  event.waitUntil(openWindow(target));
});

// openWindow shows target in an open Herald window and brings it to the
// front, or opens a new one. A window this worker does not control (one
// opened before the worker was installed) cannot be navigated from here:
// the next is tried, and a new window opened when none can.
async function openWindow(target) {
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  for (const client of windows) {
    if (new URL(client.url).origin !== self.location.origin) continue;
    let shown;
    try {
      shown = await client.navigate(target);
    } catch {
      continue;
    }
    try {
      await (shown ?? client).focus();
    } catch {
      // The browser lets only a real click raise a window; it shows the
      // message all the same.
    }
    return;
  }
  await self.clients.openWindow(target);
}
