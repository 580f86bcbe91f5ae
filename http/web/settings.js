// Account settings: name and handle, signed-in devices (one token per
// login), notifications pushed to this device and the account's devices
// that get them, password change and account deletion.

import { h, $, time, showError, clearError, busy } from './dom.js';

export function settings({ session, announce, profileChanged }) {
  const profileForm = $('#profile-form');
  const devicesCard = $('#devices-card');
  const devices = $('#devices');
  const passwordForm = $('#password-form');
  const deleteForm = $('#delete-form');
  const deleteStart = $('#delete-start');
  const push = pushSection({ session, announce });

  function fillProfile() {
    profileForm.elements.name.value = session.me.name ?? '';
    profileForm.elements.handle.value = session.me.handle ?? '';
  }

  // A refusal names the field at fault: a handle someone else has (409),
  // or a name or handle the rules refuse (422).
  profileForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = profileForm.elements;
    busy(profileForm, async () => {
      try {
        const { data } = await session.call('PATCH', '/api/me', { body: { name: f.name.value, handle: f.handle.value } });
        session.me = { ...session.me, ...data };
        clearError(profileForm);
        fillProfile();
        profileChanged(session.me);
        announce('Your name and handle are saved.');
      } catch (err) {
        showError(profileForm, err);
      }
    });
  });

  async function load() {
    fillProfile();
    push.load();
    clearError(devicesCard);
    devices.setAttribute('aria-busy', 'true');
    try {
      const { data } = await session.call('GET', '/api/me/tokens');
      // This device first, then the others newest first.
      const items = [...data.items].sort((a, b) => b.current - a.current);
      devices.replaceChildren(...items.map(device));
    } catch (err) {
      showError(devicesCard, err);
    } finally {
      devices.removeAttribute('aria-busy');
    }
  }

  function device(t) {
    const desc = `device-${t.id}`;
    return h('li', {},
      h('p', { id: desc },
        h('strong', {}, t.current ? 'This device' : 'Another device'), h('br'),
        'Signed in ', time(t.createdAt), ' · last used ', time(t.lastUsedAt), ' · expires ', time(t.expiresAt)),
      h('button', { type: 'button', 'data-id': t.id, 'data-current': String(t.current), 'aria-describedby': desc }, 'Sign out this device'));
  }

  devices.addEventListener('click', async (e) => {
    const button = e.target.closest('button[data-id]');
    if (!button) return;
    button.disabled = true;
    try {
      await session.call('DELETE', `/api/me/tokens/${encodeURIComponent(button.dataset.id)}`);
      if (button.dataset.current === 'true') return session.leave('You are signed out on this device.');
      announce('That device is signed out.');
      $('#devices-title').focus();
      await load();
    } catch (err) {
      button.disabled = false;
      showError(devicesCard, err);
    }
  });

  $('#signout-all').addEventListener('click', async () => {
    try {
      await session.call('DELETE', '/api/me/tokens');
      session.leave('You are signed out on every device.');
    } catch (err) {
      showError(devicesCard, err);
    }
  });

  passwordForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = passwordForm.elements;
    busy(passwordForm, async () => {
      try {
        await session.call('POST', '/api/me/password', {
          body: { currentPassword: f.currentPassword.value, newPassword: f.newPassword.value },
          confirmsPassword: true,
        });
        passwordForm.reset();
        clearError(passwordForm);
        announce('Password changed. Your other devices are signed out.');
        await load();
      } catch (err) {
        showError(passwordForm, err);
      }
    });
  });

  function showDelete(open) {
    deleteForm.hidden = !open;
    deleteStart.setAttribute('aria-expanded', open);
    if (open) deleteForm.elements.password.focus();
    else {
      deleteForm.reset();
      clearError(deleteForm);
      deleteStart.focus();
    }
  }
  deleteStart.addEventListener('click', () => showDelete(deleteForm.hidden));
  $('#delete-cancel').addEventListener('click', () => showDelete(false));
  deleteForm.addEventListener('submit', (e) => {
    e.preventDefault();
    busy(deleteForm, async () => {
      try {
        await session.call('DELETE', '/api/me', {
          body: { password: deleteForm.elements.password.value },
          confirmsPassword: true,
        });
        session.leave('Your account and all its messages are deleted.');
      } catch (err) {
        showError(deleteForm, err);
      }
    });
  });

  return {
    start: load,
    stop() {
      profileForm.reset();
      clearError(profileForm);
      devices.replaceChildren();
      passwordForm.reset();
      clearError(passwordForm);
      clearError(devicesCard);
      deleteForm.hidden = true;
      deleteForm.reset();
      clearError(deleteForm);
      deleteStart.setAttribute('aria-expanded', 'false');
      push.stop();
    },
  };
}

