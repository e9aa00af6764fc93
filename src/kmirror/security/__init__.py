"""Transport security: SASL authentication and Kafka's security configs.

Sans-IO, all of it: `jaas` (JAAS config parsing), `plain` (the PLAIN mechanism), `sasl_server`
(the broker's per-connection SASL state machine), `client_config` and `listener_config`
(Kafka's client and listener security configs, validated). Reading PEM files into
`ssl.SSLContext`s is the runtime's (`kmirror.client.tls`).
"""
