"""SASL for the producer's connections (KIP-152 framing is ``network.authenticator``'s).

``settings`` turns ``security.protocol`` and the ``sasl.*`` keys into :class:`SaslSettings`;
``client`` is the interface each mechanism implements (``plain``, ``scram``, ``oauthbearer``);
``jaas`` reads ``sasl.jaas.config``; OAUTHBEARER tokens come from ``sparkkafka_sink.oauth``
(shared with the Schema Registry client).
"""
