// DOM helpers. Everything a user typed reaches the page through h(), which
// only ever creates text nodes: never innerHTML, so a message cannot become
// markup.

// h builds an element. attrs become attributes (false/null ones are left
// out); children are nodes or strings, strings becoming text.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v == null) continue;
    el.setAttribute(k, v === true ? '' : v);
  }
  el.append(...children.filter((c) => c != null && c !== false));
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

// time renders an RFC 3339 instant for people, keeping the exact value for
// machines and assistive technology.
export function time(iso) {
  return h('time', { datetime: iso }, dateFormat.format(new Date(iso)));
}

// sentence turns the server's lower-case detail into something to show.
export function sentence(s) {
  s = String(s ?? '').trim();
  if (!s) return s;
  s = s[0].toUpperCase() + s.slice(1);
  return /[.!?]$/.test(s) ? s : s + '.';
}

// showError puts an error in the form's alert region (read out at once) and
// marks the fields the server named.
export function showError(scope, err) {
  if (err.sessionEnded) return; // the login screen says so instead
  clearError(scope);
  const box = $('.form-error', scope);
  const items = [];
  for (const v of err.violations ?? []) {
    const field = scope.querySelector(`[name="${CSS.escape(v.propertyPath)}"]`);
    field?.setAttribute('aria-invalid', 'true');
    if (sentence(v.message) === err.message) continue;
    const label = field?.labels?.[0]?.textContent.trim() ?? v.propertyPath;
    items.push(h('li', {}, `${label}: ${v.message}`));
  }
  box.append(h('p', {}, err.message));
  if (items.length) box.append(h('ul', {}, ...items));
  // No answer at all (status 0): the page takes the error away when the
  // server answers again (clearUnreachable).
  box.toggleAttribute('data-unreachable', err.status === 0);
}

export function clearError(scope) {
  const box = $('.form-error', scope);
  box?.replaceChildren();
  box?.removeAttribute('data-unreachable');
  for (const f of scope.querySelectorAll('[aria-invalid]')) f.removeAttribute('aria-invalid');
}

// clearUnreachable takes away every "the server cannot be reached".
export function clearUnreachable() {
  for (const box of document.querySelectorAll('.form-error[data-unreachable]')) {
    box.replaceChildren();
    box.removeAttribute('data-unreachable');
  }
}

// busy disables a form's buttons while its request is in flight, so a
// double press does not post twice. Disabling the button that has the
// focus drops the focus to <body>, where a keyboard user would have to
// start over from the top of the page; it is given back afterwards, unless
// the work has put it somewhere on purpose.
export async function busy(form, work) {
  const buttons = [...form.querySelectorAll('button')];
  const focused = buttons.find((b) => b === document.activeElement);
  buttons.forEach((b) => (b.disabled = true));
  try {
    return await work();
  } finally {
    buttons.forEach((b) => (b.disabled = false));
    const lost = document.activeElement === document.body || document.activeElement === null;
    if (focused && lost && focused.isConnected && focused.offsetParent !== null) focused.focus();
  }
}

// sleep waits ms, or less: until signal (if any) aborts, or until one of
// the window events in wakeOn fires.
export const sleep = (ms, signal, wakeOn = []) =>
  new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      for (const name of wakeOn) removeEventListener(name, done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    for (const name of wakeOn) addEventListener(name, done);
  });
