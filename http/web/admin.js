// The administration screen (#admin): accounts (search, suspend, the
// administrator role, deleting messages or the account, password resets),
// invitations, the audit log and the settings changed without a restart. The page offers it to administrators
// only; the server refuses its routes to everyone else whatever the page
// does.

import { h, $, time, showError, clearError, busy, breakable } from './dom.js';

export const isAdmin = (user) => !!user?.roles?.includes('ROLE_ADMIN');

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

const DAY = 24 * 60 * 60 * 1000;
const DEFAULT_DAYS = 7; // the server's own default: sent as no expiresAt

// copyText puts input's text on the clipboard, or, where the browser will
// not (no clipboard API outside a secure context, a refused permission),
// selects it for the person to copy, and says which happened in status.
async function copyText(input, status) {
  let said;
  try {
    await navigator.clipboard.writeText(input.value);
    said = 'Copied to the clipboard.';
  } catch {
    input.focus();
    input.select();
    said = 'This browser would not copy it: the text is selected, so press Ctrl+C (⌘C on a Mac) to copy it.';
  }
  // A new node each time, so the same words twice are read twice.
  status.replaceChildren(h('span', {}, said));
}

// secretBox shows a code and its link, which the server shows this once:
// each in a read-only box with a Copy button. onDone closes it.
function secretBox({ id, label, intro, link, code, onDone }) {
  const status = h('p', { class: 'muted', role: 'status' });
  const field = (name, text, value) => {
    const fid = `${id}-${name}`;
    const input = h('input', { id: fid, type: 'text', readonly: true, value, spellcheck: 'false', autocomplete: 'off' });
    const copy = h('button', { type: 'button' }, `Copy ${text.toLowerCase()}`);
    copy.addEventListener('click', () => copyText(input, status));
    return [h('label', { for: fid }, text), h('div', { class: 'inline' }, input, copy)];
  };
  const done = h('button', { type: 'button' }, 'Done');
  done.addEventListener('click', onDone);
  return h('div', { class: 'secret', role: 'group', 'aria-label': label },
    h('p', {}, ...intro),
    ...field('link', 'Link', link),
    ...field('code', 'Code', code),
    status,
    done);
}

