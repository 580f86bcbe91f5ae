// The page a password-reset link opens (#reset=CODE): whoever holds a code,
// from an administrator or an e-mail, chooses a new password, without
// signing in. On a server that sends e-mail, the page also asks for one.

import { $, showError, clearError, busy } from './dom.js';
import { request } from './api.js';

const DIFFER = 'The two new passwords are not the same; type the same one in both boxes.';

// forgotForm asks for a link by e-mail (#forgot-form), and says what the
// server answers: the same whether or not an account has the address.
function forgotForm(announce) {
  const form = $('#forgot-form');
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    clearError(form);
    busy(form, async () => {
      try {
        const { data } = await request('POST', '/api/password-reset/request', { body: { email: form.elements.email.value.trim() } });
        form.reset();
        announce(data.message);
      } catch (err) {
        showError(form, err);
      }
    });
  });
}

export function resetPage({ done, announce }) {
  forgotForm(announce);
  const form = $('#reset-form');
  const f = form.elements;

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    clearError(form);
    // Typed twice, since nobody sees what they type into a password box,
    // and a typo here would lock the person out again at once.
    if (f.newPassword.value !== f.again.value) {
      showError(form, { message: DIFFER, violations: [{ propertyPath: 'again', message: DIFFER }] });
      return f.again.focus();
    }
    busy(form, async () => {
      try {
        await request('POST', '/api/password-reset', { body: { code: f.code.value.trim(), newPassword: f.newPassword.value } });
        form.reset();
        done();
      } catch (err) {
        showError(form, err);
      }
    });
  });

  return {
    // fill opens the page afresh with code, as its link gave it.
    fill(code) {
      form.reset();
      clearError(form);
      f.code.value = code;
    },
  };
}