// Web Push. The server pushes each notification to every subscription of
// the account (docs/push.md); this section subscribes this browser, on a
// click only, and lists the account's subscribed devices, any of which
// may be removed. A server without push answers 404 to its key, and a
// browser may lack push altogether (iOS Safari has it only in a web app
// added to the Home Screen): the section then says so in one line rather
// than offer a button that cannot work.

// pushSupported is whether this browser can be subscribed at all.
const pushSupported = () => 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;

// The push services the browsers people use subscribe with, by host, to
// say which browser a subscription is; anything else goes by its host.
const pushServices = [
  [(host) => host === 'fcm.googleapis.com', 'Chrome / Android (Google)'],
  [(host) => host === 'updates.push.services.mozilla.com', 'Firefox (Mozilla)'],
  [(host) => host === 'web.push.apple.com', 'Safari (Apple)'],
  [(host) => host.endsWith('.notify.windows.com'), 'Edge (Microsoft)'],
];

export function pushServiceName(endpoint) {
  let host;
  try {
    host = new URL(endpoint).hostname;
  } catch {
    return endpoint;
  }
  return pushServices.find(([matches]) => matches(host))?.[1] ?? host;
}

// serverKey decodes the server's base64url public key into the bytes
// pushManager.subscribe takes as applicationServerKey.
function serverKey(base64url) {
  const base64 = base64url.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(base64url.length / 4) * 4, '=');
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

// sameKey is whether a subscription was made with key: a subscription
// made with another (the server's key was replaced) no longer works, and
// the browser refuses a new one until it is gone.
function sameKey(subscription, key) {
  const had = subscription.options?.applicationServerKey;
  if (!had) return true;
  const bytes = new Uint8Array(had);
  return bytes.length === key.length && bytes.every((b, i) => b === key[i]);
}

// browserError makes what a browser's push API threw fit to show.
function browserError(what, err) {
  return new Error(`${what}: ${err?.message || err}`);
}

const BLOCKED = 'Notifications from Herald are blocked in this browser. To allow them again, open the site settings ' +
  '(the icon at the left of the address bar, or the browser\'s settings under Privacy and security, then Site settings), ' +
  'set Notifications to Allow, reload this page and press the button again.';

