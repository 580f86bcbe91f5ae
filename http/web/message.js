// A message as the timeline, a thread and the notifications show it: who
// wrote it (name, @handle and e-mail), when, what it answers, its content
// with links, and the way to its replies.

import { h, time, rich, breakable } from './dom.js';

// profileLink is where a handle's profile is shown.
export const profileLink = (handle) => `#/users/${encodeURIComponent(handle)}`;

// threadLink is where a message is shown with its replies.
export const threadLink = (id) => `#/messages/${id}`;

// author names a person: their name, linked to their profile, then their
// @handle and e-mail, smaller. An account the answer gives no handle for
// is its e-mail alone.
export function author(user) {
  if (!user.handle) return h('span', { class: 'owner', dir: 'auto' }, ...breakable(user.email));
  return h('span', { class: 'author' },
    h('a', { class: 'owner', href: profileLink(user.handle) }, h('bdi', {}, user.name || user.handle)), ' ',
    h('span', { class: 'handle' }, `@${user.handle}`),
    user.email ? h('span', { class: 'email', dir: 'auto' }, ...breakable(user.email)) : null);
}

// authorName is how a person is named in a sentence.
export const authorName = (user) => user.name || user.email || `@${user.handle}`;

// authorInFull names a person beyond doubt, where a name alone could be
// anyone's: their name with their e-mail.
export const authorInFull = (user) => (user.name && user.email ? `${user.name} (${user.email})` : authorName(user));

// replies says how many replies a message has, as a link to its thread.
export function repliesLink(m) {
  const n = m.replies ?? 0;
  if (!n) return null;
  return h('a', { href: threadLink(m.id), class: 'replies' }, n === 1 ? '1 reply' : `${n} replies`);
}

// article renders m's header and content; metaId labels it.
export function article(m, metaId) {
  const edited = m.updatedAt !== m.createdAt;
  return h('article', { 'aria-labelledby': metaId },
    h('div', { class: 'head' },
      h('p', { class: 'meta', id: metaId },
        author(m.user), ' · ', time(m.createdAt), edited ? ' · edited' : null,
        ...(m.replyTo ? [' · ', h('a', { href: threadLink(m.replyTo) }, 'in reply to a message')] : []))),
    h('p', { class: 'content', dir: 'auto' }, ...rich(m.content, m.mentions ?? [])));
}
