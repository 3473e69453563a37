"""OpenAI's audio API spoken by the gateway (the routes are
:mod:`voxwire.gateway.routes.openai`): :mod:`.shapes` (its request fields and
response bodies, a voxwire transcript rendered in each ``response_format``),
:mod:`.errors` (its error body and statuses), :mod:`.follow` (a request waits
for its session's transcript, or streams its finals as text deltas)."""
