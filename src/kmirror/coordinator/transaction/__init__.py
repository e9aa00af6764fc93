"""The transaction coordinator (KIP-98): state in `__transaction_state`, markers to leaders."""
