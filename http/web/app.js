// Herald's web client: signing in and out, and switching between the
// timeline and the account settings (#settings).

import { h, $, showError, clearError, clearUnreachable, busy, sleep } from './dom.js';
import { KEY, request, savedToken, saveToken, forgetToken } from './api.js';
import { timeline } from './timeline.js';
import { settings } from './settings.js';

// announce speaks through the polite status region. A new node each time,
// so the same words twice are read twice.
function announce(text) {
  $('#notice').replaceChildren(h('span', {}, text));
}

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
    $('#nav').hidden = true;
    show('auth');
    announce(message);
  },
};

// The views' news is about a session: none once it has ended, when the
// login screen's notice says why.
const viewAnnounce = (text) => session.token && announce(text);
const views = {
  timeline: timeline({ session, announce: viewAnnounce }),
  settings: settings({ session, announce: viewAnnounce }),
};

function show(name) {
  // On the first screen the page starts at the top, skip link first;
  // after that, the new screen's heading takes the focus, so keyboard and
  // screen-reader users start there rather than on a control that has
  // disappeared.
  const first = !$('#loading').hidden;
  $('#loading').hidden = true;
  $('#notice').replaceChildren(); // news of the last screen
  for (const v of ['auth', 'timeline', 'settings']) $(`#${v}-view`).hidden = v !== name;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.hash === `#${name}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!first) $(`#${name}-title`).focus();
}

function route() {
  if (!session.token) return;
  const name = location.hash === '#settings' ? 'settings' : 'timeline';
  show(name);
  if (name === 'settings') views.settings.start();
}

function enter(token, me) {
  session.token = token;
  session.me = me;
  $('#whoami').textContent = `Signed in as ${me.email}`;
  $('#nav').hidden = false;
  views.timeline.start();
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
  const { data } = await request('POST', '/api/register', { body: { email: f.email.value, password: f.password.value } });
  return { token: data.token, me: data };
});

$('#logout').addEventListener('click', async () => {
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
  announce('The server cannot be reached. What you type is kept; the page reconnects when the server answers again.');
});
addEventListener('herald:reachable', () => {
  clearUnreachable();
  if (!toldUnreachable) return;
  toldUnreachable = false;
  announce('Connected to the server again.');
});

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
  for (let wait = 1000, first = true; ; wait = Math.min(wait * 2, 30000), first = false) {
    const token = savedToken();
    if (session.token) return; // signed in by hand meanwhile
    if (!token) return void (first && show('auth'));
    let err;
    try {
      const { data } = await request('GET', '/api/me', { token });
      if (!session.token) enter(token, data);
      return;
    } catch (e) {
      err = e;
    }
    if (session.token) return;
    if (first) show('auth');
    if (err.status === 401) {
      forgetToken(token);
      if (!first) announce('Your session has ended. Please log in again.');
      return;
    }
    const notNow = err.status === 0 || err.status === 429 || err.status >= 500;
    if (!notNow) return announce(err.message);
    if (first) {
      const unreachable = err.status === 0 || err.status === 502 || err.status === 504;
      announce(`${unreachable ? 'The server cannot be reached.' : 'The server is busy or down for maintenance.'} You will be signed in as soon as it answers.`);
    }
    // A server that said when to come back is taken at its word, within
    // reason: a maintenance page's hour would leave the page stuck.
    await sleep(Math.max(wait, Math.min(err.retryAfter ?? 0, 300) * 1000), null, ['online', 'herald:reachable']);
  }
}

start();
