"""OAuth bearer tokens, beside the layers: what a token is (``bearer_token``, ``jwt``), where
one comes from (``token_providers``: a callback, a file, an unsecured JWT, a client-credentials
grant at a token endpoint) and keeping it fresh (``token_source``).

Two layers use them: the producer's SASL/OAUTHBEARER connections (``network.sasl``) and the
Schema Registry client's bearer authentication (``serialization.registry_settings``); neither
reaches into the other for them.
"""
