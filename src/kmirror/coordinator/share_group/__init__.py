"""KIP-932 share groups on the group coordinator: membership, assignment and descriptions."""
