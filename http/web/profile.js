// A person's profile (#/users/{handle}), reached from their name on a
// message and from mentions of them: name, handle, and since when.

import { h, $, time, showError, clearError } from './dom.js';

export function profilePage({ session }) {
  const view = $('#profile-view');
  let asked = 0; // answers to an earlier question are dropped

  return {
    async open(handle) {
      const mine = ++asked;
      clearError(view);
      $('#profile-title').textContent = `@${handle}`;
      $('#profile-handle').replaceChildren();
      $('#profile-since').replaceChildren();
      view.setAttribute('aria-busy', 'true');
      try {
        const { data } = await session.call('GET', `/api/users/${encodeURIComponent(handle)}`);
        if (mine !== asked) return;
        $('#profile-title').replaceChildren(h('bdi', {}, data.name));
        $('#profile-handle').textContent = `@${data.handle}`;
        $('#profile-since').replaceChildren('On Herald since ', time(data.createdAt), '.');
      } catch (err) {
        if (mine !== asked) return;
        if (err.status === 404) err.message = `Nobody has the handle @${handle}.`;
        showError(view, err);
      } finally {
        if (mine === asked) view.removeAttribute('aria-busy');
      }
    },
  };
}
