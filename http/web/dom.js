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

// Times are shown relative to now ("5 minutes ago", "yesterday"), in the
// reader's language, with the exact instant on hover (title) and for
// machines (datetime); refreshTimes keeps the words true as time passes.
const exactFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'full', timeStyle: 'long' });
const dayFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const DAY = 86400000;

// midnight is the start of date's day where the reader is.
const midnight = (date) => new Date(date.getFullYear(), date.getMonth(), date.getDate()).getTime();

// ago says how long before (or after) now date is, as a person would:
// the minutes within the hour, the hours within the day (or half a day
// across midnight), "yesterday" and the days within the week, a date
// beyond that.
export function ago(date, now = new Date()) {
  const seconds = (date - now) / 1000;
  const minutes = Math.round(seconds / 60);
  if (Math.abs(seconds) < 45) return relative.format(0, 'second');
  if (Math.abs(minutes) < 60) return relative.format(minutes, 'minute');
  const hours = Math.round(seconds / 3600);
  const days = Math.round((midnight(date) - midnight(now)) / DAY);
  if (days === 0 || Math.abs(hours) < 12) return relative.format(hours, 'hour');
  if (Math.abs(days) < 7) return relative.format(days, 'day');
  return dayFormat.format(date);
}

// time renders an RFC 3339 instant for people, keeping the exact value for
// machines and assistive technology, and on hover.
export function time(iso) {
  const date = new Date(iso);
  return h('time', { datetime: iso, title: exactFormat.format(date), 'data-relative': true }, ago(date));
}

// refreshTimes says every time shown afresh, as time has passed.
export function refreshTimes() {
  const now = new Date();
  for (const t of document.querySelectorAll('time[data-relative]')) {
    const text = ago(new Date(t.dateTime), now);
    if (t.textContent !== text) t.textContent = text;
  }
}

// breakable lets the browser break an e-mail address (or any dotted name)
// after its "@" and its dots, and nowhere else: a line may end there
// rather than inside a word.
export function breakable(text) {
  const out = [];
  // Each piece is kept whole (nowrap): a browser would break after a
  // hyphen as well.
  for (const part of String(text).split(/(?<=[@.])/)) out.push(h('span', { class: 'nobr' }, part), h('wbr'));
  out.pop();
  return out;
}

// URLs and @handles in content. A URL runs from http:// or https:// to the
// next space, less the punctuation that ends a sentence around it; a
// handle is the contract's: an "@" at the start or after a character that
// cannot be in a handle, then the longest run of handle characters.
const linkable = /\bhttps?:\/\/[^\s<>"]+|(?<![A-Za-z0-9_])@[A-Za-z0-9_]+/gi;

// urlEnd trims what ends a sentence from the end of a URL, and a closing
// bracket that opens nowhere in it: "(see https://example.com/a_(b))."
function urlEnd(s) {
  for (;;) {
    const last = s.at(-1);
    if (/[.,;:!?'*]/.test(last)) s = s.slice(0, -1);
    else if (last === ')' && s.split('(').length < s.split(')').length) s = s.slice(0, -1);
    else if (last === ']' && s.split('[').length < s.split(']').length) s = s.slice(0, -1);
    else return s;
  }
}

// rich renders content as text nodes, with http(s) URLs as links and the
// @handles the server resolved (mentions) as links to their profiles.
// Every piece of it is a text node or an element built here: content
// never becomes markup, and no other scheme ever becomes a link.
export function rich(content, mentions = []) {
  const handles = new Set(mentions.map((m) => m.handle.toLowerCase()));
  const out = [];
  let at = 0;
  for (const match of content.matchAll(linkable)) {
    let text = match[0];
    let link = null;
    if (text[0] === '@') {
      const handle = text.slice(1).toLowerCase();
      if (handles.has(handle)) link = h('a', { href: `#/users/${handle}`, class: 'mention' }, text);
    } else {
      text = urlEnd(text);
      let url = null;
      try {
        url = new URL(text);
      } catch {
        // not a URL after all: left as text
      }
      if (url && (url.protocol === 'http:' || url.protocol === 'https:')) {
        link = h('a', { href: url.href, rel: 'noopener noreferrer nofollow ugc' }, text);
      }
    }
    if (!link) continue;
    out.push(content.slice(at, match.index), link);
    at = match.index + text.length;
  }
  out.push(content.slice(at));
  return out.filter((x) => x !== '');
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

// grow makes a text box as tall as what is typed into it: CSS does
// (field-sizing), and in a browser without that, this script. Whoever
// empties the box by script sends it an input event.
export function grow(box) {
  if (CSS.supports('field-sizing', 'content')) return;
  box.addEventListener('input', () => {
    box.style.height = 'auto';
    box.style.height = `${box.scrollHeight + box.offsetHeight - box.clientHeight}px`;
  });
}