function pushSection({ session, announce }) {
  const card = $('#push-card');
  const state = $('#push-state');
  const help = $('#push-help');
  const toggle = $('#push-toggle');
  const title = $('#push-devices-title');
  const list = $('#push-devices');
  const empty = $('#push-devices-empty');
  let key = null; // the server's key as bytes; null while push is off or unknown
  let items = []; // the account's subscriptions, as GET lists them
  let mine = null; // this browser's subscription when the server has it too
  let generation = 0; // answers for an earlier opening of the screen are dropped

  function say(text, { hint = '' } = {}) {
    state.textContent = text;
    help.textContent = hint;
    help.hidden = !hint;
  }

  // workerReady is the registration of the active worker, which push
  // needs. The page registers it on load; a browser that never gets one
  // (its script refused, say) is told rather than waited for forever.
  async function workerReady() {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(
        'Herald\'s service worker is not running in this browser, and push needs it. Reload the page and try again.')), 10000);
    });
    try {
      return await Promise.race([navigator.serviceWorker.ready, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  // browserSubscription is this browser's, if any; none before the page
  // has registered its worker (on load).
  async function browserSubscription() {
    const reg = await navigator.serviceWorker.getRegistration();
    return reg ? reg.pushManager.getSubscription() : null;
  }

  // render shows the button, the list and what this device does, from
  // key, items and this browser's subscription.
  async function render(gen) {
    let sub = null;
    if (pushSupported()) {
      try {
        sub = await browserSubscription();
      } catch {
        // Taken as not subscribed: the button offers to subscribe again.
      }
    }
    if (gen !== generation) return;
    mine = sub && items.find((it) => it.endpoint === sub.endpoint) ? sub : null;
    title.hidden = list.hidden = items.length === 0;
    empty.hidden = items.length !== 0;
    list.replaceChildren(...items.map((it) => device(it, it.endpoint === mine?.endpoint)));
    if (!pushSupported()) {
      toggle.hidden = true;
      // iOS Safari says navigator.standalone (false in a tab); there a web
      // app added to the Home Screen gets push, the tab never does.
      say('This browser cannot receive push notifications.', {
        hint: navigator.standalone === false
          ? 'On an iPhone or iPad, add Herald to your Home Screen first (Share, then Add to Home Screen), open it from there and press Notify me on this device in its settings.'
          : '',
      });
      return;
    }
    toggle.hidden = false;
    toggle.textContent = mine ? 'Stop notifications on this device' : 'Notify me on this device';
    toggle.classList.toggle('primary', !mine);
    if (mine) say('This device gets your notifications, even when Herald is closed.');
    else if (Notification.permission === 'denied') say('This device does not get notifications.', { hint: BLOCKED });
    else say('This device does not get notifications. Turn them on to hear of mentions and replies when Herald is not open.');
  }

  function device(it, current) {
    const desc = `push-device-${it.id}`;
    return h('li', {},
      h('p', { id: desc },
        h('strong', {}, pushServiceName(it.endpoint)), current ? h('span', { class: 'badge' }, 'This device') : null, h('br'),
        'Turned on ', time(it.createdAt), ' · ',
        ...(it.lastSuccessAt ? ['last notification delivered ', time(it.lastSuccessAt)] : ['nothing delivered yet'])),
      h('button', { type: 'button', 'data-id': it.id, 'data-current': String(current), 'aria-describedby': desc }, 'Remove'));
  }

  // load asks the server afresh; after an action its error, if any,
  // stays shown (keepError).
  async function load({ keepError = false } = {}) {
    const gen = ++generation;
    if (!keepError) clearError(card);
    list.setAttribute('aria-busy', 'true');
    try {
      if (!key) key = serverKey((await session.call('GET', '/api/push/key')).data.publicKey);
      const { data } = await session.call('GET', '/api/me/push-subscriptions');
      if (gen !== generation) return;
      items = data.items;
      await render(gen);
    } catch (err) {
      if (gen !== generation) return;
      if (err.status === 404) {
        // Push is off on this server, which is not an error of anyone's.
        key = null;
        toggle.hidden = title.hidden = list.hidden = empty.hidden = true;
        say('This server does not send push notifications.');
      } else {
        showError(card, err);
      }
    } finally {
      if (gen === generation) list.removeAttribute('aria-busy');
    }
  }

  // subscribe turns push on for this browser. Permission is asked first
  // and at once: browsers grant the prompt only within the click.
  async function subscribe() {
    const answer = await Notification.requestPermission();
    if (answer !== 'granted') {
      say('This device does not get notifications.', {
        hint: answer === 'denied' ? BLOCKED : 'You did not allow notifications. Press the button again to be asked again.',
      });
      // The section's text is not a live region (it would be read out at
      // every opening of the screen); what the click did is said here.
      announce(answer === 'denied'
        ? 'Notifications are blocked in this browser. The settings say how to allow them.'
        : 'Notifications were not allowed.');
      return;
    }
    const reg = await workerReady();
    let sub = await reg.pushManager.getSubscription();
    if (sub && !sameKey(sub, key)) {
      await sub.unsubscribe();
      sub = null;
    }
    try {
      sub ??= await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
    } catch (err) {
      throw browserError('This browser could not turn notifications on', err);
    }
    try {
      await session.call('POST', '/api/me/push-subscriptions', { body: sub.toJSON() });
    } catch (err) {
      // Refused (at the limit of devices, say): a subscription the server
      // does not know would only ever stay silent.
      await sub.unsubscribe().catch(() => {});
      throw err;
    }
    announce('Notifications are on for this device.');
  }

  // remove deletes the server's record of a subscription, and the
  // browser's subscription when it is this device's.
  async function remove(id, current) {
    try {
      await session.call('DELETE', `/api/me/push-subscriptions/${encodeURIComponent(id)}`);
    } catch (err) {
      // Gone already (the push service said it expired): removed all the same.
      if (err.status !== 404) throw err;
    }
    if (current) {
      const sub = await browserSubscription();
      await sub?.unsubscribe();
    }
  }

  toggle.addEventListener('click', () => {
    busy(card, async () => {
      const gen = generation;
      clearError(card);
      try {
        if (mine) {
          await remove(items.find((it) => it.endpoint === mine.endpoint)?.id, true);
          announce('Notifications are off for this device.');
        } else {
          await subscribe();
        }
      } catch (err) {
        if (gen === generation) showError(card, err);
      }
      if (gen === generation) await load({ keepError: true });
    });
  });

  list.addEventListener('click', (e) => {
    const button = e.target.closest('button[data-id]');
    if (!button) return;
    busy(card, async () => {
      const gen = generation;
      clearError(card);
      try {
        await remove(button.dataset.id, button.dataset.current === 'true');
        announce(button.dataset.current === 'true' ? 'Notifications are off for this device.' : 'That device no longer gets notifications.');
        $('#push-title').focus();
      } catch (err) {
        if (gen === generation) showError(card, err);
      }
      if (gen === generation) await load({ keepError: true });
    });
  });

  return {
    load: () => load(),
    stop() {
      generation++;
      key = null;
      items = [];
      mine = null;
      say('');
      toggle.hidden = title.hidden = list.hidden = empty.hidden = true;
      list.replaceChildren();
      clearError(card);
    },
  };
}
