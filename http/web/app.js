// Herald's web client: signing in and out, registration as the server
// allows it, and switching between the timeline, a thread
// (#/messages/{id}), a profile (#/users/{handle}), the notifications
// (#notifications), the account settings (#settings), the administration
// screen (#admin, administrators only) and the page a password-reset link
// opens (#reset).

import { h, $, showError, clearError, clearUnreachable, busy, sleep, refreshTimes } from './dom.js';
import { KEY, request, savedToken, saveToken, forgetToken } from './api.js';
import { timeline } from './timeline.js';
import { settings } from './settings.js';
import { admin, isAdmin } from './admin.js';
import { resetPage } from './reset.js';
import { threadPage } from './thread.js';
import { profilePage } from './profile.js';
import { notifications } from './notifications.js';

// How long news stays on the screen. What says something is wrong, or
// must be acted on, stays until it is dismissed or replaced.
const NOTICE_MS = 8000;
let noticeTimer = 0;

// announce speaks through the polite status region. A new node each time,
// so the same words twice are read twice.
function announce(text, { stay = false } = {}) {
  clearTimeout(noticeTimer);
  $('#notice').replaceChildren(h('span', {}, text));
  $('#notice-dismiss').hidden = !stay;
  if (!stay) noticeTimer = setTimeout(dismiss, NOTICE_MS);
}

function dismiss() {
  clearTimeout(noticeTimer);
  const hadFocus = document.activeElement === $('#notice-dismiss');
  $('#notice').replaceChildren();
  $('#notice-dismiss').hidden = true;
  if (hadFocus) $('#main').focus();
}
$('#notice-dismiss').addEventListener('click', dismiss);

const session = {
  token: null,
  me: null,
  // call is request() with this session's token. A token the server no
  // longer accepts ends the session, but a wrong password that confirms a
  // change (also a 401) does not.
  async call(method, path, opts = {}) {
    try {
      return await request(method, path, { ...opts, token: this.token });
    } catch (err) {
      if (err.status === 401 && (err.tokenRejected || !opts.confirmsPassword)) {
        this.ended();
        // The login screen says why; the form that made the call is gone,
        // and its error would greet the next login.
        err.sessionEnded = true;
      }
      throw err;
    }
  },
  // ended leaves a session that ended without this tab asking: the token
  // was revoked or expired, or another tab logged out. What was being
  // typed into the post box is kept for the same person's next login.
  ended(message = 'Your session has ended. Please log in again.') {
    this.leave(message, { keepDraft: true });
  },
  leave(message, { keepDraft = false } = {}) {
    if (!this.token) return;
    const { token, me } = this;
    this.token = this.me = null;
    forgetToken(token);
    views.timeline.stop(keepDraft ? me.email : null);
    views.settings.stop();
    views.admin.stop();
    views.thread.stop();
    views.notifications.stop();
    $('#nav').hidden = true;
    $('#nav-admin').hidden = true;
    show('auth');
    announce(message, { stay: keepDraft });
  },
};

// The views' news is about a session: none once it has ended, when the
// login screen's notice says why.
const viewAnnounce = (text, opts) => session.token && announce(text, opts);
const notify = notifications({ session, announce: viewAnnounce });
const views = {
  timeline: timeline({ session, announce: viewAnnounce, onNotification: notify.arrived }),
  settings: settings({ session, announce: viewAnnounce, profileChanged: whoami }),
  admin: admin({ session, announce: viewAnnounce, roleLost }),
  thread: threadPage({ session, announce: viewAnnounce }),
  profile: profilePage({ session }),
  notifications: notify,
};

// whoami says who is signed in, in the menu.
function whoami(me) {
  const who = $('#whoami');
  who.textContent = me.handle ? `Signed in as @${me.handle} (${me.email})` : `Signed in as ${me.email}`;
  who.title = who.textContent;
}

// roleLost follows an administrator whose role was taken away while the
// page was open: the screen goes, and the server refuses its routes anyway.
function roleLost() {
  $('#nav-admin').hidden = true;
  views.admin.stop();
  if (location.hash === '#admin') route();
  announce('You are no longer an administrator.', { stay: true });
}