export function admin({ session, announce, roleLost }) {
  const view = $('#admin-view');
  const tabs = [...view.querySelectorAll('[role=tab]')];
  const usersSearch = $('#users-search');
  const users = $('#users');
  const usersMore = $('#users-more');
  const inviteForm = $('#invite-form');
  const inviteMade = $('#invite-made');
  const invitesCard = $('#invites-card');
  const invites = $('#invites');
  const auditPanel = $('#panel-audit');
  const audit = $('#audit tbody');
  const auditMore = $('#audit-more');
  const settingsForm = $('#settings-form');

  // epoch changes when the screen stops (the session ends): answers to
  // what was asked before are dropped, so one person's administration
  // never reaches the next person's page.
  let epoch = 0;
  let usersQuery = '';
  let usersNext = null;
  let usersGen = 0;
  let auditNext = null;
  let auditGen = 0;

  const current = (gen) => gen === epoch && session.token;

  // call is session.call for the administration routes. A 403 means the
  // role is gone (revoked by another administrator): the page asks who it
  // is now, and the screen goes if so.
  async function call(method, path, opts) {
    try {
      return await session.call(method, path, opts);
    } catch (err) {
      if (err.status === 403) recheck();
      throw err;
    }
  }

  async function recheck() {
    const gen = epoch;
    try {
      const { data } = await session.call('GET', '/api/me');
      if (!current(gen)) return;
      session.me = data;
      if (!isAdmin(data)) roleLost();
    } catch {
      // unknown: the refusal already shown must do
    }
  }

  // Tabs, as the WAI-ARIA tabs pattern has them: one Tab stop, arrows
  // (and Home, End) move between them, and the tab focused is shown.
  const loaders = { 'tab-users': () => loadUsers(), 'tab-invites': loadInvites, 'tab-audit': () => loadAudit(), 'tab-settings': loadSettings };
  function select(tab, { focus = false } = {}) {
    $('#notice').replaceChildren(); // news of the tab left
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
      $(`#${t.getAttribute('aria-controls')}`).hidden = !on;
    }
    if (focus) tab.focus();
    loaders[tab.id]();
  }
  for (const t of tabs) t.addEventListener('click', () => select(t));
  $('[role=tablist]', view).addEventListener('keydown', (e) => {
    const i = tabs.indexOf(document.activeElement);
    const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (i < 0 || to === undefined) return;
    e.preventDefault();
    select(tabs[(to + tabs.length) % tabs.length], { focus: true });
  });

  // Accounts.

  async function loadUsers({ more = false } = {}) {
    const gen = epoch;
    const mine = more ? usersGen : ++usersGen;
    const before = users.children.length;
    const params = new URLSearchParams();
    if (usersQuery) params.set('q', usersQuery);
    if (more && usersNext) params.set('cursor', usersNext);
    users.setAttribute('aria-busy', 'true');
    if (!more) clearError(usersSearch);
    try {
      const { data } = await call('GET', `/api/admin/users?${params}`);
      if (!current(gen) || mine !== usersGen) return;
      if (!more) users.replaceChildren();
      users.append(...data.items.map(userRow));
      usersNext = data.next;
    } catch (err) {
      if (current(gen) && mine === usersGen) showError(usersSearch, err);
    } finally {
      if (current(gen) && mine === usersGen) {
        users.removeAttribute('aria-busy');
        const hadFocus = document.activeElement === usersMore;
        usersMore.hidden = !usersNext;
        $('#users-empty').hidden = users.children.length > 0 || !!usersNext;
        // The button leaves with the last page: the focus goes on to the
        // first account it brought rather than to the top of the page.
        if (more && usersMore.hidden && hadFocus) {
          users.children[before]?.querySelector('button')?.focus();
        }
        if (more && users.children.length > before) announce(`${plural(users.children.length - before, 'more account')} shown.`);
      }
    }
  }

  usersSearch.addEventListener('submit', (e) => {
    e.preventDefault();
    usersQuery = usersSearch.elements.q.value.trim();
    busy(usersSearch, () => loadUsers());
  });
  // A second press while a page loads would ask for the same page twice.
  usersMore.addEventListener('click', () => users.hasAttribute('aria-busy') || loadUsers({ more: true }));

  // userRow is one account: what it is, its errors, its actions, and a
  // place for a password-reset code, which redrawing the row leaves alone.
  function userRow(u) {
    const li = h('li', { 'data-id': u.id });
    li.account = u;
    li.about = h('p');
    li.actions = h('div', { class: 'actions' });
    li.shelf = h('div');
    li.append(li.about, h('div', { class: 'form-error', role: 'alert' }), li.actions, li.shelf);
    draw(li);
    return li;
  }

  function draw(li) {
    const u = li.account;
    const name = `user-${u.id}-email`;
    li.confirming = null;
    // Unlike h(), replaceChildren would write out a null as "null".
    li.about.replaceChildren(...[
      h('strong', { id: name, dir: 'auto' }, u.email),
      u.id === session.me.id ? ' (you)' : null,
      isAdmin(u) ? h('span', { class: 'badge' }, 'Administrator') : null,
      u.suspended ? h('span', { class: 'badge warn' }, 'Suspended') : null,
      h('br'),
      h('span', { class: 'muted' },
        'Joined ', time(u.createdAt), ' · ',
        ...(u.lastSeenAt ? ['last seen ', time(u.lastSeenAt)] : ['never seen']), ' · ',
        plural(u.messages, 'message')),
    ].filter((c) => c !== null));
    const act = (key, text, danger) =>
      h('button', { type: 'button', 'data-act': key, 'aria-describedby': name, class: danger ? 'danger' : null }, text);
    li.actions.replaceChildren(
      act('suspend', u.suspended ? 'Lift suspension' : 'Suspend'),
      act('admin', isAdmin(u) ? 'Remove administrator' : 'Make administrator'),
      act('reset', 'Reset password'),
      act('messages', 'Delete messages…', true),
      act('delete', 'Delete account…', true));
  }

  // redraw shows the account as the server now has it, the focus back on
  // the button of the act just done.
  function redraw(li, u, act) {
    li.account = u;
    draw(li);
    li.actions.querySelector(`[data-act="${act}"]`)?.focus();
  }

  async function patch(li, change, act, said) {
    const u = li.account;
    await busy(li, async () => {
      try {
        const { data } = await call('PATCH', `/api/admin/users/${u.id}`, { body: change, contentType: 'application/merge-patch+json' });
        clearError(li);
        redraw(li, data, act);
        announce(said(data));
        if (data.id === session.me.id && !isAdmin(data)) {
          session.me = { ...session.me, roles: data.roles };
          roleLost();
        }
      } catch (err) {
        failed(li, err);
      }
    });
  }

  // failed shows why an act on an account was refused; an account deleted
  // meanwhile leaves the list.
  function failed(li, err) {
    if (err.status !== 404) return showError(li, err);
    gone(li);
    announce(`The account ${li.account.email} no longer exists.`);
  }

  function gone(li) {
    const next = li.nextElementSibling ?? li.previousElementSibling;
    const hadFocus = li.contains(document.activeElement) || document.activeElement === document.body;
    li.remove();
    $('#users-empty').hidden = users.children.length > 0 || !!usersNext;
    if (hadFocus) (next?.querySelector('button') ?? usersSearch.elements.q).focus();
  }

  // confirm asks before an act that cannot be undone, in place of the
  // row's buttons; Escape or Cancel takes the question back.
  function confirm(li, act, question, yes) {
    li.confirming = act;
    li.actions.replaceChildren(h('div', { class: 'actions confirm', role: 'group', 'aria-label': question },
      h('span', {}, question),
      h('button', { type: 'button', class: 'danger', 'data-act': `yes-${act}` }, yes),
      h('button', { type: 'button', 'data-act': 'cancel' }, 'Cancel')));
    li.actions.querySelector(`[data-act="yes-${act}"]`).focus();
  }

  function cancel(li) {
    const act = li.confirming;
    draw(li);
    li.actions.querySelector(`[data-act="${act}"]`)?.focus();
  }

  async function deleteMessages(li) {
    const u = li.account;
    await busy(li, async () => {
      try {
        await call('DELETE', `/api/admin/users/${u.id}/messages`);
        clearError(li);
        let fresh = { ...u, messages: 0 };
        try {
          fresh = (await call('GET', `/api/admin/users/${u.id}`)).data;
        } catch {
          // the count is known anyway: none
        }
        redraw(li, fresh, 'messages');
        announce(`Every message of ${u.email} is deleted.`);
      } catch (err) {
        if (li.confirming) cancel(li);
        failed(li, err);
      }
    });
  }

  async function deleteAccount(li) {
    const u = li.account;
    await busy(li, async () => {
      try {
        await call('DELETE', `/api/admin/users/${u.id}`);
        gone(li);
        announce(`The account ${u.email} is deleted, with its messages.`);
      } catch (err) {
        if (li.confirming) cancel(li);
        failed(li, err);
      }
    });
  }

  async function resetPassword(li) {
    const u = li.account;
    await busy(li, async () => {
      try {
        const { data } = await call('POST', `/api/admin/users/${u.id}/password-reset`);
        clearError(li);
        const box = secretBox({
          id: `reset-${u.id}`,
          label: `Password reset for ${u.email}`,
          intro: [`Give this link, or the code, to ${u.email} by a way you trust. It lets them choose a new password once, until `,
            time(data.expiresAt), '. It is shown only now: copy it before you leave this screen.'],
          link: data.url,
          code: data.code,
          onDone() {
            li.shelf.replaceChildren();
            li.actions.querySelector('[data-act="reset"]')?.focus();
          },
        });
        li.shelf.replaceChildren(box);
        const link = $('input', box);
        link.focus();
        link.select();
      } catch (err) {
        failed(li, err);
      }
    });
  }

  const acts = {
    suspend: (li) => patch(li, { suspended: !li.account.suspended }, 'suspend', (u) => u.suspended
      ? `${u.email} is suspended: signed out everywhere, and unable to log in.`
      : `The suspension of ${u.email} is lifted.`),
    admin: (li) => patch(li, { admin: !isAdmin(li.account) }, 'admin', (u) => isAdmin(u)
      ? `${u.email} is an administrator now.`
      : `${u.email} is no longer an administrator.`),
    reset: resetPassword,
    messages: (li) => confirm(li, 'messages', `Delete all ${plural(li.account.messages, 'message')} of ${li.account.email}?`, 'Yes, delete them'),
    delete: (li) => confirm(li, 'delete', `Delete the account ${li.account.email} and all its messages? This cannot be undone.`, 'Yes, delete the account'),
    'yes-messages': deleteMessages,
    'yes-delete': deleteAccount,
    cancel,
  };
  users.addEventListener('click', (e) => {
    const button = e.target.closest('button[data-act]');
    const li = button?.closest('li');
    if (li) acts[button.dataset.act]?.(li);
  });
  users.addEventListener('keydown', (e) => {
    const li = e.target.closest('li');
    if (e.key === 'Escape' && li?.confirming) cancel(li);
  });

  // Invitations.

  async function loadInvites() {
    const gen = epoch;
    clearError(invitesCard);
    invites.setAttribute('aria-busy', 'true');
    try {
      const { data } = await call('GET', '/api/admin/invites');
      if (!current(gen)) return;
      invites.replaceChildren(...data.items.map(inviteRow));
      $('#invites-empty').hidden = data.items.length > 0;
    } catch (err) {
      if (current(gen)) showError(invitesCard, err);
    } finally {
      if (current(gen)) invites.removeAttribute('aria-busy');
    }
  }

  function inviteRow(inv) {
    const name = `invite-${inv.id}`;
    const state = inv.uses >= inv.maxUses ? ' · used up' : Date.parse(inv.expiresAt) <= Date.now() ? ' · expired' : '';
    return h('li', {},
      h('p', {},
        h('strong', { id: name }, `Invitation ${inv.id}`), h('br'),
        h('span', { class: 'muted' },
          `Used ${inv.uses} of ${inv.maxUses}`, ' · expires ', time(inv.expiresAt), ' · made ', time(inv.createdAt), state)),
      h('button', { type: 'button', 'data-id': inv.id, 'aria-describedby': name }, 'Revoke'));
  }

  inviteForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = inviteForm.elements;
    const body = { maxUses: Number(f.maxUses.value) };
    const days = Number(f.expiresAt.value);
    if (days !== DEFAULT_DAYS) body.expiresAt = new Date(Date.now() + days * DAY).toISOString();
    busy(inviteForm, async () => {
      const gen = epoch;
      try {
        const { data } = await call('POST', '/api/admin/invites', { body });
        if (!current(gen)) return;
        clearError(inviteForm);
        inviteForm.reset();
        const box = secretBox({
          id: 'invite-made',
          label: `Invitation ${data.id}`,
          intro: [`Invitation ${data.id} lets ${plural(data.maxUses, 'person', 'people')} create an account until `, time(data.expiresAt),
            '. Send the link to whoever you invite. It is shown only now: copy it before you leave this screen.'],
          link: data.url,
          code: data.code,
          onDone() {
            inviteMade.replaceChildren();
            f.maxUses.focus();
          },
        });
        inviteMade.replaceChildren(box);
        const link = $('input', box);
        link.focus();
        link.select();
        announce(`Invitation ${data.id} is made.`);
        await loadInvites();
      } catch (err) {
        showError(inviteForm, err);
      }
    });
  });

  invites.addEventListener('click', async (e) => {
    const button = e.target.closest('button[data-id]');
    if (!button) return;
    button.disabled = true;
    try {
      await call('DELETE', `/api/admin/invites/${encodeURIComponent(button.dataset.id)}`);
      announce(`Invitation ${button.dataset.id} is revoked.`);
    } catch (err) {
      if (err.status !== 404) {
        button.disabled = false;
        return showError(invitesCard, err);
      }
      announce(`Invitation ${button.dataset.id} was revoked already.`);
    }
    $('#invites-title').focus();
    await loadInvites();
  });

  // The audit log.

  const actions = {
    suspend: 'Suspended',
    unsuspend: 'Lifted a suspension',
    'grant-admin': 'Made administrator',
    'revoke-admin': 'Removed administrator',
    'delete-account': 'Deleted the account',
    'delete-messages': (e) => `Deleted ${plural(e.count ?? 0, 'message')}`,
    'delete-message': 'Deleted a message',
    'password-reset': 'Made a password-reset code',
    'create-invite': 'Made an invitation',
    'revoke-invite': 'Revoked an invitation',
    'download-backup': 'Downloaded a backup',
    'settings-update': (e) => `Changed the settings: ${Object.entries(e.settings ?? {})
      .map(([name, value]) => `${settingNames[name] ?? name} ${value}`).join(', ')}`,
  };

  function target(t) {
    switch (t?.type) {
      case 'user': return h('span', { dir: 'auto' }, ...(t.email ? breakable(t.email) : [`account ${t.id}`]));
      case 'message': return h('span', {}, `message ${t.id} of `, h('span', { dir: 'auto' }, ...(t.owner?.email ? breakable(t.owner.email) : ['a deleted account'])));
      case 'invite': return `invitation ${t.id}`;
      case undefined: return '—';
      default: return `${t.type} ${t.id}`;
    }
  }

  function auditRow(e) {
    const what = actions[e.action] ?? e.action;
    return h('tr', {},
      h('td', {}, time(e.at)),
      h('td', { dir: 'auto' }, ...(e.actor.type === 'server' ? ["The server's machine"] : breakable(e.actor.email))),
      h('td', {}, typeof what === 'function' ? what(e) : what),
      h('td', {}, target(e.target)));
  }

  async function loadAudit({ more = false } = {}) {
    const gen = epoch;
    const mine = more ? auditGen : ++auditGen;
    const before = audit.children.length;
    const params = new URLSearchParams();
    if (more && auditNext) params.set('cursor', auditNext);
    clearError(auditPanel);
    audit.setAttribute('aria-busy', 'true');
    try {
      const { data } = await call('GET', `/api/admin/audit?${params}`);
      if (!current(gen) || mine !== auditGen) return;
      if (!more) audit.replaceChildren();
      audit.append(...data.items.map(auditRow));
      auditNext = data.next;
    } catch (err) {
      if (current(gen) && mine === auditGen) showError(auditPanel, err);
    } finally {
      if (current(gen) && mine === auditGen) {
        audit.removeAttribute('aria-busy');
        const hadFocus = document.activeElement === auditMore;
        auditMore.hidden = !auditNext;
        $('#audit-empty').hidden = audit.children.length > 0 || !!auditNext;
        if (more && audit.children.length > before) announce(`${plural(audit.children.length - before, 'older entry', 'older entries')} shown.`);
        if (more && auditMore.hidden && hadFocus) $('#tab-audit').focus();
      }
    }
  }
  auditMore.addEventListener('click', () => audit.hasAttribute('aria-busy') || loadAudit({ more: true }));

  // Settings.

  const settingNames = { registration: 'who may register:', writesPerAccount: 'writes per account:' };

  function showSettings(data) {
    const f = settingsForm.elements;
    for (const radio of f.registration) radio.checked = radio.value === data.registration;
    f.writesPerAccount.value = data.writesPerAccount;
  }

  async function loadSettings() {
    const gen = epoch;
    clearError(settingsForm);
    try {
      const { data } = await call('GET', '/api/admin/settings');
      if (current(gen)) showSettings(data);
    } catch (err) {
      if (current(gen)) showError(settingsForm, err);
    }
  }

  settingsForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = settingsForm.elements;
    const body = { writesPerAccount: f.writesPerAccount.value.trim() };
    if (f.registration.value) body.registration = f.registration.value;
    busy(settingsForm, async () => {
      const gen = epoch;
      try {
        const { data } = await call('PATCH', '/api/admin/settings', { body, contentType: 'application/merge-patch+json' });
        if (!current(gen)) return;
        clearError(settingsForm);
        showSettings(data);
        announce('The settings are saved, and in force on every instance.');
      } catch (err) {
        if (current(gen)) showError(settingsForm, err);
      }
    });
  });

  async function version() {
    const gen = epoch;
    try {
      const { data } = await session.call('GET', '/api/info');
      if (current(gen)) $('#admin-version').textContent = data.version ? `This server runs Herald ${data.version}.` : '';
    } catch {
      // the version is by the way
    }
  }

  return {
    start() {
      if (!isAdmin(session.me)) return;
      version();
      select(tabs.find((t) => t.getAttribute('aria-selected') === 'true') ?? tabs[0]);
    },
    stop() {
      epoch++;
      usersQuery = '';
      usersNext = auditNext = null;
      usersSearch.reset();
      inviteForm.reset();
      settingsForm.reset();
      for (const scope of [usersSearch, inviteForm, invitesCard, auditPanel, settingsForm]) clearError(scope);
      for (const list of [users, invites, audit, inviteMade]) {
        list.replaceChildren();
        list.removeAttribute('aria-busy');
      }
      for (const el of ['#users-more', '#users-empty', '#invites-empty', '#audit-more', '#audit-empty']) $(el).hidden = true;
      $('#admin-version').textContent = '';
      // The next administrator starts on the first tab.
      tabs.forEach((t, i) => {
        t.setAttribute('aria-selected', String(i === 0));
        t.tabIndex = i === 0 ? 0 : -1;
        $(`#${t.getAttribute('aria-controls')}`).hidden = i !== 0;
      });
    },
  };
}
