"""Classic consumer groups: lifecycle, membership and the sans-IO coordinator core."""
