"""Browser and web security: response headers, read access (token mode), sign-in, CSRF.

- ``headers``: CSP, nosniff, frame and referrer policies, ``no-store``, on every response
  (``SecuredFastAPI`` puts them outside every other layer).
- ``authenticator``: the one place a bearer token or a session cookie is resolved;
  ``require_scope`` for the API's writes.
- ``gate``: in ``CADENCE_READ_ACCESS=token``, reads need a ``read`` token or a session.
- ``sessions``: the signed session cookie and the CSRF double submit; ``signing``: HMAC.
- ``router``: ``/login`` and ``/logout``.
- ``install``: all of it added to the application (``create_app``).
"""