// The registration mode, as GET /api/info says: open, invite or closed.
// Until it answers the form is the one an open server takes; a server
// that then refuses a registration says why, and is asked again.
let registration = 'open';

function applyRegistration(mode) {
  registration = mode;
  const form = $('#register-form');
  form.hidden = mode === 'closed';
  $('#register-closed').hidden = mode !== 'closed';
  $('#register-invite').hidden = mode !== 'invite';
  form.elements.invite.required = mode === 'invite';
}

// applyResetByEmail offers a link by e-mail to whoever forgot their
// password, on a server that sends e-mail.
function applyResetByEmail(on) {
  $('#forgot-form').hidden = !on;
  if (on) $('#login-forgot').replaceChildren('Forgot your password? ', h('a', { href: '#reset' }, 'Get a link by e-mail'), '.');
}

async function loadInfo() {
  try {
    const { data } = await request('GET', '/api/info');
    applyRegistration(data.registration);
    applyResetByEmail(data.passwordResetByEmail);
  } catch {
    // Left as it is: a registration the server does not take is refused
    // with its reason.
  }
}
const infoLoaded = loadInfo();

const reset = resetPage({
  announce: (text) => announce(text, { stay: true }),
  done() {
    history.replaceState(null, '', location.pathname + location.search);
    if (session.token) route();
    else show('auth');
    announce('Your password is changed, and every device that was signed in to the account is signed out. Log in with your new password.', { stay: true });
    if (!session.token) $('#login-email').focus();
  },
});

// takeCode reads an invitation or password-reset code from the address
// (#invite=CODE, #reset=CODE, the links the API makes) into its form, and
// takes it out of the address at once, so it stays out of the history,
// bookmarks and screenshots. The fragment never reaches the server. It
// returns which kind it read, if any.
function takeCode() {
  const m = /^#(invite|reset)=(.*)$/s.exec(location.hash);
  if (!m) return null;
  let code = m[2];
  try {
    code = decodeURIComponent(code);
  } catch {
    // not percent-encoded after all: taken as it is
  }
  code = code.trim();
  history.replaceState(null, '', location.pathname + location.search + (m[1] === 'reset' ? '#reset' : ''));
  if (m[1] === 'reset') reset.fill(code);
  else $('#register-invite-code').value = code;
  return m[1];
}

// invited says what an invitation link did, once the screen for it shows.
function invited() {
  if (session.token) announce('You are signed in already; log out to create another account with the invitation.');
  else if (registration === 'invite') announce('Your invitation is filled in: choose your e-mail and a password to create your account.', { stay: true });
}

function show(name) {
  // On the first screen the page starts at the top, skip link first;
  // after that, the new screen's heading takes the focus, so keyboard and
  // screen-reader users start there rather than on a control that has
  // disappeared.
  const first = !$('#loading').hidden;
  $('#loading').hidden = true;
  dismiss(); // news of the last screen
  menu(false);
  for (const v of ['auth', 'timeline', 'settings', 'admin', 'reset', 'thread', 'profile', 'notifications']) $(`#${v}-view`).hidden = v !== name;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.hash === `#${name}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!first) $(`#${name}-title`).focus();
}

// route shows the screen the address names. #admin is a screen only for
// administrators; for anyone else it is the timeline, and nothing of the
// administration screen is loaded.
function route() {
  const took = takeCode();
  if (location.hash === '#reset') return show('reset');
  if (!session.token) {
    // Before start() has decided, the first screen is its to show.
    if ($('#loading').hidden) show('auth');
  } else {
    const hash = location.hash;
    const thread = /^#\/messages\/(\d+)(\/reply)?$/.exec(hash);
    const profile = /^#\/users\/([^/]+)$/.exec(hash);
    const name = thread ? 'thread' : profile ? 'profile'
      : hash === '#settings' ? 'settings' : hash === '#notifications' ? 'notifications'
        : hash === '#admin' && isAdmin(session.me) ? 'admin' : 'timeline';
    if (name !== 'thread') views.thread.stop();
    if (name !== 'notifications') views.notifications.hide();
    show(name);
    if (name === 'settings') views.settings.start();
    if (name === 'admin') views.admin.start();
    if (name === 'notifications') views.notifications.show();
    if (thread) views.thread.open(Number(thread[1]), { reply: !!thread[2] });
    if (profile) views.profile.open(decodeURIComponent(profile[1]));
  }
  if (took === 'invite') invited();
}

