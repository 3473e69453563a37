"""Who may do what: every access decision voxwire makes, for every broker.

Broker adapters (the embedded broker, the EMQX hooks, Mosquitto's dynamic
security) only translate between their broker and this package:

- :mod:`~voxwire.access.principal`: :class:`Principal` (who is connected),
  :data:`Action`, and the :class:`Authenticator` / :class:`Authorizer`
  interfaces an adapter calls;
- :mod:`~voxwire.access.rules`: the platform's rules: the service user,
  :class:`PlatformAuthenticator` (service secret, session token or API key),
  :class:`SessionAuthorizer` and :func:`topic_rule` (which topics a principal
  may publish, subscribe to or receive), :func:`owns` (whose a session is: its
  tenant's, and for a device key only one it opened), :func:`token_grants` (a token's
  topics as filters, for brokers given them up front) and
  :func:`may_take_client_id` (who may reuse a client id a session holds);
- :mod:`~voxwire.access.owners`: session owners looked up in the store and
  kept for a short while (the authorizer asks per message and subscriber);
- :mod:`~voxwire.access.keys`: API keys (generate, hash, check) and their roles
  (a tenant key, or a device key that only streams and reads its own sessions);
- :mod:`~voxwire.access.tokens`: short-lived session tokens (JWT) for browsers;
- :mod:`~voxwire.access.control`: :class:`AccessControl`, the rules a broker
  that enforces access itself is kept in step with, and :class:`NoAccessSync`
  for brokers that ask voxwire instead.
"""
