"""A mail server for Herald's tests: aiosmtpd (Debian's python3-aiosmtpd) on
127.0.0.1, on a port the kernel picks, which it prints on its first line.
Every message it accepts is written to --dir as N.eml, with N.json beside it
saying how it came: the envelope, whether over TLS, as whom.

  --cert/--key   offer STARTTLS with this certificate, and require it
  --user/--password
                 require AUTH (PLAIN or LOGIN) with these
  --fail N       answer the first N messages 451 (try again later)
  --reject       answer every message 550 (refused for good)
"""
import argparse
import asyncio
import json
import os
import ssl
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


class Saver:
    def __init__(self, out, fail, reject):
        self.out, self.fail, self.reject, self.n = out, fail, reject, 0

    async def handle_DATA(self, server, session, envelope):
        if self.reject:
            return "550 5.7.1 refused for good"
        if self.fail > 0:
            self.fail -= 1
            return "451 4.3.0 try again later"
        self.n += 1
        base = os.path.join(self.out, str(self.n))
        with open(base + ".eml.tmp", "wb") as f:
            f.write(envelope.original_content or envelope.content)
        with open(base + ".json.tmp", "w") as f:
            json.dump({
                "from": envelope.mail_from,
                "to": envelope.rcpt_tos,
                "tls": session.ssl is not None,
                "user": session.auth_data.login.decode()
                if session.authenticated and isinstance(session.auth_data, LoginPassword) else None,
            }, f)
        os.rename(base + ".json.tmp", base + ".json")
        os.rename(base + ".eml.tmp", base + ".eml")
        return "250 2.0.0 OK"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--fail", type=int, default=0)
    p.add_argument("--reject", action="store_true")
    a = p.parse_args()

    tls = None
    if a.cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(a.cert, a.key)

    def authenticate(server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and \
            auth_data.login.decode() == a.user and auth_data.password.decode() == a.password
        return AuthResult(success=ok, auth_data=auth_data if ok else None)

    handler = Saver(a.dir, a.fail, a.reject)

    def factory():
        return SMTP(handler, hostname="mail.test", tls_context=tls, require_starttls=tls is not None,
                    authenticator=authenticate if a.user else None, auth_required=bool(a.user),
                    auth_require_tls=tls is not None)

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(loop.create_server(factory, "127.0.0.1", 0))
    print(server.sockets[0].getsockname()[1], flush=True)
    try:
        loop.run_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