// signedOut shows the first screen of someone not signed in, once the
// server has said which registration form to show (or has been given a
// moment to).
async function signedOut() {
  await Promise.race([infoLoaded, sleep(3000)]);
  if (!session.token) show(location.hash === '#reset' ? 'reset' : 'auth');
}

function enter(token, me) {
  session.token = token;
  session.me = me;
  whoami(me);
  $('#nav').hidden = false;
  $('#nav-admin').hidden = !isAdmin(me);
  views.timeline.start();
  views.notifications.start();
  route();
}

// signIn runs a login or registration form: on success the token is kept
// (for the tab, or on the device when "remember me" is ticked).
function signIn(form, work) {
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    busy(form, async () => {
      try {
        const { token, me } = await work(form.elements);
        saveToken(token, form.elements.remember.checked);
        clearError(form);
        form.reset();
        enter(token, me);
      } catch (err) {
        showError(form, err);
      }
    });
  });
}

signIn($('#login-form'), async (f) => {
  const { data } = await request('POST', '/api/login', { body: { username: f.username.value, password: f.password.value } });
  const { data: me } = await request('GET', '/api/me', { token: data.token });
  return { token: data.token, me };
});

signIn($('#register-form'), async (f) => {
  const body = { email: f.email.value, password: f.password.value };
  if (registration === 'invite') body.invite = f.invite.value.trim();
  try {
    const { data } = await request('POST', '/api/register', { body });
    return { token: data.token, me: data };
  } catch (err) {
    // Closed, or needing an invitation: the server's mode may have changed
    // since the page loaded.
    if (err.status === 403) loadInfo();
    throw err;
  }
});

// leavePush takes this browser off the account's push subscriptions, on
// the server and in the browser: a computer someone logged out of must
// not go on showing their notifications, whoever uses it next.
async function leavePush() {
  try {
    const reg = await navigator.serviceWorker?.getRegistration();
    const sub = await reg?.pushManager?.getSubscription();
    if (!sub) return;
    const { data } = await session.call('GET', '/api/me/push-subscriptions');
    const mine = data.items.find((it) => it.endpoint === sub.endpoint);
    if (mine) await session.call('DELETE', `/api/me/push-subscriptions/${mine.id}`);
    await sub.unsubscribe();
  } catch {
    // Logging out goes on: at worst the server keeps a subscription the
    // browser dropped, which the push service then refuses, and the
    // server deletes.
  }
}

$('#logout').addEventListener('click', async () => {
  await leavePush();
  try {
    await session.call('POST', '/api/logout');
  } catch {
    // signed out either way: the token is forgotten below
  }
  session.leave('You are logged out.');
});

addEventListener('hashchange', route);

// Another tab of this browser logging out takes the remembered token with
// it (localStorage is shared, and only its changes made elsewhere fire
// "storage"). When that was this tab's token too, this tab is signed out
// as well: say so now, rather than fail on the next click.
addEventListener('storage', (e) => {
  if (e.key === KEY && e.oldValue === session.token && e.newValue !== session.token && session.token) {
    session.ended('You logged out in another tab. Please log in again.');
  }
});

// The server not answering is said once, at the top, whichever screen is
// shown; so is its coming back. The forms say it again when used.
let toldUnreachable = false;
addEventListener('herald:unreachable', () => {
  if (!session.token) return;
  toldUnreachable = true;
  announce('The server cannot be reached. What you type is kept; the page reconnects when the server answers again.', { stay: true });
});
addEventListener('herald:reachable', () => {
  clearUnreachable();
  if (!toldUnreachable) return;
  toldUnreachable = false;
  announce('Connected to the server again.');
});

