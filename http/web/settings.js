// Account settings: name and handle, signed-in devices (one token per
// login), password change and account deletion.

import { h, $, time, showError, clearError, busy } from './dom.js';

export function settings({ session, announce, profileChanged }) {
  const profileForm = $('#profile-form');
  const devicesCard = $('#devices-card');
  const devices = $('#devices');
  const passwordForm = $('#password-form');
  const deleteForm = $('#delete-form');
  const deleteStart = $('#delete-start');

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
    },
  };
}
