"""Share groups (KIP-932): queue-like consumption with per-record acquisition and acknowledgement."""