// The menu: at phone width, the settings, administration and logging out
// fold into it, so the header stays one short line; wider, it is shown
// open, inline.
function menu(open) {
  $('#menu').classList.toggle('open', open);
  $('#menu-toggle').setAttribute('aria-expanded', open);
}
$('#menu-toggle').addEventListener('click', () => menu(!$('#menu').classList.contains('open')));
$('#nav').addEventListener('keydown', (e) => {
  if (e.key !== 'Escape' || !$('#menu').classList.contains('open')) return;
  menu(false);
  $('#menu-toggle').focus();
});
addEventListener('click', (e) => {
  if (!e.target.closest('#menu-toggle') && !e.target.closest('#menu button')) menu(false);
});

// Times say how long ago; they are said again every half a minute, and
// when the page is looked at again.
setInterval(refreshTimes, 30000);
document.addEventListener('visibilitychange', () => document.hidden || refreshTimes());

// The skip link moves the focus to the content without touching the hash,
// which picks the screen (route): "#main" would leave the settings.
$('.skip').addEventListener('click', (e) => {
  e.preventDefault();
  $('#main').focus();
});

// start opens the session of a token saved earlier. A server that cannot
// be reached, or answers "not now" (a restart, a proxy's 502 or 503), is
// asked again: at once when the browser is back online or another request
// gets through, otherwise after a wait that doubles up to half a minute,
// or the longer one its Retry-After asks for. The token is kept meanwhile,
// since it may well still work; the login screen is shown all along, for
// whoever would rather sign in.
async function start() {
  const took = takeCode();
  for (let wait = 1000, first = true; ; wait = Math.min(wait * 2, 30000), first = false) {
    const token = savedToken();
    if (session.token) return; // signed in by hand meanwhile
    if (!token) {
      if (!first) return;
      await signedOut();
      if (took === 'invite' && !session.token) invited();
      return;
    }
    let err;
    try {
      const { data } = await request('GET', '/api/me', { token });
      if (session.token) return;
      enter(token, data);
      if (took === 'invite') invited();
      return;
    } catch (e) {
      err = e;
    }
    if (session.token) return;
    if (first) await signedOut();
    if (session.token) return;
    if (err.status === 401) {
      forgetToken(token);
      if (!first) announce('Your session has ended. Please log in again.', { stay: true });
      return;
    }
    const notNow = err.status === 0 || err.status === 429 || err.status >= 500;
    if (!notNow) return announce(err.message, { stay: true });
    if (first) {
      const unreachable = err.status === 0 || err.status === 502 || err.status === 504;
      announce(`${unreachable ? 'The server cannot be reached.' : 'The server is busy or down for maintenance.'} You will be signed in as soon as it answers.`, { stay: true });
    }
    // A server that said when to come back is taken at its word, within
    // reason: a maintenance page's hour would leave the page stuck.
    await sleep(Math.max(wait, Math.min(err.retryAfter ?? 0, 300) * 1000), null, ['online', 'herald:reachable']);
  }
}

// Offline, the page the service worker kept opens all the same (the
// browser's own word, navigator.onLine, says when); this line says why
// nothing new arrives. The live stream and the forms say what they say of
// an unreachable server besides.
function sayOffline() {
  $('#offline').textContent = navigator.onLine ? ''
    : 'You are offline: this is the page kept on this device, and nothing new arrives until the connection is back.';
}
addEventListener('online', sayOffline);
addEventListener('offline', sayOffline);
sayOffline();

// The service worker keeps the page for offline use and shows the
// notifications pushed to this browser. Registering it asks the person
// nothing; permission to notify is asked only on a click. Browsers offer
// no workers outside a secure context (plain http:// to another machine).
if ('serviceWorker' in navigator) {
  addEventListener('load', () => navigator.serviceWorker.register('/sw.js').catch(() => {}));
}

start();
